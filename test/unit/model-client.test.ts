import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';

import { ModelClient, ModelError, type CompletionOutcome, type ModelClientOptions, type RetryRecord } from '../../src/agent/model-client.ts';
import { CancelledError } from '../../src/shared/cancel.ts';
import { flavourErrorBody, startModelServer, type Flavour, type ModelServer, type ModelServerOptions } from '../support/model-server.ts';

const BODY = { model: 'frognano-4b', messages: [{ role: 'user', content: 'hi' }] };

async function withServer(opts: ModelServerOptions, fn: (server: ModelServer) => Promise<void>): Promise<void> {
  const server = await startModelServer(opts);
  try {
    await fn(server);
  } finally {
    await server.close();
  }
}

function client(server: ModelServer, opts: Partial<ModelClientOptions> = {}): ModelClient {
  return new ModelClient({ baseURL: server.url, timeoutMs: 10_000, maxRetries: 3, retryBaseMs: 5, ...opts });
}

async function complete(c: ModelClient, signal?: AbortSignal): Promise<{ outcome: CompletionOutcome; retries: RetryRecord[] }> {
  const retries: RetryRecord[] = [];
  const outcome = await c.complete(BODY, signal, (r) => retries.push(r));
  return { outcome, retries };
}

/** Runs `complete` expecting a rejection; returns the error and the retries reported meanwhile. */
async function completeFails(c: ModelClient, signal?: AbortSignal): Promise<{ err: unknown; retries: RetryRecord[] }> {
  const retries: RetryRecord[] = [];
  try {
    await c.complete(BODY, signal, (r) => retries.push(r));
  } catch (err) {
    return { err, retries };
  }
  assert.fail('complete() should have thrown');
}

