/**
 * A scripted OpenAI-compatible model server for tests, standing in for a real SGLang or vLLM.
 *
 * It answers `POST /v1/chat/completions` from a per-test script, in the wire shapes the real servers
 * produce (see docs/serving.md), answers `GET /v1/models`, `GET /get_server_info` (SGLang only) and
 * `GET /health`, and records every request it receives in arrival order.
 *
 * Shapes reproduced per flavour:
 * - reasoning: SGLang `message.reasoning_content`, vLLM `message.reasoning` (null when there is none);
 * - tool-call ids: SGLang `call_<24 hex>`, vLLM `chatcmpl-tool-<32 hex>` (unless the script gives one);
 * - no tool calls: SGLang `tool_calls: null`, vLLM `tool_calls: []`;
 * - errors: SGLang unwrapped `{object:'error', message, type, param, code}`, vLLM `{error:{message, type, param, code}}`;
 * - 401 (apiKey): `{"error":"Unauthorized"}` on both (that is what both servers' auth middleware sends);
 * - unknown path 404 / wrong method 405: FastAPI's `{"detail":"Not Found"}` / `{"detail":"Method Not Allowed"}`.
 *
 * Faults for the client's limits: `delayMs` (nothing, not even headers, before it), `trickle` (headers
 * at once, then the body a few bytes at a time), `hugeBody` (a body of any size, streamed with
 * backpressure), `hang` and `dropConnection`.
 *
 * `stream: true` requests get a server-sent-event stream of `chat.completion.chunk`s built from the
 * same scripted reply (best effort; the non-streaming shapes are the pinned ones).
 */
import { createServer, STATUS_CODES } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomBytes } from 'node:crypto';

export type Flavour = 'sglang' | 'vllm';

export interface ScriptedToolCall {
  name: string;
  /** A string is sent byte-for-byte; an object is sent as `JSON.stringify(object)`. */
  arguments: string | Record<string, unknown>;
  id?: string;
}

/** A normal completion. `content` undefined means `content: null`. */
export interface ScriptedCompletion {
  reasoning?: string;
  content?: string | null;
  toolCalls?: ScriptedToolCall[];
  /** Default: 'tool_calls' when there are tool calls, else 'stop'. */
  finishReason?: 'stop' | 'tool_calls' | 'length';
  /** Defaults: prompt ceil(rawBody.length/4), completion ceil((reasoning+content+arguments).length/4). */
  usage?: { prompt_tokens?: number; completion_tokens?: number; cached_tokens?: number };
  /** Wait this long before sending anything (the status line and headers included). */
  delayMs?: number;
  /** Send the headers at once, then the body `chunkBytes` at a time every `intervalMs` (a stalling server). */
  trickle?: { chunkBytes: number; intervalMs: number };
}
/** HTTP 400 context-length rejection in the flavour's shape. */
export interface ScriptedContextLengthError {
  error: 'context_length';
  /** Default: the server's contextLength. */
  contextLength?: number;
  /** Default: max(ceil(rawBody.length/4), contextLength + 1). */
  inputTokens?: number;
}
/** A raw HTTP answer; without `body`, a flavour-shaped error body carrying the status text. */
export interface ScriptedHttpError {
  status: number;
  body?: string | object;
  headers?: Record<string, string>;
  delayMs?: number;
}
/** Destroy the socket without answering. */
export interface ScriptedDrop {
  dropConnection: true;
}
/** Never answer; the socket is destroyed by close(). */
export interface ScriptedHang {
  hang: true;
}
/**
 * HTTP `status` (default 200) with a JSON-looking body of `hugeBody` bytes, sent as fast as the client
 * reads it (chunked unless `contentLength`), never held in memory here. Stops when the client goes away.
 */
export interface ScriptedHugeBody {
  hugeBody: number;
  status?: number;
  /** Announce the size in Content-Length (default: chunked, so only reading tells the size). */
  contentLength?: boolean;
}
export type ScriptedReply = ScriptedCompletion | ScriptedContextLengthError | ScriptedHttpError | ScriptedDrop | ScriptedHang | ScriptedHugeBody;

export interface RecordedRequest {
  method: string;
  /** The raw request target, including any query string. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  rawBody: string;
  /** The parsed JSON body, or undefined when the body is empty or not valid JSON. */
  body: unknown;
  /** `Date.now()` when the request arrived. */
  receivedAt: number;
}

export interface ChatRequestMessage {
  role: string;
  content?: unknown;
  [key: string]: unknown;
}

export interface ChatRequestTool {
  type?: unknown;
  function?: unknown;
  [key: string]: unknown;
}

