/**
 * Waits on the model server and on the agent's own commands, through the real agent loop, the
 * real sandbox and the scripted model server. Times are scaled down where the real ones are minutes.
 */
import { after, before } from 'node:test';
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { runAgent, type AgentBudgets, type AgentRunResult } from '../../../src/agent/loop.ts';
import { ModelClient } from '../../../src/agent/model-client.ts';
import { MemoryTrajectory } from '../../../src/agent/trajectory.ts';
import { faultTest } from '../../support/fault-table.ts';
import { startModelServer, type ModelServer, type ScriptedReply } from '../../support/model-server.ts';
import { openToolbox, type Toolbox } from '../../support/sandbox-harness.ts';

const BUDGETS: AgentBudgets = { maxSteps: 20, maxContextTokens: 131072, maxTokensPerTurn: 8192, maxWallSeconds: 600, bashTimeoutCapSeconds: 1800 };
let box: Toolbox;
before(async () => {
  box = await openToolbox();
});
after(async () => {
  await box?.close();
});

async function run(script: ScriptedReply[], opts: { timeoutMs: number; maxResponseBytes?: number; budgets?: Partial<AgentBudgets> }): Promise<{ result: AgentRunResult; server: ModelServer; ms: number }> {
  const server = await startModelServer({ script });
  const started = Date.now();
  try {
    const client = new ModelClient({ baseURL: server.url, timeoutMs: opts.timeoutMs, maxRetries: 2, retryBaseMs: 5, ...(opts.maxResponseBytes ? { maxResponseBytes: opts.maxResponseBytes } : {}) });
    const result = await runAgent({ title: 'Fix add', body: 'add is wrong', model: 'frognano-4b', client, tools: box.sandbox, budgets: { ...BUDGETS, ...opts.budgets }, trajectory: new MemoryTrajectory() });
    return { result, server, ms: Date.now() - started };
  } finally {
    await server.close();
  }
}

faultTest(
  'the model server sends no headers for longer than the HTTP stack waits by default (scaled: default 0.3 s, server 1.5 s, model timeout 5 s; really 300 s, 400 s and 600 s)',
  'the run succeeds on the first request; the generation is not requested again',
  async () => {
    const previous = getGlobalDispatcher();
    const scaled = new Agent({ headersTimeout: 300, bodyTimeout: 300 });
    setGlobalDispatcher(scaled);
    try {
      const { result, server } = await run([{ delayMs: 1500, content: 'Nothing to change.' }, { content: 'a regeneration' }], { timeoutMs: 5000 });
      const requests = server.chatRequests().length;
      return { observed: `exit ${result.exitReason}; final answer ${JSON.stringify(result.finalAnswer)}; ${requests} request(s), ${result.retries} retries`, pass: result.exitReason === 'agent' && requests === 1 };
    } finally {
      setGlobalDispatcher(previous);
      await scaled.close();
    }
  },
);

faultTest('the model server trickles its body (2 bytes every 100 ms), model timeout 1 s', 'each attempt ends at the model timeout; the run ends as llm_query_error in bounded time', async () => {
  const trickle: ScriptedReply = { content: 'x'.repeat(400), trickle: { chunkBytes: 2, intervalMs: 100 } };
  const { result, ms } = await run([trickle, trickle, trickle], { timeoutMs: 1000 });
  return { observed: `exit ${result.exitReason} after ${ms} ms (3 attempts): ${result.error?.slice(0, 90)}`, pass: result.exitReason === 'llm_query_error' && ms < 15_000 };
});

faultTest('the model server answers with a 500 MB body (cap scaled to 1 MiB)', 'the answer is cut off at the cap and not requested again; the worker memory stays bounded', async () => {
  const rss = process.memoryUsage().rss;
  const { result, server, ms } = await run([{ hugeBody: 500 * 1024 * 1024, contentLength: false }, { content: 'never reached' }], { timeoutMs: 30_000, maxResponseBytes: 1024 * 1024 });
  const grew = (process.memoryUsage().rss - rss) / (1024 * 1024);
  const requests = server.chatRequests().length;
  return {
    observed: `exit ${result.exitReason} after ${ms} ms, ${requests} request(s); RSS grew ${grew.toFixed(0)} MB: ${result.error?.slice(0, 80)}`,
    pass: result.exitReason === 'llm_query_error' && requests === 1 && grew < 150 && /LILYPAD_MODEL_MAX_RESPONSE_MB/.test(result.error ?? ''),
  };
});

faultTest('50 `sleep 1800` calls in one turn, with a 4 s wall-clock budget', 'the run ends at max_time, near the budget: the running call is cut to what is left and the rest are not run', async () => {
  const sleeps = Array.from({ length: 50 }, () => ({ name: 'Bash', arguments: { command: 'sleep 1800', timeout: 1800 } }));
  const { result, ms } = await run([{ toolCalls: sleeps }, { content: 'never reached' }], { timeoutMs: 10_000, budgets: { maxWallSeconds: 4 } });
  return { observed: `exit ${result.exitReason} after ${ms} ms`, pass: result.exitReason === 'max_time' && ms < 15_000 };
});
