import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { runAgent, type AgentBudgets, type AgentRunResult, type ToolExecutor } from '../../src/agent/loop.ts';
import { ModelClient } from '../../src/agent/model-client.ts';
import { SYSTEM_PROMPT } from '../../src/agent/prompt.ts';
import { LEAF_TOOLS } from '../../src/agent/tools.ts';
import { MemoryTrajectory } from '../../src/agent/trajectory.ts';
import { SandboxError } from '../../src/sandbox/errors.ts';
import { CancelledError } from '../../src/shared/cancel.ts';
import { startModelServer, type Flavour, type ModelServer, type ModelServerOptions, type ScriptedToolCall } from '../support/model-server.ts';
import { openToolbox, type Toolbox } from '../support/sandbox-harness.ts';

const MODEL = 'frognano-4b';
const TITLE = 'add() subtracts instead of adding';
const BODY = 'Calling `add(2, 3)` returns -1.\n\nExpected 5.';

const DEFAULT_BUDGETS: AgentBudgets = {
  maxSteps: 150,
  maxContextTokens: 131072,
  maxTokensPerTurn: 8192,
  maxWallSeconds: 600,
  bashTimeoutCapSeconds: 1800,
};

let box: Toolbox;

before(async () => {
  box = await openToolbox();
});
after(async () => {
  await box?.close();
});
beforeEach(async () => {
  await box.reset({ 'src/app.py': 'def add(a, b):\n    return a-b\n' });
});

interface Run {
  result: AgentRunResult;
  trajectory: MemoryTrajectory;
  server: ModelServer;
}

async function run(
  serverOpts: ModelServerOptions,
  opts: { budgets?: Partial<AgentBudgets>; signal?: AbortSignal; maxRetries?: number; timeoutMs?: number; tools?: ToolExecutor } = {},
): Promise<Run> {
  const server = await startModelServer(serverOpts);
  try {
    const trajectory = new MemoryTrajectory();
    const client = new ModelClient({ baseURL: server.url, timeoutMs: opts.timeoutMs ?? 20_000, maxRetries: opts.maxRetries ?? 2, retryBaseMs: 5 });
    const result = await runAgent({
      title: TITLE,
      body: BODY,
      model: MODEL,
      client,
      tools: opts.tools ?? box.sandbox,
      budgets: { ...DEFAULT_BUDGETS, ...opts.budgets },
      trajectory,
      signal: opts.signal,
    });
    return { result, trajectory, server };
  } finally {
    await server.close();
  }
}

async function exists(rel: string): Promise<boolean> {
  return (await box.sh(`test -e /testbed/${rel}`)).exitCode === 0;
}

const bash = (command: string, extra: Record<string, unknown> = {}): ScriptedToolCall => ({ name: 'Bash', arguments: { command, ...extra } });

// ---------------------------------------------------------------------------------------------
// Raw JSON helpers: the byte-stability checks compare the exact text the client sent.
// ---------------------------------------------------------------------------------------------

function skipWs(s: string, i: number): number {
  while (i < s.length && ' \t\n\r'.includes(s[i] ?? '')) i++;
  return i;
}

/** End index (exclusive) of the JSON value starting at `i`. */
function valueEnd(s: string, i: number): number {
  const ch = s[i];
  if (ch === '"') {
    i++;
    while (s[i] !== '"') {
      if (i >= s.length) throw new Error('unterminated string');
      i += s[i] === '\\' ? 2 : 1;
    }
    return i + 1;
  }
  if (ch === '{' || ch === '[') {
    let depth = 0;
    while (i < s.length) {
      const c = s[i];
      if (c === '"') {
        i = valueEnd(s, i);
        continue;
      }
      if (c === '{' || c === '[') depth++;
      if (c === '}' || c === ']') depth--;
      i++;
      if (depth === 0) return i;
    }
    throw new Error('unterminated container');
  }
  while (i < s.length && !',}] \t\n\r'.includes(s[i] ?? '')) i++;
  return i;
}

