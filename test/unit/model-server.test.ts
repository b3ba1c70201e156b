import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startModelServer } from '../support/model-server.ts';
import type { ModelServer, ModelServerOptions } from '../support/model-server.ts';

async function waitFor(pred: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

async function call(url: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

function chat(server: ModelServer, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return call(`${server.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Walk into parsed JSON without `any`. */
function at(value: unknown, ...path: (string | number)[]): unknown {
  let cur = value;
  for (const key of path) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string | number, unknown>)[key];
  }
  return cur;
}

function hasKey(value: unknown, key: string): boolean {
  return typeof value === 'object' && value !== null && Object.prototype.hasOwnProperty.call(value, key);
}

async function withServer(opts: ModelServerOptions, fn: (server: ModelServer) => Promise<void>): Promise<void> {
  const server = await startModelServer(opts);
  try {
    await fn(server);
  } finally {
    await server.close();
  }
}

const simpleRequest = { model: 'frognano-4b', messages: [{ role: 'user', content: 'hi' }] };

test('sglang: reasoning in reasoning_content, tool_calls null, finish stop, envelope and default usage', async () => {
  await withServer({ script: [{ reasoning: 'think think', content: 'Hello there' }] }, async (server) => {
    const raw = JSON.stringify(simpleRequest);
    const a = await chat(server, raw);
    assert.equal(a.status, 200);
    assert.match(a.headers.get('content-type') ?? '', /^application\/json/);
    assert.match(String(at(a.json, 'id')), /^chatcmpl-[0-9a-f]{32}$/);
    assert.equal(at(a.json, 'object'), 'chat.completion');
    assert.equal(typeof at(a.json, 'created'), 'number');
    assert.equal(at(a.json, 'model'), 'frognano-4b');
    assert.deepEqual(at(a.json, 'choices'), [
      {
        index: 0,
        message: { role: 'assistant', content: 'Hello there', reasoning_content: 'think think', tool_calls: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ]);
    const completion = Math.ceil(('think think' + 'Hello there').length / 4);
    const prompt = Math.ceil(raw.length / 4);
    assert.deepEqual(at(a.json, 'usage'), { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });
    assert.equal(hasKey(at(a.json, 'usage'), 'prompt_tokens_details'), false);
  });
});

test('vllm: reasoning in reasoning, tool_calls [], finish stop', async () => {
  await withServer({ flavour: 'vllm', script: [{ reasoning: 'hmm', content: 'ok' }, { content: 'no thoughts' }] }, async (server) => {
    const a = await chat(server, simpleRequest);
    assert.equal(a.status, 200);
    assert.match(String(at(a.json, 'id')), /^chatcmpl-[0-9a-f]{32}$/);
    assert.equal(at(a.json, 'object'), 'chat.completion');
    const message = at(a.json, 'choices', 0, 'message');
    assert.equal(at(message, 'role'), 'assistant');
    assert.equal(at(message, 'content'), 'ok');
    assert.equal(at(message, 'reasoning'), 'hmm');
    assert.equal(hasKey(message, 'reasoning_content'), false);
    assert.deepEqual(at(message, 'tool_calls'), []);
    assert.equal(at(a.json, 'choices', 0, 'finish_reason'), 'stop');
    assert.equal(at(a.json, 'choices', 0, 'logprobs'), null);
    assert.equal(at(a.json, 'choices', 0, 'index'), 0);

    const b = await chat(server, simpleRequest);
    assert.equal(at(b.json, 'choices', 0, 'message', 'reasoning'), null);
    assert.deepEqual(at(b.json, 'choices', 0, 'message', 'tool_calls'), []);
  });
});

const oddArguments = '{"file_path":"src/app.py",  "old_string": "    return a-b\\n\\n", "note": "ünïcode <b>tag</b> \\\\ \\"q\\""}';

test('sglang: tool calls get call_<24 hex> ids, arguments byte-for-byte, finish tool_calls, content null', async () => {
  await withServer(
    {
      script: [
        {
          reasoning: 'need to edit',
          toolCalls: [
            { name: 'Edit', arguments: oddArguments },
            { name: 'Read', arguments: { file_path: 'a.ts', limit: 3 } },
            { name: 'Bash', arguments: '{}', id: 'my-own-id' },
          ],
        },
      ],
    },
    async (server) => {
      const a = await chat(server, simpleRequest);
      const message = at(a.json, 'choices', 0, 'message');
      assert.equal(at(message, 'content'), null);
      assert.equal(at(message, 'reasoning_content'), 'need to edit');
      assert.equal(at(a.json, 'choices', 0, 'finish_reason'), 'tool_calls');
      const calls = at(message, 'tool_calls');
      assert.ok(Array.isArray(calls));
      assert.equal(calls.length, 3);
      assert.match(String(at(calls, 0, 'id')), /^call_[0-9a-f]{24}$/);
      assert.match(String(at(calls, 1, 'id')), /^call_[0-9a-f]{24}$/);
      assert.notEqual(at(calls, 0, 'id'), at(calls, 1, 'id'));
      assert.deepEqual(at(calls, 0), { id: at(calls, 0, 'id'), type: 'function', index: 0, function: { name: 'Edit', arguments: oddArguments } });
      assert.deepEqual(at(calls, 1, 'function'), { name: 'Read', arguments: '{"file_path":"a.ts","limit":3}' });
      assert.equal(at(calls, 1, 'index'), 1);
      assert.deepEqual(at(calls, 2), { id: 'my-own-id', type: 'function', index: 2, function: { name: 'Bash', arguments: '{}' } });
      // arguments text survives the wire exactly (checked on the raw response text too)
      assert.ok(a.text.includes(JSON.stringify(oddArguments)));
      const generated = 'need to edit' + oddArguments + '{"file_path":"a.ts","limit":3}' + '{}';
      assert.equal(at(a.json, 'usage', 'completion_tokens'), Math.ceil(generated.length / 4));
    },
  );
});

test('vllm: tool calls get chatcmpl-tool-<32 hex> ids, arguments byte-for-byte, content kept', async () => {
  await withServer(
    { flavour: 'vllm', script: [{ content: 'Let me look.', toolCalls: [{ name: 'Edit', arguments: oddArguments }, { name: 'Read', arguments: { b: 1, a: [true, null] } }] }] },
    async (server) => {
      const a = await chat(server, simpleRequest);
      const message = at(a.json, 'choices', 0, 'message');
      assert.equal(at(message, 'content'), 'Let me look.');
      assert.equal(at(message, 'reasoning'), null);
      assert.equal(at(a.json, 'choices', 0, 'finish_reason'), 'tool_calls');
      const calls = at(message, 'tool_calls');
      assert.ok(Array.isArray(calls));
      assert.match(String(at(calls, 0, 'id')), /^chatcmpl-tool-[0-9a-f]{32}$/);
      assert.match(String(at(calls, 1, 'id')), /^chatcmpl-tool-[0-9a-f]{32}$/);
      assert.deepEqual(at(calls, 0), { id: at(calls, 0, 'id'), type: 'function', index: 0, function: { name: 'Edit', arguments: oddArguments } });
      assert.equal(at(calls, 1, 'function', 'arguments'), '{"b":1,"a":[true,null]}');
    },
  );
});

test('finish reasons: length with content null, explicit override', async () => {
  for (const flavour of ['sglang', 'vllm'] as const) {
    await withServer(
      { flavour, script: [{ reasoning: 'still thinking when the cap hit', content: null, finishReason: 'length' }, { content: 'x', finishReason: 'tool_calls' }] },
      async (server) => {
        const a = await chat(server, simpleRequest);
        assert.equal(at(a.json, 'choices', 0, 'finish_reason'), 'length', flavour);
        assert.equal(at(a.json, 'choices', 0, 'message', 'content'), null, flavour);
        const b = await chat(server, simpleRequest);
        assert.equal(at(b.json, 'choices', 0, 'finish_reason'), 'tool_calls', flavour);
        assert.deepEqual(at(b.json, 'choices', 0, 'message', 'tool_calls'), flavour === 'sglang' ? null : [], flavour);
      },
    );
  }
});

test('usage: explicit numbers and cached_tokens in prompt_tokens_details', async () => {
  for (const flavour of ['sglang', 'vllm'] as const) {
    await withServer(
      { flavour, script: [{ content: 'a', usage: { prompt_tokens: 1000, completion_tokens: 20, cached_tokens: 896 } }, { content: 'b', usage: { prompt_tokens: 7 } }] },
      async (server) => {
        const a = await chat(server, simpleRequest);
        assert.deepEqual(at(a.json, 'usage'), { prompt_tokens: 1000, completion_tokens: 20, total_tokens: 1020, prompt_tokens_details: { cached_tokens: 896 } });
        const b = await chat(server, simpleRequest);
        assert.deepEqual(at(b.json, 'usage'), { prompt_tokens: 7, completion_tokens: 1, total_tokens: 8 });
      },
    );
  }
});

test('sglang context-length error: HTTP 400 with the unwrapped body', async () => {
  await withServer({ contextLength: 1000, script: [{ error: 'context_length', inputTokens: 1500 }, { error: 'context_length' }] }, async (server) => {
    const a = await chat(server, simpleRequest);
    assert.equal(a.status, 400);
    assert.deepEqual(a.json, {
      object: 'error',
      message: "The input (1500 tokens) is longer than the model's context length (1000 tokens).",
      type: 'BadRequestError',
      param: null,
      code: 400,
    });
    assert.equal(hasKey(a.json, 'error'), false);
    // N computed from the request when not given: never below context length + 1
    const b = await chat(server, simpleRequest);
    assert.equal(b.status, 400);
    assert.equal(at(b.json, 'message'), "The input (1001 tokens) is longer than the model's context length (1000 tokens).");
  });
  await withServer({ contextLength: 10, script: [{ error: 'context_length' }] }, async (server) => {
    const raw = JSON.stringify({ ...simpleRequest, messages: [{ role: 'user', content: 'x'.repeat(400) }] });
    const a = await chat(server, raw);
    assert.equal(at(a.json, 'message'), `The input (${Math.ceil(raw.length / 4)} tokens) is longer than the model's context length (10 tokens).`);
  });
});