/** The parsed body of a chat request (validated: an object whose `messages` is an array of `{role: string}`). */
export interface ChatRequestBody {
  model?: string;
  messages: ChatRequestMessage[];
  tools?: ChatRequestTool[];
  stream?: boolean;
  [key: string]: unknown;
}

export interface ModelServerOptions {
  /** Default 'sglang'. */
  flavour?: Flavour;
  /** Default 'frognano-4b'. */
  modelId?: string;
  /** Default 262144; reported in /v1/models `max_model_len` and SGLang /get_server_info `context_length`. */
  contextLength?: number;
  /** SGLang launch args reported by /get_server_info; default qwen3_coder / qwen3. `null` = flag not given. */
  serverArgs?: { tool_call_parser?: string | null; reasoning_parser?: string | null };
  /** Replies in order (then `{ content: 'done' }` forever), or a function of the request. */
  script?: ScriptedReply[] | ((req: { body: ChatRequestBody; index: number }) => ScriptedReply | Promise<ScriptedReply>);
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401. */
  apiKey?: string;
}

export interface ModelServer {
  /** Base URL for an OpenAI client, e.g. http://127.0.0.1:PORT/v1 */
  url: string;
  /** e.g. http://127.0.0.1:PORT */
  origin: string;
  requests: RecordedRequest[];
  chatRequests(): ChatRequestBody[];
  close(): Promise<void>;
}

interface MutableRecord extends RecordedRequest {
  isChat: boolean;
  chatBody: ChatRequestBody | undefined;
}

const CHAT_PATH = '/v1/chat/completions';

function hex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function errorTypeFor(status: number): string {
  switch (status) {
    case 400:
      return 'BadRequestError';
    case 401:
      return 'Unauthorized';
    case 404:
      return 'NotFoundError';
    case 429:
      return 'TooManyRequestsError';
    case 503:
      return 'ServiceUnavailableError';
    default:
      return status >= 500 ? 'InternalServerError' : 'BadRequestError';
  }
}

/** An error body in the flavour's shape: SGLang unwrapped, vLLM wrapped in `error`. */
export function flavourErrorBody(flavour: Flavour, status: number, message: string, type = errorTypeFor(status)): object {
  const inner = { message, type, param: null, code: status };
  return flavour === 'sglang' ? { object: 'error', ...inner } : { error: inner };
}

function validateChatBody(body: unknown): { ok: true; body: ChatRequestBody } | { ok: false; message: string } {
  if (!isPlainObject(body)) return { ok: false, message: 'Request body must be a JSON object' };
  const { messages, model, tools, stream } = body;
  if (!Array.isArray(messages)) return { ok: false, message: 'messages: Field required (must be a list)' };
  for (const [i, m] of messages.entries()) {
    if (!isPlainObject(m) || typeof m['role'] !== 'string') {
      return { ok: false, message: `messages.${i}: each message must be an object with a string role` };
    }
  }
  if (model !== undefined && typeof model !== 'string') return { ok: false, message: 'model: must be a string' };
  if (tools !== undefined && tools !== null) {
    if (!Array.isArray(tools) || !tools.every(isPlainObject)) return { ok: false, message: 'tools: must be a list of objects' };
  }
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') {
    return { ok: false, message: 'stream: must be a boolean' };
  }
  // Validated above: messages are objects with a string role, model is a string, tools are objects.
  return { ok: true, body: body as ChatRequestBody };
}

interface BuiltToolCall {
  id: string;
  type: 'function';
  index: number;
  function: { name: string; arguments: string };
}