/** The raw text of each top-level value of a JSON object, by key. */
function rawTopLevel(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let i = skipWs(text, 0);
  assert.equal(text[i], '{');
  i = skipWs(text, i + 1);
  while (text[i] !== '}') {
    const keyEnd = valueEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipWs(text, keyEnd);
    assert.equal(text[i], ':');
    i = skipWs(text, i + 1);
    const end = valueEnd(text, i);
    out.set(key, text.slice(i, end));
    i = skipWs(text, end);
    if (text[i] === ',') i = skipWs(text, i + 1);
  }
  return out;
}

/** The raw text of each element of a JSON array. */
function rawElements(text: string): string[] {
  const out: string[] = [];
  let i = skipWs(text, 0);
  assert.equal(text[i], '[');
  i = skipWs(text, i + 1);
  while (text[i] !== ']') {
    const end = valueEnd(text, i);
    out.push(text.slice(i, end));
    i = skipWs(text, end);
    if (text[i] === ',') i = skipWs(text, i + 1);
  }
  return out;
}

function chatRaw(server: ModelServer): Array<{ top: Map<string, string>; messages: string[] }> {
  return server.requests
    .filter((r) => r.method === 'POST' && r.path.startsWith('/v1/chat/completions'))
    .map((r) => {
      const top = rawTopLevel(r.rawBody);
      return { top, messages: rawElements(top.get('messages') ?? '[]') };
    });
}

// ---------------------------------------------------------------------------------------------

describe('agent loop: the request each turn', () => {
  test('exactly the Leaf settings, the five tools in order, one system and one user message', async () => {
    const { result, server } = await run({
      script: [{ reasoning: 'look', toolCalls: [bash('ls src')] }, { reasoning: 'read', toolCalls: [{ name: 'Read', arguments: { file_path: 'src/app.py' } }] }, { content: 'Done.' }],
    });
    assert.equal(result.exitReason, 'agent');
    const requests = server.chatRequests();
    assert.equal(requests.length, 3);
    for (const req of requests) {
      assert.deepEqual(Object.keys(req).sort(), [
        'chat_template_kwargs',
        'max_completion_tokens',
        'messages',
        'min_p',
        'model',
        'parallel_tool_calls',
        'presence_penalty',
        'repetition_penalty',
        'temperature',
        'tool_choice',
        'tools',
        'top_k',
        'top_p',
      ]);
      assert.equal(req.model, MODEL);
      assert.equal(req['tool_choice'], 'auto');
      assert.equal(req['parallel_tool_calls'], true);
      assert.equal(req['temperature'], 0.6);
      assert.equal(req['max_completion_tokens'], 8192);
      assert.equal(req['top_p'], 0.95);
      assert.equal(req['top_k'], 20);
      assert.equal(req['min_p'], 0);
      assert.equal(req['presence_penalty'], 0);
      assert.equal(req['repetition_penalty'], 1);
      assert.deepEqual(req['chat_template_kwargs'], { enable_thinking: true });
      assert.equal(req['stream'], undefined);
      assert.deepEqual(
        (req.tools ?? []).map((t) => (t.function as { name: string }).name),
        ['Read', 'Write', 'Edit', 'Glob', 'Bash'],
      );
      assert.deepEqual(req.tools, JSON.parse(JSON.stringify(LEAF_TOOLS)));
      for (const t of req.tools ?? []) {
        assert.equal('strict' in (t.function as object), false);
        assert.deepEqual(Object.keys(t), ['type', 'function']);
      }
      assert.equal(req.messages.filter((m) => m.role === 'system').length, 1);
      assert.equal(req.messages.filter((m) => m.role === 'user').length, 1);
      assert.deepEqual(req.messages[0], { role: 'system', content: SYSTEM_PROMPT });
      assert.deepEqual(req.messages[1], { role: 'user', content: `${TITLE}\n${BODY}` });
      assert.deepEqual(
        req.messages.slice(2).map((m) => m.role).filter((r) => r !== 'assistant' && r !== 'tool'),
        [],
      );
    }
    assert.equal(requests[0]?.messages.length, 2);
    assert.equal(SYSTEM_PROMPT.split('\n').length, 3);
  });
});