test('vllm context-length error: HTTP 400 wrapped in error', async () => {
  await withServer({ flavour: 'vllm', script: [{ error: 'context_length', contextLength: 32768, inputTokens: 40000 }] }, async (server) => {
    const a = await chat(server, simpleRequest);
    assert.equal(a.status, 400);
    assert.deepEqual(a.json, {
      error: {
        message:
          "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens in the messages, Please reduce the length of the messages.",
        type: 'BadRequestError',
        param: null,
        code: 400,
      },
    });
  });
});

test('raw status errors: given body, headers, default flavour-shaped body, delay', async () => {
  const autoToolChoice = {
    error: { message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', type: 'BadRequestError', param: null, code: 400 },
  };
  await withServer(
    {
      flavour: 'vllm',
      script: [
        { status: 400, body: autoToolChoice },
        { status: 429, headers: { 'Retry-After': '2' } },
        { status: 500, body: 'Internal Server Error' },
        { status: 503, delayMs: 60 },
      ],
    },
    async (server) => {
      const a = await chat(server, simpleRequest);
      assert.equal(a.status, 400);
      assert.deepEqual(a.json, autoToolChoice);
      const b = await chat(server, simpleRequest);
      assert.equal(b.status, 429);
      assert.equal(b.headers.get('retry-after'), '2');
      assert.deepEqual(b.json, { error: { message: 'Too Many Requests', type: 'TooManyRequestsError', param: null, code: 429 } });
      const c = await chat(server, simpleRequest);
      assert.equal(c.status, 500);
      assert.equal(c.text, 'Internal Server Error');
      assert.match(c.headers.get('content-type') ?? '', /^text\/plain/);
      const started = Date.now();
      const d = await chat(server, simpleRequest);
      assert.equal(d.status, 503);
      assert.ok(Date.now() - started >= 50);
      // the script then runs out: default reply
      const e = await chat(server, simpleRequest);
      assert.equal(e.status, 200);
      assert.equal(at(e.json, 'choices', 0, 'message', 'content'), 'done');
    },
  );
  await withServer({ script: [{ status: 503 }] }, async (server) => {
    const a = await chat(server, simpleRequest);
    assert.equal(a.status, 503);
    assert.deepEqual(a.json, { object: 'error', message: 'Service Unavailable', type: 'ServiceUnavailableError', param: null, code: 503 });
  });
});

test('dropConnection: fetch rejects, the next request is answered', async () => {
  await withServer({ script: [{ dropConnection: true }, { content: 'second' }] }, async (server) => {
    await assert.rejects(chat(server, simpleRequest));
    const b = await chat(server, simpleRequest);
    assert.equal(at(b.json, 'choices', 0, 'message', 'content'), 'second');
    assert.equal(server.chatRequests().length, 2);
  });
});

test('GET /v1/models on both flavours', async () => {
  await withServer({}, async (server) => {
    const a = await call(`${server.url}/models`);
    assert.equal(a.status, 200);
    assert.equal(at(a.json, 'object'), 'list');
    const data = at(a.json, 'data');
    assert.ok(Array.isArray(data));
    assert.equal(data.length, 1);
    assert.equal(at(data, 0, 'id'), 'frognano-4b');
    assert.equal(at(data, 0, 'object'), 'model');
    assert.equal(typeof at(data, 0, 'created'), 'number');
    assert.equal(at(data, 0, 'owned_by'), 'sglang');
    assert.equal(at(data, 0, 'root'), 'frognano-4b');
    assert.equal(at(data, 0, 'max_model_len'), 262144);
  });
  await withServer({ flavour: 'vllm', modelId: 'other-model', contextLength: 131072 }, async (server) => {
    const a = await call(`${server.url}/models`);
    assert.equal(at(a.json, 'object'), 'list');
    assert.equal(at(a.json, 'data', 0, 'id'), 'other-model');
    assert.equal(at(a.json, 'data', 0, 'object'), 'model');
    assert.equal(at(a.json, 'data', 0, 'owned_by'), 'vllm');
    assert.equal(at(a.json, 'data', 0, 'root'), 'other-model');
    assert.equal(at(a.json, 'data', 0, 'max_model_len'), 131072);
    // vLLM reports its served model name in completions
    const c = await chat(server, { messages: [{ role: 'user', content: 'x' }], model: 'whatever' });
    assert.equal(at(c.json, 'model'), 'other-model');
  });
});

test('GET /get_server_info: SGLang launch args; 404 on vLLM', async () => {
  await withServer({ contextLength: 65536 }, async (server) => {
    const a = await call(`${server.origin}/get_server_info`);
    assert.equal(a.status, 200);
    assert.equal(at(a.json, 'tool_call_parser'), 'qwen3_coder');
    assert.equal(at(a.json, 'reasoning_parser'), 'qwen3');
    assert.equal(at(a.json, 'context_length'), 65536);
    assert.equal(at(a.json, 'model_path'), 'frognano-4b');
    assert.equal(at(a.json, 'served_model_name'), 'frognano-4b');
  });
  await withServer({ serverArgs: { tool_call_parser: null, reasoning_parser: 'deepseek-r1' } }, async (server) => {
    const a = await call(`${server.origin}/get_server_info`);
    assert.equal(at(a.json, 'tool_call_parser'), null);
    assert.equal(at(a.json, 'reasoning_parser'), 'deepseek-r1');
  });
  await withServer({ flavour: 'vllm' }, async (server) => {
    const a = await call(`${server.origin}/get_server_info`);
    assert.equal(a.status, 404);
    assert.deepEqual(a.json, { detail: 'Not Found' });
  });
});

test('unknown path 404, wrong method 405, invalid JSON 400 in each flavour shape', async () => {
  await withServer({}, async (server) => {
    const a = await call(`${server.url}/completions_nope`);
    assert.equal(a.status, 404);
    assert.deepEqual(a.json, { detail: 'Not Found' });
    const b = await call(`${server.url}/chat/completions`);
    assert.equal(b.status, 405);
    const c = await chat(server, '{"messages": [');
    assert.equal(c.status, 400);
    assert.equal(at(c.json, 'object'), 'error');
    assert.equal(at(c.json, 'code'), 400);
    assert.match(String(at(c.json, 'message')), /Invalid JSON/);
    const d = await chat(server, { model: 'x' });
    assert.equal(d.status, 400);
    // failed requests are recorded but are not chat requests and do not use the script
    assert.equal(server.requests.length, 4);
    assert.equal(server.requests[2]?.rawBody, '{"messages": [');
    assert.equal(server.requests[2]?.body, undefined);
    assert.deepEqual(server.chatRequests(), []);
    const e = await chat(server, simpleRequest);
    assert.equal(at(e.json, 'choices', 0, 'message', 'content'), 'done');
  });
  await withServer({ flavour: 'vllm' }, async (server) => {
    const c = await chat(server, 'not json');
    assert.equal(c.status, 400);
    assert.equal(at(c.json, 'error', 'type'), 'BadRequestError');
    assert.equal(at(c.json, 'error', 'code'), 400);
  });
});

test('apiKey: 401 without the bearer token, both flavours', async () => {
  for (const flavour of ['sglang', 'vllm'] as const) {
    await withServer({ flavour, apiKey: 'sekrit', script: [{ content: 'authorised' }] }, async (server) => {
      const a = await chat(server, simpleRequest);
      assert.equal(a.status, 401, flavour);
      assert.deepEqual(a.json, { error: 'Unauthorized' });
      const b = await chat(server, simpleRequest, { authorization: 'Bearer wrong' });
      assert.equal(b.status, 401);
      const m = await call(`${server.url}/models`);
      assert.equal(m.status, 401);
      const c = await chat(server, simpleRequest, { authorization: 'Bearer sekrit' });
      assert.equal(c.status, 200);
      assert.equal(at(c.json, 'choices', 0, 'message', 'content'), 'authorised');
      assert.equal(server.requests.length, 4);
      assert.equal(server.chatRequests().length, 1);
    });
  }
});

test('records every request in arrival order with raw bodies byte-for-byte', async () => {
  await withServer({ script: [{ content: 'one' }, { content: 'two' }] }, async (server) => {
    const raw1 = '{ "model" : "frognano-4b",\n  "messages":[{"role":"user","content":"héllo \\u00e9"}], "top_k": 20, "chat_template_kwargs": {"enable_thinking": true} }';
    const before = Date.now();
    await chat(server, raw1, { 'x-trace': 'abc' });
    await call(`${server.url}/models?verbose=1`);
    const raw2 = JSON.stringify({ model: 'frognano-4b', messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'u' }], tools: [{ type: 'function', function: { name: 'Edit' } }] });
    await chat(server, raw2);

    assert.equal(server.requests.length, 3);
    const [r1, r2, r3] = server.requests;
    assert.equal(r1?.method, 'POST');
    assert.equal(r1?.path, '/v1/chat/completions');
    assert.equal(r1?.rawBody, raw1);
    assert.equal(r1?.headers['x-trace'], 'abc');
    assert.equal(r1?.headers['content-type'], 'application/json');
    assert.ok((r1?.receivedAt ?? 0) >= before);
    assert.deepEqual(r1?.body, JSON.parse(raw1));
    assert.equal(r2?.method, 'GET');
    assert.equal(r2?.path, '/v1/models?verbose=1');
    assert.equal(r2?.rawBody, '');
    assert.equal(r2?.body, undefined);
    assert.equal(r3?.rawBody, raw2);
    assert.ok((r3?.receivedAt ?? 0) >= (r1?.receivedAt ?? 0));

    const chats = server.chatRequests();
    assert.equal(chats.length, 2);
    assert.equal(chats[0]?.['top_k'], 20);
    assert.deepEqual(chats[0]?.['chat_template_kwargs'], { enable_thinking: true });
    assert.equal(chats[0]?.messages[0]?.content, 'héllo é');
    assert.equal(chats[1]?.messages[1]?.role, 'user');
    assert.equal(chats[1]?.tools?.length, 1);
  });
});

