import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatCompletion } from 'openai/resources/chat/completions';

import { runAgent, type AgentBudgets, type AgentRunResult, type ToolExecutor } from '../../src/agent/loop.ts';
import { ModelError, type ChatModel, type CompletionOutcome, type RetryRecord } from '../../src/agent/model-client.ts';
import { MemoryTrajectory } from '../../src/agent/trajectory.ts';
import { SandboxError, SandboxLostError } from '../../src/sandbox/errors.ts';
import { CancelledError } from '../../src/shared/cancel.ts';
import type { ToolResult } from '../../src/sandbox/sandbox.ts';

// The agent loop's end conditions, driven in-process: a scripted ChatModel instead of an HTTP
// server, an in-memory ToolExecutor instead of a container, and a mocked Date so that "time passes"
// is a step of the script, not a wait.

const BUDGETS: AgentBudgets = {
  maxSteps: 150,
  maxContextTokens: 131072,
  maxTokensPerTurn: 8192,
  maxWallSeconds: 600,
  bashTimeoutCapSeconds: 1800,
};

interface Usage {
  prompt: number;
  completion: number;
  total: number;
  cached?: number;
}

interface Call {
  name: string;
  arguments: Record<string, unknown>;
}

/** One scripted model turn: a reply, a thrown error, or the server's context-length refusal. */
type Turn =
  | { reply: { content?: string; calls?: Call[]; finish?: string; usage?: Usage; retries?: number }; advanceMs?: number }
  | { throws: Error; advanceMs?: number }
  | { contextLength: string }
  | { waitForAbort: true };

let callSeq = 0;

function completion(r: { content?: string; calls?: Call[]; finish?: string; usage?: Usage }): ChatCompletion {
  const calls = (r.calls ?? []).map((c, index) => ({
    id: `call_${++callSeq}`,
    index,
    type: 'function' as const,
    function: { name: c.name, arguments: JSON.stringify(c.arguments) },
  }));
  const u = r.usage;
  return {
    id: `chatcmpl-${callSeq}`,
    object: 'chat.completion',
    created: 0,
    model: 'frognano-4b',
    choices: [
      {
        index: 0,
        finish_reason: (r.finish ?? (calls.length > 0 ? 'tool_calls' : 'stop')) as 'stop',
        logprobs: null,
        message: { role: 'assistant', content: r.content ?? '', refusal: null, ...(calls.length > 0 ? { tool_calls: calls } : {}) },
      },
    ],
    ...(u
      ? {
          usage: {
            prompt_tokens: u.prompt,
            completion_tokens: u.completion,
            total_tokens: u.total,
            ...(u.cached !== undefined ? { prompt_tokens_details: { cached_tokens: u.cached } } : {}),
          },
        }
      : {}),
  };
}

/** Plays a fixed list of turns; records every request body it was sent. */
class ScriptedModel implements ChatModel {
  readonly bodies: Array<Record<string, unknown>> = [];
  constructor(private readonly turns: Turn[]) {}

  get calls(): number {
    return this.bodies.length;
  }

  async complete(body: Record<string, unknown>, signal: AbortSignal | undefined, onRetry: (r: RetryRecord) => void): Promise<CompletionOutcome> {
    // A deep copy: the loop keeps appending to its message array after this call.
    this.bodies.push(structuredClone(body));
    const turn = this.turns.shift();
    if (!turn) throw new Error(`the script has no turn ${this.bodies.length}`);
    if ('waitForAbort' in turn) {
      if (!signal) throw new Error('waitForAbort needs a signal');
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
      throw new CancelledError('cancelled while the model was generating');
    }
    if ('advanceMs' in turn && turn.advanceMs) mock.timers.tick(turn.advanceMs);
    if ('throws' in turn) throw turn.throws;
    if ('contextLength' in turn) return { kind: 'context_length', message: turn.contextLength, attempts: 1 };
    const retries = turn.reply.retries ?? 0;
    for (let attempt = 1; attempt <= retries; attempt++) onRetry({ attempt, error: 'HTTP 503', status: 503, waitMs: 5, at: new Date().toISOString() });
    return { kind: 'ok', completion: completion(turn.reply), attempts: retries + 1 };
  }
}

interface ToolCallSeen {
  name: string;
  arguments: string;
  cap: number;
}

type ToolHandler = (call: ToolCallSeen) => Partial<ToolResult> | void;

