import diagnostics from 'node:diagnostics_channel';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChatCompletion } from 'openai/resources/chat/completions';

import { runAgent } from '../../src/agent/loop.ts';
import { ModelClient, type ChatModel, type CompletionOutcome } from '../../src/agent/model-client.ts';
import { JsonlTrajectory, type StepRecord } from '../../src/agent/trajectory.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { startModelServer } from '../support/model-server.ts';

const SECRET = 'sk-' + 'z'.repeat(40);

/** Tool calls for `n` turns, then a final answer; each observation carries the secret. */
function scripted(n: number): ChatModel {
  let turn = 0;
  return {
    async complete(): Promise<CompletionOutcome> {
      turn++;
      const message =
        turn <= n
          ? { role: 'assistant', content: '', tool_calls: [{ id: `call_${turn}`, type: 'function', function: { name: 'Bash', arguments: '{"command":"env"}' } }] }
          : { role: 'assistant', content: `done, key ${SECRET}` };
      const completion = { id: 'x', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message, finish_reason: turn <= n ? 'tool_calls' : 'stop', logprobs: null }] };
      return { kind: 'ok', completion: completion as unknown as ChatCompletion, attempts: 1 };
    },
  };
}

const tools = { tool: async () => ({ observation: `OPENAI_API_KEY=${SECRET}\n`, meta: {}, elapsed: 0 }) };
const budgets = { maxSteps: 50, maxContextTokens: 1_000_000, maxTokensPerTurn: 100, maxWallSeconds: 60, bashTimeoutCapSeconds: 60 };

test('every step is in the file and the tee, redacted and in order, by the time runAgent returns', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-traj-'));
  const file = path.join(dir, 'trajectory.jsonl');
  const teed: StepRecord[] = [];
  const trajectory = new JsonlTrajectory(file, new SecretScanner([SECRET]), (r) => teed.push(r));
  const result = await runAgent({ title: 't', body: 'b', model: 'm', client: scripted(5), tools, budgets, trajectory });
  // No await between the return and this check: nothing may be left for later.
  assert.equal(result.steps, 6);
  assert.deepEqual(teed.map((r) => r.step), [1, 2, 3, 4, 5, 6]);
  await trajectory.close();
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  assert.deepEqual(lines.map((l) => (JSON.parse(l) as StepRecord).step), [1, 2, 3, 4, 5, 6]);
  const text = readFileSync(file, 'utf8') + JSON.stringify(teed);
  assert.ok(!text.includes(SECRET), 'the secret reached the trajectory');
  assert.ok(text.includes('[REDACTED]'));
});

test('a tee that throws costs the tee only; close() writes records that were still pending', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-traj-'));
  const file = path.join(dir, 'trajectory.jsonl');
  const trajectory = new JsonlTrajectory(file, new SecretScanner([SECRET]), () => {
    throw new Error('recorder down');
  });
  const record = (step: number): StepRecord => ({
    step,
    started_at: new Date(0).toISOString(),
    model_ms: 1,
    attempts: 1,
    retries: [],
    usage: null,
    finish_reason: 'stop',
    assistant: { role: 'assistant', content: SECRET },
    rescued_tool_calls: false,
    tools: [],
    warnings: [],
  });
  trajectory.write(record(1));
  trajectory.write(record(2));
  await trajectory.close();
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  assert.deepEqual(lines.map((l) => (JSON.parse(l) as StepRecord).step), [1, 2]);
  assert.ok(!lines.join('\n').includes(SECRET));
});

test("a step's record is written after the next request has been handed to the connection, not before", async () => {
  // undici writes a request on a reused keep-alive connection only in the event loop's next check
  // phase; a record written in an immediate queued before that delayed every request by its cost.
  const server = await startModelServer({
    script: ({ index }) => (index < 4 ? { content: '', toolCalls: [{ name: 'Read', arguments: { file_path: 'a.py' } }] } : { content: 'done' }),
  });
  const order: string[] = [];
  const onSend = () => order.push('request');
  diagnostics.subscribe('undici:client:sendHeaders', onSend);
  try {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-traj-'));
    const trajectory = new JsonlTrajectory(path.join(dir, 'trajectory.jsonl'), new SecretScanner([]), (r) => order.push(`record ${r.step}`));
    const client = new ModelClient({ baseURL: server.url, timeoutMs: 10_000, maxRetries: 0 });
    const result = await runAgent({ title: 't', body: 'b', model: 'm', client, tools: { tool: async () => ({ observation: '1. x', meta: {}, elapsed: 0 }) }, budgets, trajectory });
    await trajectory.close();
    assert.equal(result.steps, 5);
    assert.deepEqual(order, ['request', 'request', 'record 1', 'request', 'record 2', 'request', 'record 3', 'request', 'record 4', 'record 5']);
  } finally {
    diagnostics.unsubscribe('undici:client:sendHeaders', onSend);
    await server.close();
  }
});