test('script as a function gets the parsed body and the index; async allowed', async () => {
  const seen: number[] = [];
  await withServer(
    {
      flavour: 'vllm',
      script: async ({ body, index }) => {
        seen.push(index);
        await new Promise((r) => setImmediate(r)); // really asynchronous: the reply waits for a later turn of the event loop
        const last = body.messages[body.messages.length - 1];
        if (index === 1) return { error: 'context_length', inputTokens: 9, contextLength: 8 };
        return { content: `#${index}: ${String(last?.content)}` };
      },
    },
    async (server) => {
      const a = await chat(server, { model: 'm', messages: [{ role: 'user', content: 'first' }] });
      assert.equal(at(a.json, 'choices', 0, 'message', 'content'), '#0: first');
      const b = await chat(server, simpleRequest);
      assert.equal(b.status, 400);
      const c = await chat(server, { model: 'm', messages: [{ role: 'user', content: 'third' }] });
      assert.equal(at(c.json, 'choices', 0, 'message', 'content'), '#2: third');
      assert.deepEqual(seen, [0, 1, 2]);
    },
  );
  await withServer(
    {
      script: () => {
        throw new Error('boom');
      },
    },
    async (server) => {
      const a = await chat(server, simpleRequest);
      assert.equal(a.status, 500);
      assert.match(String(at(a.json, 'message')), /boom/);
    },
  );
});

