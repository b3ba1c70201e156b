import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import type { StepRecord } from '../../src/agent/trajectory.ts';
import { RunStore, type RunInit } from '../../src/observability/run-store.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { buildUserMessage, SYSTEM_PROMPT } from '../../src/agent/prompt.ts';

// Real Redis, a prefix of its own.
const prefix = `lilypad-unit-recbatch-${process.pid}-${Date.now().toString(36)}`;
let redis: Redis;

before(() => {
  redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 2 });
});
after(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const init = (runId: string): RunInit => ({ runId, jobId: 'run-1-2', owner: 'acme', repo: 'calc', repoId: 1, issueNumber: 2, triggeredBy: 'alice', attempt: 1, workerId: 'w1' });
const SECRET = `ghp_${'S3cr'.repeat(9)}`;

function step(n: number): StepRecord {
  return {
    step: n,
    started_at: new Date().toISOString(),
    model_ms: 1,
    attempts: 1,
    retries: [],
    usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 },
    finish_reason: 'tool_calls',
    assistant: { role: 'assistant', content: '', tool_calls: [{ id: `c${n}`, type: 'function', function: { name: 'Read', arguments: '{}' } }] },
    rescued_tool_calls: false,
    tools: [{ id: `c${n}`, name: 'Read', arguments: '{}', observation: `line ${n} ${SECRET}`, duration_ms: 1 }],
    warnings: [],
  };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('steps recorded in a burst reach a run page by themselves, in order, redacted, without a flush', async () => {
  const store = new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 8 * 1024 * 1024 });
  const rec = store.recorder(init('r-burst'), new SecretScanner([]));
  for (let n = 1; n <= 50; n++) rec.step(step(n));
  const view = await until('the 50 steps', async () => {
    const loaded = await store.load('r-burst');
    return loaded && loaded.view.steps.length === 50 ? loaded.view : undefined;
  });
  assert.deepEqual(view.steps.map((s) => s.step), Array.from({ length: 50 }, (_, i) => i + 1));
  assert.equal(view.summary.steps, 50);
  const stored = JSON.stringify(await redis.xrangeBuffer(store.key('r-burst', 'live'), '-', '+'));
  assert.ok(!JSON.stringify(view).includes(SECRET) && !stored.includes(SECRET));
  await rec.finish({ outcome: 'no_change' });
});

test('finish() right after a burst keeps every event and ends the stream with done', async () => {
  const store = new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 8 * 1024 * 1024 });
  const rec = store.recorder(init('r-finish'), new SecretScanner([]));
  rec.task({ system: SYSTEM_PROMPT, user: buildUserMessage('T', 'B') });
  for (let n = 1; n <= 7; n++) rec.step(step(n));
  rec.warning('last words');
  await rec.finish({ outcome: 'no_change', exitReason: 'agent' });
  const done = await store.load('r-finish');
  assert.ok(done);
  assert.equal(done.live, false);
  assert.deepEqual(done.view.steps.map((s) => s.step), [1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(done.view.warnings, ['last words']);
  const entries = await redis.xrangeBuffer(store.key('r-finish', 'live'), '-', '+');
  // task, seven steps, the warning, then done: nothing lost, nothing after done.
  assert.equal(entries.length, 10);
});