for (const flavour of ['sglang', 'vllm'] as Flavour[]) {
  describe(`agent loop: byte-stable append-only history (${flavour})`, () => {
    test('every request is the previous one plus the returned assistant message plus one tool message per call', async () => {
      const id = (n: number): string => (flavour === 'sglang' ? `call_${String(n).padStart(24, '0')}` : `chatcmpl-tool-${String(n).padStart(32, 'a')}`);
      const turns: Array<{ reasoning?: string; content?: string; toolCalls?: Array<{ name: string; arguments: string; id: string }> }> = [
        {
          reasoning: 'I should look around first.\n',
          toolCalls: [
            { name: 'Bash', arguments: '{"command": "printf abc"}', id: id(1) },
            { name: 'Glob', arguments: '{ "pattern" : "**/*.py" }', id: id(2) },
          ],
        },
        {
          reasoning: '',
          content: 'Writing the notes now.',
          toolCalls: [
            { name: 'Write', arguments: '{"file_path": "notes/caf\\u00e9.txt", "content": "caf\\u00e9 \\ud83d\\udc38\\n"}', id: id(3) },
            { name: 'Read', arguments: '{"file_path":"notes/café.txt"}', id: id(4) },
          ],
        },
        {
          reasoning: 'Now fix the bug. Note: "quotes" and \\ backslashes\tand tabs.',
          content: '',
          toolCalls: [{ name: 'Edit', arguments: '{"file_path":"src/app.py","old_string":"a-b","new_string":"a + b"}', id: id(5) }],
        },
        { reasoning: 'All good.', content: 'Fixed `add`.' },
      ];
      const { result, server, trajectory } = await run({ flavour, script: turns });
      assert.equal(result.exitReason, 'agent');
      assert.equal(result.finalAnswer, 'Fixed `add`.');
      assert.equal(result.steps, 4);
      assert.equal((await box.readBytes('src/app.py')).toString(), 'def add(a, b):\n    return a + b\n');

      const raw = chatRaw(server);
      assert.equal(raw.length, turns.length);
      for (let n = 1; n < raw.length; n++) {
        const prev = raw[n - 1];
        const cur = raw[n];
        const turn = turns[n - 1];
        assert.ok(prev && cur && turn);
        const calls = turn.toolCalls ?? [];
        assert.equal(cur.messages.length, prev.messages.length + 1 + calls.length, `request ${n} length`);
        // Earlier messages byte for byte.
        assert.deepEqual(cur.messages.slice(0, prev.messages.length), prev.messages, `request ${n} rewrote history`);
        // Every other top-level field byte for byte too (tools, settings).
        for (const [key, text] of prev.top) if (key !== 'messages') assert.equal(cur.top.get(key), text, `request ${n} changed ${key}`);

        // The assistant message as the server returned it.
        const assistantRaw = cur.messages[prev.messages.length] ?? '';
        const assistant = JSON.parse(assistantRaw) as Record<string, unknown>;
        const expected: Record<string, unknown> = { role: 'assistant', content: turn.content ?? '' };
        if (calls.length > 0) expected['tool_calls'] = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
        if (turn.reasoning) expected['reasoning_content'] = turn.reasoning;
        assert.deepEqual(assistant, expected, `assistant message of turn ${n}`);
        assert.equal('reasoning' in assistant, false);
        // The arguments strings, exactly as sent by the server (escapes and spacing intact).
        const sentCalls = (assistant['tool_calls'] ?? []) as Array<{ function: { arguments: string } }>;
        for (const [i, c] of calls.entries()) {
          assert.equal(sentCalls[i]?.function.arguments, c.arguments);
          assert.ok(assistantRaw.includes(JSON.stringify(c.arguments)), 'raw arguments string re-encoded differently');
        }

        // One tool message per call, in order, with exactly these keys.
        const record = trajectory.records[n - 1];
        assert.ok(record);
        for (const [i, c] of calls.entries()) {
          const tool = JSON.parse(cur.messages[prev.messages.length + 1 + i] ?? '') as Record<string, unknown>;
          assert.deepEqual(Object.keys(tool), ['role', 'tool_call_id', 'content']);
          assert.equal(tool['role'], 'tool');
          assert.equal(tool['tool_call_id'], c.id);
          assert.equal(tool['content'], record.tools[i]?.observation);
        }
      }
      const last = raw[raw.length - 1];
      assert.ok(last);
      const toolContents = last.messages.map((m) => JSON.parse(m) as Record<string, unknown>).filter((m) => m['role'] === 'tool').map((m) => m['content']);
      assert.deepEqual(toolContents, [
        'Exit code: 0\nSTDOUT:\nabc\nSTDERR:\n',
        'src/app.py',
        'Wrote notes/café.txt (7 bytes).',
        'notes/café.txt\n1. café 🐸',
        'Edited src/app.py (1 replacement).',
      ]);
    });
  });
}

