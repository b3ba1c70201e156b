import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatCompletion } from 'openai/resources/chat/completions';

import type { DeclaredTool } from '../../src/agent/qwen3-coder-parser.ts';
import { interpretResponse } from '../../src/agent/response.ts';
import { LEAF_TOOLS } from '../../src/agent/tools.ts';

// The five Leaf tools as the rescue parser sees them (name + JSON-schema properties).
const TOOLS: readonly DeclaredTool[] = LEAF_TOOLS.map((t) => ({
  name: t.function.name,
  parameters: (t.function.parameters ?? {}) as DeclaredTool['parameters'],
}));

interface WireCall {
  id: string;
  name: string;
  arguments: string;
}

interface Reply {
  reasoning?: string | null;
  content?: string | null;
  calls?: WireCall[];
  finishReason?: string;
  /** Override the tool_calls field as sent (e.g. null or []). */
  toolCallsField?: null | [];
}

const SGLANG_ID = 'call_0123456789abcdef01234567';
const VLLM_ID = 'chatcmpl-tool-0123456789abcdef0123456789abcdef';

function usage(): object {
  return { prompt_tokens: 812, completion_tokens: 64, total_tokens: 876, prompt_tokens_details: null };
}

/** A completion exactly as SGLang (`--reasoning-parser qwen3`) sends it. */
function sglang(r: Reply): ChatCompletion {
  const calls = (r.calls ?? []).map((c, index) => ({ id: c.id, index, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  const toolCalls = r.toolCallsField !== undefined ? r.toolCallsField : calls.length > 0 ? calls : null;
  const body = {
    id: '5b6f2e0c6d1d4b1c9a3c2f1e0d9c8b7a',
    object: 'chat.completion',
    created: 1760000000,
    model: 'frognano-4b',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: r.content ?? null, reasoning_content: r.reasoning ?? null, tool_calls: toolCalls },
        logprobs: null,
        finish_reason: r.finishReason ?? (calls.length > 0 ? 'tool_calls' : 'stop'),
        matched_stop: null,
      },
    ],
    usage: usage(),
    metadata: { weight_version: 'default' },
  };
  return body as unknown as ChatCompletion;
}

/** A completion exactly as current vLLM sends it (`reasoning`, `tool_calls: []` when none). */
function vllm(r: Reply): ChatCompletion {
  const calls = (r.calls ?? []).map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  const body = {
    id: 'chatcmpl-9f8e7d6c5b4a39281706f5e4d3c2b1a0',
    object: 'chat.completion',
    created: 1760000000,
    model: 'frognano-4b',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: r.content ?? null,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: r.toolCallsField !== undefined ? r.toolCallsField : calls,
          reasoning: r.reasoning ?? null,
        },
        logprobs: null,
        finish_reason: r.finishReason ?? (calls.length > 0 ? 'tool_calls' : 'stop'),
        stop_reason: null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: usage(),
    prompt_logprobs: null,
    kv_transfer_params: null,
  };
  return body as unknown as ChatCompletion;
}

const TOOL_FLAG = '--tool-call-parser qwen3_coder';
const REASONING_FLAG = '--reasoning-parser qwen3';

const EDIT_MARKUP = [
  '<tool_call>',
  '<function=Edit>',
  '<parameter=file_path>',
  'src/app.py',
  '</parameter>',
  '<parameter=old_string>',
  '    return a-b',
  '</parameter>',
  '<parameter=new_string>',
  '    return a + b',
  '</parameter>',
  '</function>',
  '</tool_call>',
].join('\n');

const READ_MARKUP = ['<tool_call>', '<function=Read>', '<parameter=file_path>', 'src/app.py', '</parameter>', '<parameter=offset>', '10', '</parameter>', '</function>', '</tool_call>'].join(
  '\n',
);