/** Runs no command: answers from handlers by tool name and records what it was asked. */
class MemoryTools implements ToolExecutor {
  readonly seen: ToolCallSeen[] = [];
  constructor(private readonly handlers: Partial<Record<string, ToolHandler>> = {}) {}

  async tool(name: string, rawArguments: string, bashCapSeconds: number): Promise<ToolResult> {
    const call = { name, arguments: rawArguments, cap: bashCapSeconds };
    this.seen.push(call);
    const out = this.handlers[name]?.(call) ?? {};
    return { observation: `Exit code: 0\nSTDOUT:\nran ${name}\n\nSTDERR:\n`, meta: {}, elapsed: 0, ...out };
  }
}

const bash = (command: string, extra: Record<string, unknown> = {}): Call => ({ name: 'Bash', arguments: { command, ...extra } });

interface Run {
  result: AgentRunResult;
  model: ScriptedModel;
  tools: MemoryTools;
  trajectory: MemoryTrajectory;
}

async function run(turns: Turn[], opts: { budgets?: Partial<AgentBudgets>; tools?: MemoryTools; signal?: AbortSignal } = {}): Promise<Run> {
  const model = new ScriptedModel(turns);
  const tools = opts.tools ?? new MemoryTools();
  const trajectory = new MemoryTrajectory();
  const result = await runAgent({
    title: 'add() subtracts',
    body: 'add(2, 3) returns -1',
    model: 'frognano-4b',
    client: model,
    tools,
    budgets: { ...BUDGETS, ...opts.budgets },
    trajectory,
    signal: opts.signal,
  });
  return { result, model, tools, trajectory };
}

beforeEach(() => {
  mock.timers.enable({ apis: ['Date'], now: Date.parse('2026-01-01T00:00:00Z') });
});
afterEach(() => {
  mock.timers.reset();
});

describe('agent loop: the final answer', () => {
  test('a reply without tool calls ends the run as agent, with its text as the final answer and usage summed', async () => {
    const { result, model, tools, trajectory } = await run([
      { reply: { calls: [bash('pytest -q')], usage: { prompt: 1000, completion: 50, total: 1050, cached: 0 } } },
      { reply: { calls: [bash('cat src/app.py'), bash('git diff')], usage: { prompt: 1200, completion: 60, total: 1260, cached: 1000 }, retries: 2 } },
      { reply: { content: 'Fixed add().', usage: { prompt: 1400, completion: 10, total: 1410, cached: 1200 } } },
    ]);
    assert.equal(result.exitReason, 'agent');
    assert.equal(result.finalAnswer, 'Fixed add().');
    assert.equal(result.steps, 3);
    assert.equal(model.calls, 3);
    assert.deepEqual(
      tools.seen.map((c) => JSON.parse(c.arguments).command),
      ['pytest -q', 'cat src/app.py', 'git diff'],
    );
    assert.deepEqual(result.usage, { prompt_tokens: 3600, completion_tokens: 120, total_tokens: 3720, cached_tokens: 2200 });
    assert.equal(result.retries, 2);
    assert.equal(result.contextTokens, 1410);
    assert.equal(trajectory.records.length, 3);
    assert.equal(trajectory.records[1]?.retries.length, 2);
    assert.equal(trajectory.records[1]?.attempts, 3);
    assert.deepEqual(trajectory.records[2]?.usage, { prompt_tokens: 1400, completion_tokens: 10, total_tokens: 1410, cached_tokens: 1200 });
  });

  test('each request carries the whole history so far, unchanged, with max_completion_tokens from the budget', async () => {
    const { model } = await run(
      [{ reply: { calls: [bash('ls')], usage: { prompt: 10, completion: 5, total: 15 } } }, { reply: { content: 'done' } }],
      { budgets: { maxTokensPerTurn: 4096 } },
    );
    const [first, second] = model.bodies as Array<{ messages: unknown[]; max_completion_tokens: number }>;
    assert.ok(first && second);
    assert.equal(first.max_completion_tokens, 4096);
    assert.equal(first.messages.length, 2);
    assert.equal(second.messages.length, 4);
    assert.deepEqual(second.messages.slice(0, 2), first.messages);
    assert.deepEqual((second.messages[3] as { role: string }).role, 'tool');
  });

  test('an empty reply is still a final answer', async () => {
    const { result } = await run([{ reply: { content: '' } }]);
    assert.equal(result.exitReason, 'agent');
    assert.equal(result.finalAnswer, '');
    assert.equal(result.steps, 1);
  });
});