describe('agent loop: tool execution', () => {
  test('several calls in one response run sequentially in the order returned', async () => {
    const { result, server, trajectory } = await run({
      script: [
        {
          toolCalls: [
            { name: 'Write', arguments: { file_path: 'out/a.txt', content: 'hello\n' } },
            { name: 'Read', arguments: { file_path: 'out/a.txt' } },
            { name: 'Edit', arguments: { file_path: 'out/a.txt', old_string: 'hello', new_string: 'bye' } },
            bash('cat out/a.txt; ls out'),
            { name: 'Delete', arguments: { file_path: 'out/a.txt' } },
            { name: 'Read', arguments: { file_path: 'out/a.txt' } },
          ],
        },
        { content: 'ok' },
      ],
    });
    assert.equal(result.exitReason, 'agent');
    const obs = trajectory.records[0]?.tools.map((t) => t.observation);
    assert.deepEqual(obs, [
      'Wrote out/a.txt (6 bytes).',
      'out/a.txt\n1. hello',
      'Edited out/a.txt (1 replacement).',
      'Exit code: 0\nSTDOUT:\nbye\na.txt\n\nSTDERR:\n',
      'Unknown tool: Delete',
      'out/a.txt\n1. bye',
    ]);
    const second = server.chatRequests()[1];
    assert.ok(second);
    assert.deepEqual(
      second.messages.filter((m) => m.role === 'tool').map((m) => m.content),
      obs,
    );
  });
});