describe('interpretResponse: well-configured servers', () => {
  test('SGLang: reasoning_content, opaque call_ id, arguments kept byte for byte, nothing else stored', () => {
    const args = '{"file_path": "src/app.py", "offset": 1}';
    const turn = interpretResponse(
      sglang({ reasoning: 'Let me look at the file.\n', content: '', calls: [{ id: SGLANG_ID, name: 'Read', arguments: args }] }),
      TOOLS,
    );
    assert.deepEqual(turn.message, {
      role: 'assistant',
      content: '',
      tool_calls: [{ id: SGLANG_ID, type: 'function', function: { name: 'Read', arguments: args } }],
      reasoning_content: 'Let me look at the file.\n',
    });
    assert.deepEqual(Object.keys(turn.message), ['role', 'content', 'tool_calls', 'reasoning_content']);
    assert.deepEqual(Object.keys(turn.message.tool_calls?.[0] ?? {}), ['id', 'type', 'function']);
    assert.equal(turn.calls.length, 1);
    assert.equal(turn.calls[0]?.function.arguments, args);
    assert.equal(turn.finishReason, 'tool_calls');
    assert.equal(turn.rescued, false);
    assert.deepEqual(turn.warnings, []);
  });

  test('vLLM: `reasoning` is stored as reasoning_content, chatcmpl-tool- ids kept, vLLM-only fields dropped', () => {
    const a1 = '{"command": "ls -la",  "description": "list"}';
    const a2 = '{"pattern":"**/*.py"}';
    const turn = interpretResponse(
      vllm({
        reasoning: 'Two things to check.',
        content: 'Checking.',
        calls: [
          { id: VLLM_ID, name: 'Bash', arguments: a1 },
          { id: 'chatcmpl-tool-ffffffffffffffffffffffffffffffff', name: 'Glob', arguments: a2 },
        ],
      }),
      TOOLS,
    );
    assert.deepEqual(turn.message, {
      role: 'assistant',
      content: 'Checking.',
      tool_calls: [
        { id: VLLM_ID, type: 'function', function: { name: 'Bash', arguments: a1 } },
        { id: 'chatcmpl-tool-ffffffffffffffffffffffffffffffff', type: 'function', function: { name: 'Glob', arguments: a2 } },
      ],
      reasoning_content: 'Two things to check.',
    });
    assert.equal('reasoning' in turn.message, false);
    assert.deepEqual(
      turn.calls.map((c) => c.id),
      [VLLM_ID, 'chatcmpl-tool-ffffffffffffffffffffffffffffffff'],
    );
    assert.deepEqual(turn.warnings, []);
  });

  test('arguments strings are never re-serialised (spacing, key order, escapes, invalid JSON)', () => {
    const variants = [
      '{"a": 1}',
      '{ "file_path" : "b.py" ,"offset":2 }',
      '{"content":"caf\\u00e9\\n\\ttab","file_path":"x.txt"}',
      '{"file_path":"x.txt","content":"é — 🐸"}',
      '{"command": "echo hi"',
      '',
    ];
    for (const flavour of [sglang, vllm]) {
      for (const args of variants) {
        const turn = interpretResponse(flavour({ calls: [{ id: SGLANG_ID, name: 'Write', arguments: args }] }), TOOLS);
        assert.equal(turn.message.tool_calls?.[0]?.function.arguments, args);
        assert.equal(turn.calls[0]?.function.arguments, args);
      }
    }
  });

  test('empty or absent reasoning is omitted (SGLang null/"", vLLM null/"")', () => {
    const replies = [
      sglang({ content: 'Done.' }),
      sglang({ reasoning: '', content: 'Done.' }),
      vllm({ content: 'Done.' }),
      vllm({ reasoning: '', content: 'Done.' }),
    ];
    for (const c of replies) {
      const turn = interpretResponse(c, TOOLS);
      assert.deepEqual(turn.message, { role: 'assistant', content: 'Done.' });
      assert.equal('reasoning_content' in turn.message, false);
      assert.equal('tool_calls' in turn.message, false);
      assert.deepEqual(turn.calls, []);
      assert.equal(turn.finishReason, 'stop');
      assert.deepEqual(turn.warnings, []);
    }
  });

  test('final answer without calls: SGLang tool_calls null and vLLM tool_calls [] both mean no call', () => {
    for (const c of [sglang({ reasoning: 'ok', content: 'Fixed the bug.' }), vllm({ reasoning: 'ok', content: 'Fixed the bug.' })]) {
      const turn = interpretResponse(c, TOOLS);
      assert.equal(turn.message.content, 'Fixed the bug.');
      assert.equal(turn.message.reasoning_content, 'ok');
      assert.deepEqual(turn.calls, []);
      assert.equal(turn.rescued, false);
    }
  });

  test('token cap hit while thinking: finish_reason length, content null -> empty content, reasoning kept', () => {
    for (const c of [sglang({ reasoning: 'a long chain of thou', finishReason: 'length' }), vllm({ reasoning: 'a long chain of thou', finishReason: 'length' })]) {
      const turn = interpretResponse(c, TOOLS);
      assert.equal(turn.finishReason, 'length');
      assert.deepEqual(turn.message, { role: 'assistant', content: '', reasoning_content: 'a long chain of thou' });
    }
  });

  test('calls parsed by the server win: markup-looking text in content is left alone', () => {
    const content = 'The format looks like <tool_call> ... </tool_call>.';
    const turn = interpretResponse(sglang({ content, calls: [{ id: SGLANG_ID, name: 'Bash', arguments: '{"command":"ls"}' }] }), TOOLS);
    assert.equal(turn.rescued, false);
    assert.equal(turn.message.content, content);
    assert.deepEqual(
      turn.calls.map((c) => c.id),
      [SGLANG_ID],
    );
  });

  test('an undeclared name the server parsed is passed through (the executor answers `Unknown tool`)', () => {
    const turn = interpretResponse(vllm({ calls: [{ id: VLLM_ID, name: 'read', arguments: '{}' }] }), TOOLS);
    assert.equal(turn.calls[0]?.function.name, 'read');
  });
});