async function waitFor(pred: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function asModelError(err: unknown): ModelError {
  assert.ok(err instanceof ModelError, `expected a ModelError, got ${String(err)}`);
  return err;
}

const FLAVOURS: Flavour[] = ['sglang', 'vllm'];

for (const flavour of FLAVOURS) {
  describe(`ModelClient against ${flavour}`, () => {
    test('retries 429, 500, 503 and a dropped connection, reporting each retry, then succeeds', async () => {
      const script = [{ status: 429 }, { status: 500 }, { status: 503 }, { dropConnection: true as const }, { content: 'ok' }];
      await withServer({ flavour, script }, async (server) => {
        const { outcome, retries } = await complete(client(server, { maxRetries: 4 }));
        assert.equal(outcome.kind, 'ok');
        assert.equal(outcome.attempts, 5);
        if (outcome.kind === 'ok') assert.equal(outcome.completion.choices[0]?.message.content, 'ok');
        assert.deepEqual(
          retries.map((r) => r.attempt),
          [1, 2, 3, 4],
        );
        assert.deepEqual(
          retries.map((r) => r.status),
          [429, 500, 503, undefined],
        );
        for (const r of retries) {
          assert.ok(r.error.length > 0);
          assert.ok(r.waitMs >= 0 && r.waitMs < 1000, `backoff with retryBaseMs 5 should be short: ${r.waitMs}`);
          assert.ok(!Number.isNaN(Date.parse(r.at)));
        }
        assert.equal(server.chatRequests().length, 5);
      });
    });

    test('gives up after maxRetries with a ModelError carrying the status', async () => {
      await withServer({ flavour, script: [{ status: 503 }, { status: 503 }, { status: 503 }, { content: 'never reached' }] }, async (server) => {
        const { err, retries } = await completeFails(client(server, { maxRetries: 2 }));
        const e = asModelError(err);
        assert.equal(e.status, 503);
        assert.match(e.message, /503/);
        assert.match(e.message, /3 attempts/);
        assert.equal(retries.length, 2);
        assert.equal(server.chatRequests().length, 3);
      });
    });

    test('connection failures exhaust retries too (ModelError without status)', async () => {
      const drop = { dropConnection: true as const };
      await withServer({ flavour, script: [drop, drop] }, async (server) => {
        const { err, retries } = await completeFails(client(server, { maxRetries: 1 }));
        const e = asModelError(err);
        assert.equal(e.status, undefined);
        assert.equal(retries.length, 1);
        assert.equal(server.chatRequests().length, 2);
      });
    });

    for (const status of [400, 401, 404]) {
      test(`no retry on HTTP ${status}`, async () => {
        await withServer({ flavour, script: [{ status }, { content: 'never reached' }] }, async (server) => {
          const { err, retries } = await completeFails(client(server));
          const e = asModelError(err);
          assert.equal(e.status, status);
          assert.deepEqual(retries, []);
          assert.equal(server.chatRequests().length, 1);
        });
      });
    }

    test('no retry on a real 401 from the auth middleware; the error points at OPENAI_API_KEY', async () => {
      await withServer({ flavour, apiKey: 'right-key' }, async (server) => {
        const { err, retries } = await completeFails(client(server, { apiKey: 'wrong-key' }));
        const e = asModelError(err);
        assert.equal(e.status, 401);
        assert.match(e.message, /OPENAI_API_KEY/);
        assert.deepEqual(retries, []);
        assert.equal(server.requests.length, 1);
      });
    });

    test('a base URL without /v1 gives a 404 naming OPENAI_BASE_URL, not retried', async () => {
      await withServer({ flavour }, async (server) => {
        const { err, retries } = await completeFails(new ModelClient({ baseURL: server.origin, timeoutMs: 5000, maxRetries: 3, retryBaseMs: 5 }));
        const e = asModelError(err);
        assert.equal(e.status, 404);
        assert.match(e.message, /OPENAI_BASE_URL/);
        assert.deepEqual(retries, []);
        assert.equal(server.requests.length, 1);
      });
    });

    test('context-length 400 is recognised from the raw body and not retried', async () => {
      await withServer({ flavour, contextLength: 32768, script: [{ error: 'context_length', inputTokens: 40000 }] }, async (server) => {
        const { outcome, retries } = await complete(client(server));
        assert.equal(outcome.kind, 'context_length');
        assert.equal(outcome.attempts, 1);
        if (outcome.kind === 'context_length') {
          if (flavour === 'sglang') {
            // The SDK alone only says "400 status code (no body)"; the text comes from the raw body.
            assert.match(outcome.message, /The input \(40000 tokens\) is longer than the model's context length \(32768 tokens\)/);
          } else {
            assert.match(outcome.message, /maximum context length is 32768 tokens/);
          }
        }
        assert.deepEqual(retries, []);
        assert.equal(server.chatRequests().length, 1);
      });
    });

    test('the other context-length wording ("Requested token count exceeds ...") is recognised too', async () => {
      const message = "Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total of 40960 tokens.";
      await withServer({ flavour, script: [{ status: 400, body: flavourErrorBody(flavour, 400, message) }] }, async (server) => {
        const { outcome } = await complete(client(server));
        assert.equal(outcome.kind, 'context_length');
        if (outcome.kind === 'context_length') assert.match(outcome.message, /Requested token count exceeds/);
      });
    });

    test('an ordinary 400 is not mistaken for a context-length rejection, and its body text is kept', async () => {
      const message = 'messages.1.content: Input should be a valid string';
      await withServer({ flavour, script: [{ status: 400, body: flavourErrorBody(flavour, 400, message) }] }, async (server) => {
        const { err } = await completeFails(client(server));
        const e = asModelError(err);
        assert.equal(e.status, 400);
        assert.ok(e.message.includes(message), e.message);
        assert.equal(e.message.split(message).length - 1, 1, `the body text should appear once: ${e.message}`);
      });
    });

    test('a per-request timeout against a hanging server ends in a ModelError', async () => {
      await withServer({ flavour, script: [{ hang: true }] }, async (server) => {
        const started = Date.now();
        const { err } = await completeFails(client(server, { timeoutMs: 300, maxRetries: 0 }));
        const e = asModelError(err);
        assert.equal(e.status, undefined);
        assert.match(e.message, /timed out/i);
        assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
      });
    });

    test('abort while waiting for the model throws CancelledError and sends nothing more', async () => {
      await withServer({ flavour, script: [{ hang: true }, { content: 'never reached' }] }, async (server) => {
        const ac = new AbortController();
        const started = Date.now();
        const failing = completeFails(client(server), ac.signal);
        await waitFor(() => server.chatRequests().length === 1, 'the request to reach the server', 5000);
        ac.abort(new Error('stop requested'));
        const { err, retries } = await failing;
        assert.ok(err instanceof CancelledError, `expected CancelledError, got ${String(err)}`);
        assert.ok(Date.now() - started < 3000);
        assert.deepEqual(retries, []);
        // Nothing more was sent: the script's next reply is still there for a request made now.
        const { outcome } = await complete(client(server, { maxRetries: 0 }));
        assert.equal(outcome.kind === 'ok' ? outcome.completion.choices[0]?.message.content : outcome.kind, 'never reached');
        assert.equal(server.chatRequests().length, 2);
      });
    });

    test('abort during a retry backoff throws CancelledError promptly', async () => {
      await withServer({ flavour, script: [{ status: 503, headers: { 'retry-after': '30' } }, { content: 'never reached' }] }, async (server) => {
        const ac = new AbortController();
        const started = Date.now();
        const retries: RetryRecord[] = [];
        const p = client(server).complete(BODY, ac.signal, (r) => {
          retries.push(r);
          // The backoff starts right after this callback returns: abort on the next turn of the event loop.
          setImmediate(() => ac.abort());
        });
        await assert.rejects(p, CancelledError);
        assert.ok(Date.now() - started < 3000);
        assert.equal(retries.length, 1);
        assert.equal(server.chatRequests().length, 1);
      });
    });

    test('an already-aborted signal throws CancelledError without a request', async () => {
      await withServer({ flavour }, async (server) => {
        const ac = new AbortController();
        ac.abort();
        const { err } = await completeFails(client(server), ac.signal);
        assert.ok(err instanceof CancelledError);
        assert.equal(server.requests.length, 0);
      });
    });

    test('Retry-After is honoured over the exponential backoff', async () => {
      await withServer({ flavour, script: [{ status: 429, headers: { 'retry-after': '1' } }, { content: 'ok' }] }, async (server) => {
        const { outcome, retries } = await complete(client(server));
        assert.equal(outcome.kind, 'ok');
        assert.equal(retries.length, 1);
        assert.equal(retries[0]?.waitMs, 1000);
        const [first, second] = server.requests;
        assert.ok(first && second);
        assert.ok(second.receivedAt - first.receivedAt >= 950, `second attempt came after ${second.receivedAt - first.receivedAt} ms`);
      });
    });

    test('Retry-After as an HTTP-date is honoured too', async () => {
      const when = new Date(Date.now() + 2000).toUTCString();
      await withServer({ flavour, script: [{ status: 503, headers: { 'retry-after': when } }, { content: 'ok' }] }, async (server) => {
        const { outcome, retries } = await complete(client(server));
        assert.equal(outcome.kind, 'ok');
        const wait = retries[0]?.waitMs ?? 0;
        assert.ok(wait > 500 && wait <= 2000, `waitMs ${wait}`);
        const [first, second] = server.requests;
        assert.ok(first && second);
        assert.ok(second.receivedAt - first.receivedAt >= wait - 50);
      });
    });

    test('resolveModel: the configured name wins, otherwise the first listed id', async () => {
      await withServer({ flavour, modelId: 'frognano-4b-2609' }, async (server) => {
        const c = client(server);
        assert.equal(await c.resolveModel('my-model'), 'my-model');
        assert.equal(server.requests.length, 0);
        assert.equal(await c.resolveModel(undefined), 'frognano-4b-2609');
        assert.equal(server.requests[0]?.path, '/v1/models');
      });
    });
  });
}

describe('ModelClient: vLLM-specific and listing errors', () => {
  test('vLLM without --enable-auto-tool-choice: the 400 becomes an error naming the flag', async () => {
    const message = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set';
    await withServer({ flavour: 'vllm', script: [{ status: 400, body: flavourErrorBody('vllm', 400, message) }] }, async (server) => {
      const { err, retries } = await completeFails(client(server));
      const e = asModelError(err);
      assert.equal(e.status, 400);
      assert.match(e.message, /--enable-auto-tool-choice/);
      assert.match(e.message, /--tool-call-parser qwen3_coder/);
      assert.deepEqual(retries, []);
      assert.equal(server.chatRequests().length, 1);
    });
  });

  test('resolveModel picks the first of several listed ids', async () => {
    const server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          object: 'list',
          data: [
            { id: 'first-model', object: 'model', created: 0, owned_by: 'vllm', max_model_len: 262144 },
            { id: 'second-model', object: 'model', created: 0, owned_by: 'vllm', max_model_len: 262144 },
          ],
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const c = new ModelClient({ baseURL: `http://127.0.0.1:${port}/v1`, timeoutMs: 5000, maxRetries: 0 });
      assert.equal(await c.resolveModel(undefined), 'first-model');
      assert.deepEqual(
        (await c.listModels()).map((m) => [m.id, m.max_model_len]),
        [
          ['first-model', 262144],
          ['second-model', 262144],
        ],
      );
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  test('resolveModel against an unreachable server throws a ModelError naming OPENAI_BASE_URL', async () => {
    const server = await startModelServer();
    const url = server.url;
    await server.close();
    const c = new ModelClient({ baseURL: url, timeoutMs: 2000, maxRetries: 0 });
    await assert.rejects(c.resolveModel(undefined), (err: unknown) => err instanceof ModelError && /OPENAI_BASE_URL/.test(err.message));
    // A caller whose user set the endpoint elsewhere (lilypad eval's --endpoint) gets those names instead.
    const named = new ModelClient({ baseURL: url, timeoutMs: 2000, maxRetries: 0, settingNames: { baseURL: 'the URL of --endpoint x', model: 'model= in --endpoint x', apiKey: 'K' } });
    await assert.rejects(named.resolveModel(undefined), (err: unknown) => err instanceof ModelError && /Check the URL of --endpoint x .*or set model= in --endpoint x\.$/.test(err.message) && !/OPENAI_BASE_URL|LILYPAD_MODEL/.test(err.message));
  });
});

describe('ModelClient: every request is bounded in time and size', () => {
  test('a generation slower than undici’s default headers timeout succeeds when the model timeout allows it (no regeneration)', async () => {
    // Node's fetch gives up waiting for response headers after 300 s, half of the default
    // LILYPAD_MODEL_TIMEOUT_SECONDS. Scaled down: the process-wide default here allows 300 ms, the
    // model timeout 5 s, and the server takes 1 s before its headers. Only a client that brings its
    // own dispatcher, with the model timeout as its headers timeout, gets the answer.
    const previous = getGlobalDispatcher();
    const scaledDown = new Agent({ headersTimeout: 300, bodyTimeout: 300 });
    setGlobalDispatcher(scaledDown);
    try {
      await withServer({ script: [{ delayMs: 1000, content: 'slow but fine' }, { content: 'a regeneration' }] }, async (server) => {
        const { outcome, retries } = await complete(client(server, { timeoutMs: 5000, maxRetries: 1 }));
        assert.equal(outcome.kind, 'ok');
        if (outcome.kind === 'ok') assert.equal(outcome.completion.choices[0]?.message.content, 'slow but fine');
        assert.deepEqual(retries, []);
        assert.equal(server.chatRequests().length, 1, 'the generation must not be requested twice');
      });
    } finally {
      setGlobalDispatcher(previous);
      await scaledDown.close();
    }
  });

  test('a body that trickles in ends with a timeout ModelError at the model timeout, not when the server is done', { timeout: 60_000 }, async () => {
    // 2 bytes every 100 ms: the whole answer would take over 20 s.
    await withServer({ script: [{ content: 'x'.repeat(200), trickle: { chunkBytes: 2, intervalMs: 100 } }] }, async (server) => {
      const started = Date.now();
      const { err } = await completeFails(client(server, { timeoutMs: 1000, maxRetries: 0 }));
      const e = asModelError(err);
      assert.match(e.message, /timed out/i);
      assert.ok(Date.now() - started < 4000, `took ${Date.now() - started} ms`);
    });
  });

  for (const contentLength of [false, true]) {
    test(`a 500 MB body ends as a ModelError at maxResponseBytes, memory bounded, not retried (${contentLength ? 'Content-Length' : 'chunked'})`, { timeout: 60_000 }, async () => {
      await withServer({ script: [{ hugeBody: 500 * 1024 * 1024, contentLength }, { content: 'never reached' }] }, async (server) => {
        const rssBefore = process.memoryUsage().rss;
        const started = Date.now();
        const { err, retries } = await completeFails(client(server, { timeoutMs: 30_000, maxRetries: 2, maxResponseBytes: 1024 * 1024 }));
        const e = asModelError(err);
        assert.match(e.message, /larger than 1 MiB/);
        assert.match(e.message, /LILYPAD_MODEL_MAX_RESPONSE_MB/);
        assert.deepEqual(retries, [], 'an oversized answer is not requested again');
        assert.equal(server.chatRequests().length, 1);
        assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
        const grewMb = (process.memoryUsage().rss - rssBefore) / (1024 * 1024);
        assert.ok(grewMb < 100, `RSS grew by ${grewMb.toFixed(0)} MB`);
      });
    });
  }

  test('an oversized error body is cut off the same way', { timeout: 60_000 }, async () => {
    await withServer({ script: [{ hugeBody: 50 * 1024 * 1024, status: 500 }] }, async (server) => {
      const { err } = await completeFails(client(server, { timeoutMs: 30_000, maxRetries: 0, maxResponseBytes: 64 * 1024 }));
      assert.match(asModelError(err).message, /larger than 64 KiB/);
    });
  });

  test('an answer within maxResponseBytes is read normally', async () => {
    await withServer({ script: [{ content: 'y'.repeat(10_000) }] }, async (server) => {
      const { outcome } = await complete(client(server, { maxResponseBytes: 64 * 1024 }));
      assert.equal(outcome.kind, 'ok');
      if (outcome.kind === 'ok') assert.equal(outcome.completion.choices[0]?.message.content?.length, 10_000);
    });
  });
});