test('close() ends a hanging request and keep-alive sockets', { timeout: 5000 }, async () => {
  const server = await startModelServer({ script: [{ content: 'warm' }, { hang: true }] });
  const warm = await chat(server, simpleRequest); // leaves a keep-alive socket open
  assert.equal(warm.status, 200);
  const pending = chat(server, simpleRequest);
  await waitFor(() => server.chatRequests().length === 2, 'the hanging request to arrive', 2000);
  const started = Date.now();
  await server.close();
  await assert.rejects(pending);
  assert.ok(Date.now() - started < 2000);
  await server.close(); // idempotent
});

test('close() during a delayed reply does not hang', { timeout: 5000 }, async () => {
  const server = await startModelServer({ script: [{ content: 'late', delayMs: 60_000 }] });
  const pending = chat(server, simpleRequest);
  await waitFor(() => server.chatRequests().length === 1, 'the request to arrive', 2000);
  await server.close();
  await assert.rejects(pending);
});

async function streamEvents(server: ModelServer, body: object): Promise<{ contentType: string; events: unknown[]; done: boolean }> {
  const res = await fetch(`${server.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  const events: unknown[] = [];
  let done = false;
  for (const block of text.split('\n\n')) {
    if (block === '') continue;
    assert.ok(block.startsWith('data: '), block);
    const data = block.slice('data: '.length);
    if (data === '[DONE]') done = true;
    else events.push(JSON.parse(data));
  }
  return { contentType: res.headers.get('content-type') ?? '', events, done };
}

test('stream: true gives chat.completion.chunk events in the flavour shape', async () => {
  for (const flavour of ['sglang', 'vllm'] as const) {
    await withServer(
      { flavour, script: [{ reasoning: 'let me think about it', content: 'Here:', toolCalls: [{ name: 'Edit', arguments: oddArguments }], usage: { cached_tokens: 3 } }] },
      async (server) => {
        const { contentType, events, done } = await streamEvents(server, { ...simpleRequest, stream: true, stream_options: { include_usage: true } });
        assert.match(contentType, /^text\/event-stream/);
        assert.ok(done);
        const reasoningKey = flavour === 'sglang' ? 'reasoning_content' : 'reasoning';
        let reasoning = '';
        let content = '';
        let args = '';
        let id: unknown;
        let finish: unknown;
        let usage: unknown;
        for (const e of events) {
          assert.equal(at(e, 'object'), 'chat.completion.chunk');
          const choices = at(e, 'choices');
          assert.ok(Array.isArray(choices));
          if (choices.length === 0) {
            usage = at(e, 'usage');
            continue;
          }
          const delta = at(choices, 0, 'delta');
          const r = at(delta, reasoningKey);
          if (typeof r === 'string') reasoning += r;
          const c = at(delta, 'content');
          if (typeof c === 'string') content += c;
          const tc = at(delta, 'tool_calls', 0);
          if (tc !== undefined) {
            assert.equal(at(tc, 'index'), 0);
            if (at(tc, 'id') !== undefined) id = at(tc, 'id');
            const piece = at(tc, 'function', 'arguments');
            if (typeof piece === 'string') args += piece;
          }
          const f = at(choices, 0, 'finish_reason');
          if (f !== null) finish = f;
        }
        assert.equal(at(events[0], 'choices', 0, 'delta', 'role'), 'assistant');
        assert.equal(reasoning, 'let me think about it');
        assert.equal(content, 'Here:');
        assert.equal(args, oddArguments);
        assert.match(String(id), flavour === 'sglang' ? /^call_[0-9a-f]{24}$/ : /^chatcmpl-tool-[0-9a-f]{32}$/);
        assert.equal(finish, 'tool_calls');
        assert.equal(at(usage, 'prompt_tokens_details', 'cached_tokens'), 3);
      },
    );
  }
});