describe('interpretResponse: misconfigured servers (serving.md table)', () => {
  test('SGLang without --tool-call-parser: markup in content, tool_calls null, finish stop -> rescued with a warning', () => {
    const content = `I will fix the subtraction.\n\n${EDIT_MARKUP}`;
    const turn = interpretResponse(sglang({ reasoning: 'The bug is in add().', content, finishReason: 'stop' }), TOOLS);
    assert.equal(turn.rescued, true);
    assert.equal(turn.calls.length, 1);
    const call = turn.calls[0];
    assert.ok(call);
    assert.equal(call.function.name, 'Edit');
    assert.deepEqual(JSON.parse(call.function.arguments), { file_path: 'src/app.py', old_string: '    return a-b', new_string: '    return a + b' });
    assert.match(call.id, /^call_[0-9a-f]{24}$/);
    assert.equal(turn.message.content, 'I will fix the subtraction.');
    assert.equal(turn.message.reasoning_content, 'The bug is in add().');
    assert.deepEqual(turn.message.tool_calls, turn.calls);
    assert.ok(
      turn.warnings.some((w) => w.includes(TOOL_FLAG)),
      `a warning should name ${TOOL_FLAG}: ${JSON.stringify(turn.warnings)}`,
    );
  });

  test('wrong parser: finish_reason tool_calls with tool_calls [] and the XML left in content -> rescued', () => {
    for (const c of [
      sglang({ content: `${READ_MARKUP}\n${EDIT_MARKUP}`, finishReason: 'tool_calls', toolCallsField: [] }),
      vllm({ content: `${READ_MARKUP}\n${EDIT_MARKUP}`, finishReason: 'tool_calls', toolCallsField: [] }),
    ]) {
      const turn = interpretResponse(c, TOOLS);
      assert.equal(turn.rescued, true);
      assert.deepEqual(
        turn.calls.map((x) => x.function.name),
        ['Read', 'Edit'],
      );
      // Typed from the declared schema: offset is an integer.
      assert.equal(turn.calls[0]?.function.arguments, '{"file_path":"src/app.py","offset":10}');
      assert.notEqual(turn.calls[0]?.id, turn.calls[1]?.id);
      assert.equal(turn.message.content, '');
      assert.ok(turn.warnings.some((w) => w.includes(TOOL_FLAG)));
    }
  });

  test('no --reasoning-parser: reasoning and </think> inside content are split, with a warning', () => {
    const turn = interpretResponse(sglang({ content: 'The test fails because of an off-by-one.\n</think>\n\nFixed the loop bound.' }), TOOLS);
    assert.equal(turn.message.reasoning_content, 'The test fails because of an off-by-one.');
    assert.equal(turn.message.content, 'Fixed the loop bound.');
    assert.equal(turn.message.content.includes('</think>'), false);
    assert.ok(
      turn.warnings.some((w) => w.includes(REASONING_FLAG)),
      `a warning should name ${REASONING_FLAG}: ${JSON.stringify(turn.warnings)}`,
    );
  });

  test('no parsers at all: </think> and call markup in content -> reasoning split off and the call rescued', () => {
    const turn = interpretResponse(vllm({ content: `Need to read it first.\n</think>\n\n${READ_MARKUP}` }), TOOLS);
    assert.equal(turn.message.reasoning_content, 'Need to read it first.');
    assert.equal(turn.rescued, true);
    assert.equal(turn.calls[0]?.function.name, 'Read');
    assert.equal(turn.message.content, '');
    assert.ok(turn.warnings.some((w) => w.includes(REASONING_FLAG)));
    assert.ok(turn.warnings.some((w) => w.includes(TOOL_FLAG)));
  });

  test('older JSON form <tool_call>{...}</tool_call> is not rescued, content kept, warning names the flag', () => {
    const content = '<tool_call>\n{"name": "Read", "arguments": {"file_path": "src/app.py"}}\n</tool_call>';
    for (const c of [sglang({ content }), vllm({ content })]) {
      const turn = interpretResponse(c, TOOLS);
      assert.equal(turn.rescued, false);
      assert.deepEqual(turn.calls, []);
      assert.equal('tool_calls' in turn.message, false);
      assert.equal(turn.message.content, content);
      assert.ok(turn.warnings.some((w) => w.includes(TOOL_FLAG)));
    }
  });

  test('undeclared tool names in markup are rejected and named in a warning; declared ones still rescued', () => {
    const del = '<tool_call>\n<function=DeleteRepo>\n<parameter=path>\n/\n</parameter>\n</function>\n</tool_call>';
    const lower = '<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>';
    const turn = interpretResponse(sglang({ content: `${del}\n${READ_MARKUP}\n${lower}` }), TOOLS);
    assert.equal(turn.rescued, true);
    assert.deepEqual(
      turn.calls.map((c) => c.function.name),
      ['Read'],
    );
    const w = turn.warnings.find((x) => x.includes('DeleteRepo'));
    assert.ok(w, JSON.stringify(turn.warnings));
    assert.ok(w.includes('bash'));

    const only = interpretResponse(sglang({ content: del }), TOOLS);
    assert.equal(only.rescued, false);
    assert.deepEqual(only.calls, []);
    assert.equal('tool_calls' in only.message, false);
    assert.ok(only.warnings.some((x) => x.includes('DeleteRepo')));
  });

  test('markup inside reasoning (</think> never closed): no call, a warning', () => {
    for (const c of [sglang({ reasoning: `Let me read.\n${READ_MARKUP}`, finishReason: 'stop' }), vllm({ reasoning: `Let me read.\n${READ_MARKUP}` })]) {
      const turn = interpretResponse(c, TOOLS);
      assert.deepEqual(turn.calls, []);
      assert.equal(turn.rescued, false);
      assert.equal(turn.message.reasoning_content, `Let me read.\n${READ_MARKUP}`);
      assert.ok(turn.warnings.some((w) => /reasoning/.test(w)));
    }
  });
});
