import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import type { StepRecord } from '../../src/agent/trajectory.ts';
import { RunStore, type RunInit } from '../../src/observability/run-store.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { buildUserMessage, SYSTEM_PROMPT } from '../../src/agent/prompt.ts';
import { renderTests } from '../../src/web/run-page.ts';

// Real Redis, a prefix of its own.
const prefix = `lilypad-unit-runstore-${process.pid}-${Date.now().toString(36)}`;
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

function step(n: number, observation: string, extra: Partial<StepRecord> = {}): StepRecord {
  return {
    step: n,
    started_at: new Date().toISOString(),
    model_ms: 100,
    attempts: 1,
    retries: [],
    usage: { prompt_tokens: 1000 * n, completion_tokens: 10, total_tokens: 1000 * n + 10, cached_tokens: 900 * n },
    finish_reason: 'tool_calls',
    assistant: { role: 'assistant', content: '', reasoning_content: `thinking ${n}`, tool_calls: [{ id: `c${n}`, type: 'function', function: { name: 'Bash', arguments: '{"command":"ls"}' } }] },
    rescued_tool_calls: false,
    tools: [{ id: `c${n}`, name: 'Bash', arguments: '{"command":"ls"}', observation, duration_ms: 5 }],
    warnings: [],
    ...extra,
  };
}

test('a live run folds from its events; once finished it is one compressed record with the same content', async () => {
  const store = new RunStore(redis, { prefix, retentionDays: 30, maxBytes: 8 * 1024 * 1024 });
  const rec = store.recorder(init('r-fold'), new SecretScanner([]));
  rec.task({ system: SYSTEM_PROMPT, user: buildUserMessage('Title', 'Body') });
  rec.config({ model: 'm', budgets: { maxSteps: 5 } });
  rec.step(step(1, 'out 1\n[... truncated ...]'));
  rec.step(step(2, 'out 2'));
  rec.tests('before', { command: 't', outcome: 'failed', exitCode: 1, durationMs: 5, counts: { failed: 1 }, outputTail: 'F' });
  await rec.flush();
  const live = await store.load('r-fold');
  assert.ok(live);
  assert.equal(live.live, true);
  assert.notEqual(live.lastEventId, '0');
  assert.equal(live.view.task?.user, 'Title\nBody');
  assert.deepEqual(live.view.steps.map((s) => s.tools[0]!.observation), ['out 1\n[... truncated ...]', 'out 2']);
  assert.equal(live.view.summary.steps, 2);
  assert.equal(live.view.summary.cachedTokens, 2700);

  await rec.finish({ outcome: 'pull_request', exitReason: 'agent', diff: Buffer.from('diff --git a/x b/x\n'), pr: { number: 3, url: 'http://127.0.0.1/pr/3' } });
  const done = await store.load('r-fold');
  assert.ok(done);
  assert.equal(done.live, false);
  assert.equal(done.view.summary.outcome, 'pull_request');
  assert.equal(done.view.finish?.diff, 'diff --git a/x b/x\n');
  assert.deepEqual(done.view.steps, live.view.steps);
  assert.deepEqual(done.view.tests.before?.outputTail, 'F');
  const ttl = await redis.ttl(store.key('r-fold', 'record'));
  assert.ok(ttl > 29 * 86400 && ttl <= 30 * 86400, `retention applies (ttl ${ttl})`);
  assert.ok((await redis.strlen(store.key('r-fold', 'record'))) < JSON.stringify(done.view).length, 'stored compressed');
  assert.deepEqual((await store.list()).map((s) => s.runId), ['r-fold']);
});

test('secrets are redacted before anything is written', async () => {
  const store = new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 1024 * 1024 });
  const secret = 'sk-live-secret-value-1234567890';
  const rec = store.recorder(init('r-secret'), new SecretScanner([secret]));
  rec.task({ system: SYSTEM_PROMPT, user: buildUserMessage('Title', `use ${secret}`) });
  rec.step(step(1, `token ghp_${'a1B2'.repeat(9)} and ${secret}`));
  await rec.finish({ outcome: 'no_change', why: `nothing (${secret})`, diff: `+${secret}\n` });
  const raw = JSON.stringify((await store.load('r-secret'))!.view);
  assert.ok(!raw.includes(secret));
  assert.ok(!raw.includes('ghp_a1B2'));
  assert.match(raw, /\[REDACTED\]/);
});

test('a run past its size cap is cut, with markers that say so, and still loads', async () => {
  const store = new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 64 * 1024 });
  const rec = store.recorder(init('r-big'), new SecretScanner([]));
  // Incompressible observations: 40 steps of 8 KB random text.
  const noise = () => Array.from({ length: 8192 }, () => String.fromCharCode(33 + Math.floor(Math.random() * 90))).join('');
  for (let i = 1; i <= 40; i++) rec.step(step(i, noise()));
  await rec.finish({ outcome: 'failed', error: 'x' });
  assert.ok((await redis.strlen(store.key('r-big', 'record'))) <= 64 * 1024, 'the record fits the cap');
  const view = (await store.load('r-big'))!.view;
  assert.equal(view.steps.length, 40, 'every step is kept');
  assert.ok(view.notes.some((n) => /LILYPAD_RUN_MAX_MB/.test(n)));
  assert.match(view.steps[39]!.tools[0]!.observation, /cut by Lilypad's run store/);
});

test('what Redis holds is checked on the way back: a foreign summary is an error that says so', async () => {
  const store = new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 1024 * 1024 });
  await redis.set(store.key('r-bad', 'summary'), JSON.stringify({ v: 2, runId: 'r-bad' }));
  await assert.rejects(store.load('r-bad'), /stored summary of run r-bad is not in the expected shape/);
  assert.equal(await store.load('r-none'), null);
});

test('follow() yields events as they are written and ends at done', async () => {
  const store = new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 1024 * 1024 });
  const rec = store.recorder(init('r-follow'), new SecretScanner([]));
  await rec.flush();
  const ctl = new AbortController();
  const seen: string[] = [];
  const following = (async () => {
    for await (const item of store.follow('r-follow', '0', ctl.signal)) if (item) seen.push(item.event.t);
  })();
  rec.step(step(1, 'a'));
  rec.warning('careful');
  await rec.finish({ outcome: 'cancelled' });
  await following;
  assert.deepEqual(seen, ['step', 'warning', 'done']);
});

test('tests that did not run say why, live and once finished, and the run page shows it', async () => {
  const store = new RunStore(redis, { prefix, retentionDays: 30, maxBytes: 8 * 1024 * 1024 });
  const rec = store.recorder(init('r-not-run'), new SecretScanner([]));
  rec.tests('before', { command: 't', outcome: 'failed', exitCode: 1, durationMs: 5, counts: { failed: 1 }, outputTail: 'F' });
  rec.tests('after', null, 'no change');
  await rec.flush();
  const live = await store.load('r-not-run');
  assert.deepEqual(live?.view.tests.notRun, { after: 'no change' });
  assert.equal(live?.view.tests.after, null);
  await rec.finish({ outcome: 'no_change', exitReason: 'agent', why: 'the agent finished without changing any file.' });
  const done = await store.load('r-not-run');
  assert.deepEqual(done?.view.tests.notRun, { after: 'no change' });
  const html = renderTests(done!.view);
  assert.match(html, /<h3>After<\/h3><p class="muted">Not run: no change\.<\/p>/);
  assert.match(html, /<h3>Before: <span class="badge badge-failed">failed<\/span>/);
});