describe('agent loop: end conditions and exit reasons', () => {
  test('a response without tool calls ends the run with its text (agent)', async () => {
    const { result, server } = await run({ script: [{ reasoning: 'Nothing to do.', content: 'The code is already correct.' }] });
    assert.equal(result.exitReason, 'agent');
    assert.equal(result.finalAnswer, 'The code is already correct.');
    assert.equal(result.steps, 1);
    assert.equal(result.error, undefined);
    assert.equal(server.chatRequests().length, 1);
  });

  test('an empty final answer still ends the run (agent)', async () => {
    const { result } = await run({ flavour: 'vllm', script: [{ toolCalls: [bash('true')] }, { reasoning: 'done' }] });
    assert.equal(result.exitReason, 'agent');
    assert.equal(result.finalAnswer, '');
    assert.equal(result.steps, 2);
  });

  test('finish_reason length ends the run without executing that turn’s calls (max_tokens_per_turn)', async () => {
    const { result, server, trajectory } = await run({
      script: [
        {
          reasoning: 'long',
          toolCalls: [{ name: 'Write', arguments: { file_path: 'length.txt', content: 'x' } }, bash('touch touched.txt')],
          finishReason: 'length',
        },
        { content: 'never reached' },
      ],
    });
    assert.equal(result.exitReason, 'max_tokens_per_turn');
    assert.equal(result.steps, 1);
    assert.equal(server.chatRequests().length, 1);
    assert.equal(await exists('length.txt'), false);
    assert.equal(await exists('touched.txt'), false);
    assert.deepEqual(trajectory.records[0]?.tools, []);
    assert.equal(trajectory.records[0]?.finish_reason, 'length');
  });

  test('maxSteps model calls end the run (max_turns)', async () => {
    const { result, server, trajectory } = await run(
      { script: ({ index }) => ({ toolCalls: [bash(`echo step${index} >> steps.txt`)] }) },
      { budgets: { maxSteps: 3 } },
    );
    assert.equal(result.exitReason, 'max_turns');
    assert.equal(result.steps, 3);
    assert.equal(server.chatRequests().length, 3);
    assert.equal(trajectory.records.length, 3);
    assert.equal((await box.readBytes('steps.txt')).toString(), 'step0\nstep1\nstep2\n');
  });

  test('tracked context (last usage.total_tokens + ~chars/4 of tool output) reaching the limit ends the run (max_context_len)', async () => {
    const big = bash("head -c 4000 /dev/zero | tr '\\0' a");
    const { result, server, trajectory } = await run(
      { script: [{ toolCalls: [big], usage: { prompt_tokens: 1000, completion_tokens: 10 } }, { content: 'never reached' }] },
      { budgets: { maxContextTokens: 2000 } },
    );
    const obs = trajectory.records[0]?.tools[0]?.observation ?? '';
    assert.equal(obs.length, 4030);
    assert.equal(result.exitReason, 'max_context_len');
    assert.equal(result.contextTokens, 1010 + Math.ceil(obs.length / 4));
    assert.equal(result.steps, 1);
    assert.equal(server.chatRequests().length, 1);

    // Control: with a little more room the run goes on, and tracking restarts from the new usage.
    await box.reset();
    const ok = await run(
      {
        script: [
          { toolCalls: [big], usage: { prompt_tokens: 1000, completion_tokens: 10 } },
          { content: 'done', usage: { prompt_tokens: 1500, completion_tokens: 5 } },
        ],
      },
      { budgets: { maxContextTokens: 2100 } },
    );
    assert.equal(ok.result.exitReason, 'agent');
    assert.equal(ok.result.contextTokens, 1505);
    assert.equal(ok.result.usage.total_tokens, 1010 + 1505);
  });

  for (const flavour of ['sglang', 'vllm'] as Flavour[]) {
    test(`a server context-length 400 ends the run gracefully, work kept (max_context_len, ${flavour})`, async () => {
      const { result, trajectory, server } = await run({
        flavour,
        script: [{ toolCalls: [{ name: 'Write', arguments: { file_path: 'kept.txt', content: 'work\n' } }] }, { error: 'context_length' }, { content: 'never reached' }],
      });
      assert.equal(result.exitReason, 'max_context_len');
      assert.equal(result.steps, 2);
      assert.equal(result.retries, 0);
      assert.equal(server.chatRequests().length, 2);
      assert.equal((await box.readBytes('kept.txt')).toString(), 'work\n');
      const last = trajectory.records[1];
      assert.equal(last?.finish_reason, 'context_length');
      assert.match(last?.error ?? '', /context length/);
    });
  }

  test('the wall-clock budget is checked before each model call (max_time)', async () => {
    const { result, server } = await run({ script: [{ toolCalls: [bash('true')], delayMs: 1100 }, { content: 'never reached' }] }, { budgets: { maxWallSeconds: 1 } });
    assert.equal(result.exitReason, 'max_time');
    assert.equal(result.steps, 1);
    assert.equal(server.chatRequests().length, 1);
  });

  test('the wall-clock budget is checked before each tool call too: a long turn stops mid-way (max_time)', async () => {
    const calls = [1, 2, 3, 4, 5, 6].map((i) => bash(`sleep 1; echo ${i} >> ran.txt`));
    const started = Date.now();
    const { result, server, trajectory } = await run({ script: [{ toolCalls: calls }, { content: 'never reached' }] }, { budgets: { maxWallSeconds: 2 } });
    const elapsed = Date.now() - started;
    assert.equal(result.exitReason, 'max_time');
    assert.equal(result.steps, 1);
    assert.equal(server.chatRequests().length, 1);
    assert.ok(elapsed < 4500, `the run ended ${elapsed} ms after it started, with a 2 s budget (all six calls take 6 s)`);
    const ran = (await box.readBytes('ran.txt')).toString().trim().split('\n');
    assert.ok(ran.length >= 1 && ran.length <= 3, `calls run: ${ran.join(',')}`);
    const rec = trajectory.records[0];
    assert.ok(rec);
    // A call started near the end of the budget has its timeout cut to what is left: it is recorded,
    // timed out, without having written its line.
    const cut = rec.tools.filter((t) => t.observation.startsWith('Timed out after')).length;
    assert.equal(rec.tools.length, ran.length + cut, 'the trajectory records exactly the calls that ran');
    assert.equal(rec.assistant.tool_calls?.length, 6, 'the assistant turn is recorded as the model sent it');
    assert.match(rec.error ?? '', /max_time|wall-clock/);
  });

  test('model errors after retries end the run (llm_query_error), retries recorded', async () => {
    const { result, trajectory, server } = await run({ script: [{ status: 500 }, { status: 500 }, { status: 500 }, { content: 'never reached' }] }, { maxRetries: 2 });
    assert.equal(result.exitReason, 'llm_query_error');
    assert.match(result.error ?? '', /500/);
    assert.equal(result.retries, 2);
    assert.equal(server.chatRequests().length, 3);
    const rec = trajectory.records[0];
    assert.ok(rec);
    assert.equal(rec.retries.length, 2);
    assert.deepEqual(
      rec.retries.map((r) => r.status),
      [500, 500],
    );
    assert.ok(rec.error);
  });

  test('vLLM without --enable-auto-tool-choice: llm_query_error naming the flag, no retry', async () => {
    const { result, server } = await run({
      flavour: 'vllm',
      script: [{ status: 400, body: { error: { message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', type: 'BadRequestError', param: null, code: 400 } } }],
    });
    assert.equal(result.exitReason, 'llm_query_error');
    assert.match(result.error ?? '', /--enable-auto-tool-choice/);
    assert.equal(server.chatRequests().length, 1);
  });

  test('retries that succeed are recorded per step in the trajectory', async () => {
    const { result, trajectory } = await run({
      script: [{ status: 503 }, { toolCalls: [bash('true')] }, { status: 429 }, { dropConnection: true }, { content: 'done' }],
    });
    assert.equal(result.exitReason, 'agent');
    assert.equal(result.retries, 3);
    const [first, second] = trajectory.records;
    assert.ok(first && second);
    assert.equal(first.attempts, 2);
    assert.deepEqual(
      first.retries.map((r) => [r.attempt, r.status]),
      [[1, 503]],
    );
    assert.equal(second.attempts, 3);
    assert.deepEqual(
      second.retries.map((r) => [r.attempt, r.status]),
      [
        [1, 429],
        [2, undefined],
      ],
    );
  });

  test('abort while waiting for the model ends the run (cancelled)', async () => {
    const ac = new AbortController();
    const started = Date.now();
    const { result, trajectory } = await run(
      {
        script: ({ index }) => {
          if (index === 0) return { toolCalls: [bash('true')] };
          setTimeout(() => ac.abort(), 50);
          return { hang: true };
        },
      },
      { signal: ac.signal },
    );
    assert.equal(result.exitReason, 'cancelled');
    assert.equal(result.steps, 2);
    assert.ok(Date.now() - started < 10_000);
    assert.match(trajectory.records[1]?.error ?? '', /cancel/);
  });

  test('abort during a tool call ends the run before the next model call (cancelled)', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    const { result, server } = await run({ script: [{ toolCalls: [bash('sleep 1'), bash('touch after.txt')] }, { content: 'never reached' }] }, { signal: ac.signal });
    assert.equal(result.exitReason, 'cancelled');
    assert.equal(server.chatRequests().length, 1);
    assert.equal(await exists('after.txt'), false);
  });

  test('an infrastructure failure while running a tool ends the run (tool_error); a cancelled tool ends it as cancelled', async () => {
    const failing = (err: Error): ToolExecutor => ({
      tool: (name, args, cap) => (name === 'Glob' ? Promise.reject(err) : box.sandbox.tool(name, args, cap)),
    });
    const script = [{ toolCalls: [{ name: 'Write', arguments: { file_path: 'before.txt', content: 'x' } }, { name: 'Glob', arguments: { pattern: '*' } }, bash('touch after.txt')] }];
    const broken = await run({ script }, { tools: failing(new SandboxError('the sandbox container is gone')) });
    assert.equal(broken.result.exitReason, 'tool_error');
    assert.match(broken.result.error ?? '', /container is gone/);
    assert.equal(await exists('before.txt'), true);
    assert.equal(await exists('after.txt'), false);
    assert.equal(broken.trajectory.records.length, 1);
    assert.equal(broken.server.chatRequests().length, 1);

    const cancelled = await run({ script }, { tools: failing(new CancelledError()) });
    assert.equal(cancelled.result.exitReason, 'cancelled');
  });

  test('a markup turn from a server without the tool parser is rescued: the tool runs and a warning names the flag', async () => {
    const markup = 'I will add the file.\n\n<tool_call>\n<function=Write>\n<parameter=file_path>\nrescued.txt\n</parameter>\n<parameter=content>\n  indented\n</parameter>\n</function>\n</tool_call>';
    const { result, trajectory, server } = await run({
      serverArgs: { tool_call_parser: null },
      script: [{ reasoning: 'write it', content: markup, finishReason: 'stop' }, { content: 'done' }],
    });
    assert.equal(result.exitReason, 'agent');
    assert.equal((await box.readBytes('rescued.txt')).toString(), '  indented');
    assert.ok(
      result.warnings.some((w) => w.includes('--tool-call-parser qwen3_coder')),
      JSON.stringify(result.warnings),
    );
    const rec = trajectory.records[0];
    assert.ok(rec);
    assert.equal(rec.rescued_tool_calls, true);
    assert.ok(rec.warnings.some((w) => w.includes('--tool-call-parser qwen3_coder')));
    const second = server.chatRequests()[1];
    assert.ok(second);
    const assistant = second.messages[2] as unknown as { content: string; tool_calls: Array<{ id: string; function: { name: string; arguments: string } }> };
    assert.equal(assistant.content, 'I will add the file.');
    assert.equal(assistant.tool_calls[0]?.function.name, 'Write');
    assert.deepEqual(JSON.parse(assistant.tool_calls[0]?.function.arguments ?? ''), { file_path: 'rescued.txt', content: '  indented' });
    assert.deepEqual(second.messages[3], { role: 'tool', tool_call_id: assistant.tool_calls[0]?.id, content: 'Wrote rescued.txt (10 bytes).' });
  });

  test('a Bash timeout above the cap is an ordinary observation and a recorded warning', async () => {
    const started = Date.now();
    const { result, trajectory } = await run(
      { script: [{ toolCalls: [bash('echo early; sleep 5; echo late', { timeout: 30 })] }, { content: 'ok' }] },
      { budgets: { bashTimeoutCapSeconds: 1 } },
    );
    assert.equal(result.exitReason, 'agent');
    assert.ok(Date.now() - started < 4500, `took ${Date.now() - started} ms`);
    const rec = trajectory.records[0];
    assert.ok(rec);
    const obs = rec.tools[0]?.observation ?? '';
    assert.ok(obs.startsWith('Timed out after 1.0s\nSTDOUT:\nearly\n'), obs);
    assert.equal(obs.includes('late'), false);
    assert.equal(rec.tools[0]?.meta?.['capped'], true);
    assert.ok(rec.warnings.some((w) => /cap/.test(w)));
    assert.ok(result.warnings.some((w) => /cap/.test(w)));
  });
});