describe('agent loop: max_turns', () => {
  test('the run stops after maxSteps model calls, without another request', async () => {
    const turns: Turn[] = Array.from({ length: 5 }, (_, i) => ({ reply: { calls: [bash(`echo ${i}`)] } }));
    const { result, model, tools } = await run(turns, { budgets: { maxSteps: 3 } });
    assert.equal(result.exitReason, 'max_turns');
    assert.equal(result.steps, 3);
    assert.equal(model.calls, 3);
    // The last turn's calls did run: the budget counts model calls, not tool calls.
    assert.equal(tools.seen.length, 3);
  });
});

describe('agent loop: max_context_len', () => {
  test('usage.total_tokens of the last reply at the budget ends the run before the next request', async () => {
    // An empty observation adds nothing to the estimate: the tracked context is exactly the budget.
    const tools = new MemoryTools({ Bash: () => ({ observation: '' }) });
    const { result, model } = await run(
      [{ reply: { calls: [bash('true')], usage: { prompt: 9000, completion: 1000, total: 10_000 } } }, { reply: { content: 'unreachable' } }],
      { budgets: { maxContextTokens: 10_000 }, tools },
    );
    assert.equal(result.exitReason, 'max_context_len');
    assert.equal(model.calls, 1);
    assert.equal(result.contextTokens, 10_000);
  });

  test('one token under the budget is not enough to stop', async () => {
    const { result, model } = await run(
      [{ reply: { calls: [bash('ls')], usage: { prompt: 9000, completion: 999, total: 9_999 } } }, { reply: { content: 'done' } }],
      { budgets: { maxContextTokens: 10_100 } },
    );
    assert.equal(result.exitReason, 'agent');
    assert.equal(model.calls, 2);
  });

  test('tool output appended since the last reply counts (estimated at 4 characters a token)', async () => {
    // 9000 tokens from usage, then 4000 characters of observation (about 1000 tokens): over 9990.
    const tools = new MemoryTools({ Bash: () => ({ observation: 'x'.repeat(4000) }) });
    const { result, model } = await run(
      [{ reply: { calls: [bash('cat big.log')], usage: { prompt: 8900, completion: 100, total: 9000 } } }, { reply: { content: 'unreachable' } }],
      { budgets: { maxContextTokens: 9990 }, tools },
    );
    assert.equal(result.exitReason, 'max_context_len');
    assert.equal(result.contextTokens, 10_000);
    assert.equal(model.calls, 1);
  });

  test("the server's context-length refusal ends the run gracefully", async () => {
    const { result, trajectory } = await run([
      { reply: { calls: [bash('ls')] } },
      { contextLength: "This model's maximum context length is 131072 tokens" },
    ]);
    assert.equal(result.exitReason, 'max_context_len');
    assert.equal(result.error, undefined);
    assert.equal(result.steps, 2);
    assert.equal(trajectory.records[1]?.finish_reason, 'context_length');
    assert.match(trajectory.records[1]?.error ?? '', /context length exceeded: This model's maximum/);
  });
});

describe('agent loop: max_tokens_per_turn', () => {
  test("finish_reason length ends the run and that turn's tool calls are not run", async () => {
    const { result, tools, model } = await run([
      { reply: { calls: [bash('ls')] } },
      { reply: { content: 'half a thought', calls: [bash('rm -rf build')], finish: 'length' } },
      { reply: { content: 'unreachable' } },
    ]);
    assert.equal(result.exitReason, 'max_tokens_per_turn');
    assert.equal(model.calls, 2);
    assert.deepEqual(
      tools.seen.map((c) => JSON.parse(c.arguments).command),
      ['ls'],
    );
    assert.equal(result.finalAnswer, 'half a thought');
  });
});

describe('agent loop: max_time', () => {
  test('the budget is checked before each model call', async () => {
    // The time runs out during the turn's last tool call: only the check before the next request sees it.
    const tools = new MemoryTools({ Bash: () => void mock.timers.tick(60_000) });
    const { result, model, trajectory } = await run([{ reply: { calls: [bash('make')] } }, { reply: { content: 'unreachable' } }], {
      budgets: { maxWallSeconds: 60 },
      tools,
    });
    assert.equal(result.exitReason, 'max_time');
    assert.equal(model.calls, 1);
    assert.equal(result.steps, 1);
    assert.equal(trajectory.records[0]?.error, undefined);
  });

  test('time spent waiting for the model counts against the budget', async () => {
    const { result, tools } = await run([{ reply: { calls: [bash('make')] }, advanceMs: 60_000 }, { reply: { content: 'unreachable' } }], {
      budgets: { maxWallSeconds: 60 },
    });
    assert.equal(result.exitReason, 'max_time');
    assert.equal(tools.seen.length, 0);
  });

  test("when the budget runs out inside a turn, the rest of that turn's calls are not run", async () => {
    const tools = new MemoryTools({
      Bash: (c) => {
        if (JSON.parse(c.arguments).command === 'slow') mock.timers.tick(120_000);
      },
    });
    const { result, model, trajectory } = await run(
      [{ reply: { calls: [bash('quick'), bash('slow'), bash('never 1'), bash('never 2')] } }, { reply: { content: 'unreachable' } }],
      { budgets: { maxWallSeconds: 100 }, tools },
    );
    assert.equal(result.exitReason, 'max_time');
    assert.deepEqual(
      tools.seen.map((c) => JSON.parse(c.arguments).command),
      ['quick', 'slow'],
    );
    assert.equal(model.calls, 1);
    const record = trajectory.records.at(-1);
    assert.equal(record?.tools.length, 2);
    assert.match(record?.error ?? '', /^max_time: the wall-clock budget of 100 s ran out; 2 of this turn's 4 tool call\(s\) were not run$/);
    // The assistant message stays as sent, all four calls included: the history rules hold.
    assert.equal(record?.assistant.tool_calls?.length, 4);
  });

  test("a Bash call's timeout is cut to the budget left, rounded up", async () => {
    const tools = new MemoryTools({ Bash: () => ({ meta: { capped: true } }) });
    const { result, trajectory } = await run(
      // 30.5 s spent in the model of 100: 69.5 s left, so the call may run 70 s.
      [{ reply: { calls: [bash('pytest', { timeout: 600 })] }, advanceMs: 30_500 }, { reply: { content: 'done' } }],
      { budgets: { maxWallSeconds: 100, bashTimeoutCapSeconds: 1800 }, tools },
    );
    assert.equal(result.exitReason, 'agent');
    assert.equal(tools.seen[0]?.cap, 70);
    assert.deepEqual(trajectory.records[0]?.warnings, ["a Bash call asked for a timeout beyond the run's remaining wall-clock budget; it ran with 70s"]);
    assert.deepEqual(result.warnings, trajectory.records[0]?.warnings);
  });

  test('with plenty of budget left, the configured cap applies and its warning names the setting', async () => {
    const tools = new MemoryTools({ Bash: () => ({ meta: { capped: true } }) });
    const { tools: seen, result } = await run([{ reply: { calls: [bash('pytest', { timeout: 9000 })] } }, { reply: { content: 'done' } }], {
      budgets: { maxWallSeconds: 3600, bashTimeoutCapSeconds: 300 },
      tools,
    });
    assert.equal(seen.seen[0]?.cap, 300);
    assert.deepEqual(result.warnings, ['a Bash call asked for a timeout above the cap; it ran with 300s (LILYPAD_BASH_TIMEOUT_CAP_SECONDS)']);
  });

  test('the cut timeout is never below 1 second', async () => {
    const { tools } = await run([{ reply: { calls: [bash('ls')] }, advanceMs: 99_900 }, { reply: { content: 'done' } }], {
      budgets: { maxWallSeconds: 100 },
    });
    assert.equal(tools.seen[0]?.cap, 1);
  });
});

describe('agent loop: llm_query_error', () => {
  test('a ModelError ends the run with its message', async () => {
    const { result, trajectory } = await run([
      { reply: { calls: [bash('ls')] } },
      { throws: new ModelError('the model server failed (HTTP 500) (after 3 attempts): boom', 500) },
    ]);
    assert.equal(result.exitReason, 'llm_query_error');
    assert.equal(result.error, 'the model server failed (HTTP 500) (after 3 attempts): boom');
    assert.equal(result.steps, 2);
    assert.equal(trajectory.records[1]?.error, result.error);
  });

  test('any other error from the model is an llm_query_error that says it was unexpected', async () => {
    const { result } = await run([{ throws: new TypeError('cannot read choices') }]);
    assert.equal(result.exitReason, 'llm_query_error');
    assert.equal(result.error, 'unexpected model client error: cannot read choices');
  });
});

describe('agent loop: cancellation', () => {
  test('a signal aborted before the start makes no request', async () => {
    const ac = new AbortController();
    ac.abort();
    const { result, model } = await run([{ reply: { content: 'unreachable' } }], { signal: ac.signal });
    assert.equal(result.exitReason, 'cancelled');
    assert.equal(result.steps, 0);
    assert.equal(model.calls, 0);
  });

  test("an abort during a turn's last tool call stops the run before the next request", async () => {
    const ac = new AbortController();
    const tools = new MemoryTools({ Bash: () => void ac.abort(new Error('user cancelled')) });
    const { result, model, trajectory } = await run([{ reply: { calls: [bash('ls')] } }, { reply: { content: 'unreachable' } }], { signal: ac.signal, tools });
    assert.equal(result.exitReason, 'cancelled');
    assert.equal(result.steps, 1);
    assert.equal(model.calls, 1);
    assert.equal(trajectory.records.length, 1);
  });

  test('an abort while the model generates (CancelledError from the model) ends the run as cancelled, not llm_query_error', async () => {
    const ac = new AbortController();
    const model = new ScriptedModel([{ waitForAbort: true }]);
    const trajectory = new MemoryTrajectory();
    const running = runAgent({
      title: 't',
      body: 'b',
      model: 'm',
      client: model,
      tools: new MemoryTools(),
      budgets: BUDGETS,
      trajectory,
      signal: ac.signal,
    });
    ac.abort(new Error('shutdown'));
    const result = await running;
    assert.equal(result.exitReason, 'cancelled');
    assert.equal(result.steps, 1);
    assert.equal(trajectory.records[0]?.error, 'cancelled while waiting for the model');
  });

  test("an abort during a tool call skips the rest of that turn's calls", async () => {
    const ac = new AbortController();
    const tools = new MemoryTools({ Read: () => void ac.abort() });
    const { result, model } = await run(
      [{ reply: { calls: [{ name: 'Read', arguments: { file_path: 'a.py' } }, bash('never')] } }, { reply: { content: 'unreachable' } }],
      { signal: ac.signal, tools },
    );
    assert.equal(result.exitReason, 'cancelled');
    assert.deepEqual(
      tools.seen.map((c) => c.name),
      ['Read'],
    );
    assert.equal(model.calls, 1);
  });

  test('a CancelledError from a tool ends the run as cancelled', async () => {
    const tools = new MemoryTools({
      Bash: () => {
        throw new CancelledError('shutdown');
      },
    });
    const { result } = await run([{ reply: { calls: [bash('ls')] } }], { tools });
    assert.equal(result.exitReason, 'cancelled');
  });
});

describe('agent loop: tool failures', () => {
  test('SandboxLostError propagates out of the loop (the job retries) instead of ending as tool_error', async () => {
    const tools = new MemoryTools({
      Bash: () => {
        throw new SandboxLostError('the container was removed by the engine');
      },
    });
    const trajectory = new MemoryTrajectory();
    await assert.rejects(
      runAgent({
        title: 't',
        body: 'b',
        model: 'm',
        client: new ScriptedModel([{ reply: { calls: [bash('ls')] } }]),
        tools,
        budgets: BUDGETS,
        trajectory,
      }),
      (err: unknown) => err instanceof SandboxLostError && err.message === 'the container was removed by the engine',
    );
    // The step is still on record.
    assert.equal(trajectory.records.length, 1);
  });

  test('any other SandboxError ends the run as tool_error with its message', async () => {
    const tools = new MemoryTools({
      Bash: () => {
        throw new SandboxError('the toolbox channel closed');
      },
    });
    const { result, model } = await run([{ reply: { calls: [bash('ls'), bash('never')] } }, { reply: { content: 'unreachable' } }], { tools });
    assert.equal(result.exitReason, 'tool_error');
    assert.equal(result.error, 'the toolbox channel closed');
    assert.equal(tools.seen.length, 1);
    assert.equal(model.calls, 1);
  });

  test('an unexpected error from a tool is a tool_error that says so', async () => {
    const tools = new MemoryTools({
      Glob: () => {
        throw new RangeError('bad offset');
      },
    });
    const { result } = await run([{ reply: { calls: [{ name: 'Glob', arguments: { pattern: '**/*.py' } }] } }], { tools });
    assert.equal(result.exitReason, 'tool_error');
    assert.equal(result.error, 'tool execution failed: bad offset');
  });
});

describe('an attempt going nowhere ends as stuck, and nothing is added to the conversation', () => {
  const STUCK = { stuck: { repeats: 3, idleSteps: 4 } };

  test('the same call with the same observation three times: stuck on the third, the rest of that turn not run', async () => {
    const turns: Turn[] = [
      { reply: { calls: [bash('python3 -m pytest -q')] } },
      { reply: { calls: [bash('python3 -m pytest -q')] } },
      { reply: { calls: [bash('python3 -m pytest -q'), bash('ls')] } },
      { reply: { content: 'never asked' } },
    ];
    const { result, model, tools, trajectory } = await run(turns, { budgets: STUCK });
    assert.equal(result.exitReason, 'stuck');
    assert.match(result.error ?? '', /same Bash call came back with the same observation 3 times/);
    assert.equal(model.calls, 3, 'no request after the stuck turn');
    assert.deepEqual(tools.seen.map((c) => JSON.parse(c.arguments).command), ['python3 -m pytest -q', 'python3 -m pytest -q', 'python3 -m pytest -q']);
    assert.match(trajectory.records.at(-1)?.error ?? '', /^stuck: /);
    // Every request was the Leaf conversation and nothing else: no reminder, no warning message.
    for (const body of model.bodies) {
      const messages = body['messages'] as Array<{ role: string }>;
      assert.deepEqual(messages.slice(0, 2).map((m) => m.role), ['system', 'user']);
      assert.ok(messages.slice(2).every((m) => m.role === 'assistant' || m.role === 'tool'));
    }
  });

  test('the same call with a different observation is not a repeat', async () => {
    let n = 0;
    const tools = new MemoryTools({ Bash: () => ({ observation: `Exit code: 1\nSTDOUT:\nrun ${++n}\n\nSTDERR:\n` }) });
    const turns: Turn[] = [1, 2, 3, 4].map(() => ({ reply: { calls: [bash('make test')] } }));
    const { result } = await run([...turns, { reply: { content: 'done' } }], { budgets: { stuck: { repeats: 3, idleSteps: 0 } }, tools });
    assert.equal(result.exitReason, 'agent');
  });

  test('steps that change no file and run nothing new: stuck after idleSteps; an edit or a new command resets the count', async () => {
    const read = (p: string): Call => ({ name: 'Read', arguments: { file_path: p } });
    const edit: Call = { name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'a - b', new_string: 'a + b' } };
    const tools = new MemoryTools({ Read: (c) => ({ observation: `calc.py\n1. ${c.arguments}` }), Edit: () => ({ observation: 'Edited calc.py (1 replacement).' }) });
    const turns: Turn[] = [
      { reply: { calls: [read('a.py')] } },
      { reply: { calls: [read('b.py')] } },
      { reply: { calls: [read('c.py')] } },
      { reply: { calls: [edit] } },
      { reply: { calls: [read('d.py')] } },
      { reply: { calls: [bash('python3 -m unittest')] } },
      { reply: { calls: [read('e.py')] } },
      { reply: { calls: [read('f.py')] } },
      { reply: { calls: [bash('python3 -m unittest')] } },
      { reply: { calls: [read('g.py')] } },
      { reply: { content: 'never asked' } },
    ];
    const { result, model } = await run(turns, { budgets: STUCK, tools });
    assert.equal(result.exitReason, 'stuck');
    assert.match(result.error ?? '', /4 steps in a row changed no file and ran no new command/);
    assert.equal(model.calls, 10, 'the edit (step 4) and the new command (step 6) reset the count; steps 7-10 are idle');
  });

  test('off (0) by default in the budgets: the loop runs as the reference does', async () => {
    const turns: Turn[] = [1, 2, 3, 4, 5].map(() => ({ reply: { calls: [bash('true')] } }));
    const { result } = await run([...turns, { reply: { content: 'done' } }]);
    assert.equal(result.exitReason, 'agent');
  });
});