export async function startModelServer(opts: ModelServerOptions = {}): Promise<ModelServer> {
  const flavour: Flavour = opts.flavour ?? 'sglang';
  const modelId = opts.modelId ?? 'frognano-4b';
  const contextLength = opts.contextLength ?? 262144;
  const toolCallParser = opts.serverArgs?.tool_call_parser === undefined ? 'qwen3_coder' : opts.serverArgs.tool_call_parser;
  const reasoningParser = opts.serverArgs?.reasoning_parser === undefined ? 'qwen3' : opts.serverArgs.reasoning_parser;
  const script = opts.script ?? [];
  const apiKey = opts.apiKey;
  const startedAt = Math.floor(Date.now() / 1000);

  const records: MutableRecord[] = [];
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  let scriptIndex = 0;
  let closed = false;
  let port = 0;

  const sleep = (ms: number): Promise<void> =>
    new Promise<void>((resolve) => {
      if (closed || ms <= 0) {
        resolve();
        return;
      }
      const entry = {
        timer: setTimeout(() => {
          timers.delete(entry);
          resolve();
        }, ms),
        resolve,
      };
      timers.add(entry);
    });

  const send = (res: ServerResponse, status: number, body: string | object | null, headers: Record<string, string> = {}): void => {
    if (closed || res.destroyed || res.writableEnded) return;
    let text = '';
    let contentType: string | undefined;
    if (typeof body === 'string') {
      text = body;
      contentType = isJsonText(body) ? 'application/json' : 'text/plain; charset=utf-8';
    } else if (body !== null) {
      text = JSON.stringify(body);
      contentType = 'application/json';
    }
    const out: Record<string, string | number> = {};
    if (contentType !== undefined) out['content-type'] = contentType;
    out['content-length'] = Buffer.byteLength(text);
    for (const [k, v] of Object.entries(headers)) out[k.toLowerCase()] = v;
    res.writeHead(status, out);
    res.end(text);
  };

  const sendError = (res: ServerResponse, status: number, message: string): void => {
    send(res, status, flavourErrorBody(flavour, status, message));
  };

  const authRequired = (pathname: string): boolean => {
    if (apiKey === undefined) return false;
    // vLLM's middleware guards /v1 only; SGLang's guards everything but /health and /metrics.
    if (flavour === 'vllm') return pathname.startsWith('/v1');
    return !(pathname.startsWith('/health') || pathname.startsWith('/metrics'));
  };

  const modelsBody = (): object => {
    const base = { id: modelId, object: 'model', created: startedAt, owned_by: flavour, root: modelId, max_model_len: contextLength };
    if (flavour === 'sglang') return { object: 'list', data: [base] };
    return {
      object: 'list',
      data: [
        {
          ...base,
          parent: null,
          permission: [
            {
              id: `modelperm-${hex(16)}`,
              object: 'model_permission',
              created: startedAt,
              allow_create_engine: false,
              allow_sampling: true,
              allow_logprobs: true,
              allow_search_indices: false,
              allow_view: true,
              allow_fine_tuning: false,
              organization: '*',
              group: null,
              is_blocking: false,
            },
          ],
        },
      ],
    };
  };

  const serverInfoBody = (): object => ({
    model_path: modelId,
    tokenizer_path: modelId,
    served_model_name: modelId,
    context_length: contextLength,
    tool_call_parser: toolCallParser,
    reasoning_parser: reasoningParser,
    host: '127.0.0.1',
    port,
    tp_size: 1,
    dtype: 'auto',
    chat_template: null,
    enable_cache_report: false,
    max_running_requests: null,
    version: '0.0.0-scripted',
    internal_states: [{ max_total_num_tokens: contextLength }],
  });

  const replyFor = async (body: ChatRequestBody): Promise<ScriptedReply> => {
    const index = scriptIndex++;
    if (typeof script === 'function') return script({ body, index });
    return script[index] ?? { content: 'done' };
  };

  const answerChat = async (req: IncomingMessage, res: ServerResponse, record: MutableRecord): Promise<void> => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(record.rawBody);
    } catch (e) {
      sendError(res, 400, `Invalid JSON body: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    const checked = validateChatBody(parsed);
    if (!checked.ok) {
      sendError(res, 400, checked.message);
      return;
    }
    const body = checked.body;
    record.chatBody = body;

    let reply: ScriptedReply;
    try {
      reply = await replyFor(body);
    } catch (e) {
      sendError(res, 500, `scripted model server: script function threw: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }

    if ('dropConnection' in reply) {
      req.socket.destroy();
      return;
    }
    if ('hang' in reply) {
      return; // never answered; close() destroys the socket
    }
    if ('hugeBody' in reply) {
      await sendHuge(res, reply);
      return;
    }
    if ('error' in reply) {
      const c = reply.contextLength ?? contextLength;
      const n = reply.inputTokens ?? Math.max(Math.ceil(record.rawBody.length / 4), c + 1);
      const message =
        flavour === 'sglang'
          ? `The input (${n} tokens) is longer than the model's context length (${c} tokens).`
          : `This model's maximum context length is ${c} tokens. However, you requested ${n} tokens in the messages, Please reduce the length of the messages.`;
      sendError(res, 400, message);
      return;
    }
    if ('status' in reply) {
      await sleep(reply.delayMs ?? 0);
      const body = reply.body ?? flavourErrorBody(flavour, reply.status, STATUS_CODES[reply.status] ?? `HTTP ${reply.status}`);
      send(res, reply.status, body, reply.headers ?? {});
      return;
    }
    await sleep(reply.delayMs ?? 0);
    const completion = buildCompletion(reply, body, record.rawBody);
    if (reply.trickle !== undefined) {
      await sendTrickle(res, JSON.stringify(completion.response), reply.trickle);
    } else if (body.stream === true) {
      const streamOptions = body['stream_options'];
      const includeUsage = isPlainObject(streamOptions) && streamOptions['include_usage'] === true;
      writeStream(res, completion, includeUsage);
    } else {
      send(res, 200, completion.response);
    }
  };

  const sendTrickle = async (res: ServerResponse, text: string, trickle: { chunkBytes: number; intervalMs: number }): Promise<void> => {
    if (closed || res.destroyed) return;
    const bytes = Buffer.from(text);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': bytes.length });
    res.flushHeaders();
    for (let i = 0; i < bytes.length; i += trickle.chunkBytes) {
      if (closed || res.destroyed) return;
      res.write(bytes.subarray(i, i + trickle.chunkBytes));
      await sleep(trickle.intervalMs);
    }
    if (!closed && !res.destroyed) res.end();
  };

  const sendHuge = async (res: ServerResponse, reply: ScriptedHugeBody): Promise<void> => {
    if (closed || res.destroyed) return;
    const headers: Record<string, string | number> = { 'content-type': 'application/json' };
    if (reply.contentLength === true) headers['content-length'] = reply.hugeBody;
    res.writeHead(reply.status ?? 200, headers);
    const head = Buffer.from('{"id":"chatcmpl-huge","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"');
    const chunk = Buffer.alloc(64 * 1024, 'a');
    let sent = 0;
    const write = (b: Buffer): Promise<void> =>
      new Promise((resolve) => {
        // Backpressure: wait for the client to read, or for the connection to go away.
        if (res.write(b)) resolve();
        else {
          const done = () => {
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.once('drain', done);
          res.once('close', done);
        }
      });
    await write(head.subarray(0, Math.min(head.length, reply.hugeBody)));
    sent += Math.min(head.length, reply.hugeBody);
    while (sent < reply.hugeBody && !closed && !res.destroyed) {
      const piece = chunk.subarray(0, Math.min(chunk.length, reply.hugeBody - sent));
      await write(piece);
      sent += piece.length;
    }
    if (!closed && !res.destroyed) res.end();
  };

  interface Completion {
    response: object;
    id: string;
    created: number;
    model: string;
    reasoning: string | undefined;
    content: string | null;
    toolCalls: BuiltToolCall[];
    finishReason: string;
    usage: object;
  }

  const buildCompletion = (reply: ScriptedCompletion, body: ChatRequestBody, rawBody: string): Completion => {
    const toolCalls: BuiltToolCall[] = (reply.toolCalls ?? []).map((tc, index) => ({
      id: tc.id ?? (flavour === 'sglang' ? `call_${hex(12)}` : `chatcmpl-tool-${hex(16)}`),
      type: 'function',
      index,
      function: { name: tc.name, arguments: typeof tc.arguments === 'string' ? tc.arguments : JSON.stringify(tc.arguments) },
    }));
    const reasoning = reply.reasoning;
    const content = reply.content ?? null;
    const finishReason = reply.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop');
    const promptTokens = reply.usage?.prompt_tokens ?? Math.ceil(rawBody.length / 4);
    const generated = (reasoning ?? '') + (content ?? '') + toolCalls.map((t) => t.function.arguments).join('');
    const completionTokens = reply.usage?.completion_tokens ?? Math.ceil(generated.length / 4);
    const cached = reply.usage?.cached_tokens;
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
      ...(cached !== undefined ? { prompt_tokens_details: { cached_tokens: cached } } : {}),
    };
    const id = `chatcmpl-${hex(16)}`;
    const created = Math.floor(Date.now() / 1000);
    // SGLang echoes the requested model name; vLLM reports its served model name.
    const model = flavour === 'sglang' ? (body.model ?? modelId) : modelId;
    const message =
      flavour === 'sglang'
        ? { role: 'assistant', content, reasoning_content: reasoning ?? null, tool_calls: toolCalls.length > 0 ? toolCalls : null }
        : {
            role: 'assistant',
            content,
            refusal: null,
            annotations: null,
            audio: null,
            function_call: null,
            tool_calls: toolCalls,
            reasoning: reasoning ?? null,
          };
    const choice =
      flavour === 'sglang'
        ? { index: 0, message, logprobs: null, finish_reason: finishReason }
        : { index: 0, message, logprobs: null, finish_reason: finishReason, stop_reason: null };
    const response = { id, object: 'chat.completion', created, model, choices: [choice], usage };
    return { response, id, created, model, reasoning, content, toolCalls, finishReason, usage };
  };

  const writeStream = (res: ServerResponse, c: Completion, includeUsage: boolean): void => {
    if (closed || res.destroyed || res.writableEnded) return;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    const base = { id: c.id, object: 'chat.completion.chunk', created: c.created, model: c.model };
    const chunk = (delta: object, finishReason: string | null = null): void => {
      const choice: Record<string, unknown> = { index: 0, delta, logprobs: null, finish_reason: finishReason };
      if (flavour === 'vllm' && finishReason !== null) choice['stop_reason'] = null;
      res.write(`data: ${JSON.stringify({ ...base, choices: [choice] })}\n\n`);
    };
    chunk({ role: 'assistant', content: '' });
    const reasoningKey = flavour === 'sglang' ? 'reasoning_content' : 'reasoning';
    for (const piece of pieces(c.reasoning ?? '')) chunk({ [reasoningKey]: piece });
    for (const piece of pieces(c.content ?? '')) chunk({ content: piece });
    for (const tc of c.toolCalls) {
      chunk({ tool_calls: [{ index: tc.index, id: tc.id, type: 'function', function: { name: tc.function.name, arguments: '' } }] });
      for (const piece of pieces(tc.function.arguments)) {
        chunk({ tool_calls: [{ index: tc.index, function: { arguments: piece } }] });
      }
    }
    chunk({}, c.finishReason);
    if (includeUsage) res.write(`data: ${JSON.stringify({ ...base, choices: [], usage: c.usage })}\n\n`);
    res.write('data: [DONE]\n\n');
    res.end();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const target = req.url ?? '/';
    const pathname = new URL(target, 'http://127.0.0.1').pathname;
    const method = req.method ?? 'GET';
    const record: MutableRecord = {
      method,
      path: target,
      headers: { ...req.headers },
      rawBody: '',
      body: undefined,
      receivedAt: Date.now(),
      isChat: pathname === CHAT_PATH && method === 'POST',
      chatBody: undefined,
    };
    records.push(record);
    requests.push(record);

    const chunks: Buffer[] = [];
    try {
      for await (const part of req as AsyncIterable<Buffer | string>) chunks.push(typeof part === 'string' ? Buffer.from(part) : part);
    } catch {
      return; // client went away mid-body
    }
    record.rawBody = Buffer.concat(chunks).toString('utf8');
    if (record.rawBody !== '') {
      try {
        record.body = JSON.parse(record.rawBody);
      } catch {
        record.body = undefined;
      }
    }
    if (closed) {
      req.socket.destroy();
      return;
    }

    if (authRequired(pathname) && req.headers.authorization !== `Bearer ${apiKey ?? ''}`) {
      send(res, 401, { error: 'Unauthorized' });
      return;
    }

    const known: Record<string, { method: string; run: () => Promise<void> | void }> = {
      [CHAT_PATH]: { method: 'POST', run: () => answerChat(req, res, record) },
      '/v1/models': { method: 'GET', run: () => send(res, 200, modelsBody()) },
      '/health': { method: 'GET', run: () => send(res, 200, '') },
    };
    if (flavour === 'sglang') known['/get_server_info'] = { method: 'GET', run: () => send(res, 200, serverInfoBody()) };

    const route = known[pathname];
    if (route === undefined) {
      send(res, 404, { detail: 'Not Found' });
      return;
    }
    if (route.method !== method) {
      send(res, 405, { detail: 'Method Not Allowed' }, { allow: route.method });
      return;
    }
    await route.run();
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        sendError(res, 500, `scripted model server: ${e instanceof Error ? e.message : String(e)}`);
      } else {
        res.destroy();
      }
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${port}`;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    if (closing !== undefined) return closing;
    closed = true;
    for (const entry of timers) {
      clearTimeout(entry.timer);
      entry.resolve();
    }
    timers.clear();
    closing = new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
      for (const socket of sockets) socket.destroy();
    });
    return closing;
  };

  return {
    url: `${origin}/v1`,
    origin,
    requests,
    chatRequests: () => records.flatMap((r) => (r.isChat && r.chatBody !== undefined ? [r.chatBody] : [])),
    close,
  };
}

function isJsonText(text: string): boolean {
  if (text.trim() === '') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Split text into up to three pieces (by code point) so streaming clients must concatenate. */
function pieces(text: string): string[] {
  if (text === '') return [];
  const chars = Array.from(text);
  const size = Math.max(1, Math.ceil(chars.length / 3));
  const out: string[] = [];
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out;
}
