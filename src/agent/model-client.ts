import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletion } from 'openai/resources/chat/completions';
import { Agent, fetch as undiciFetch } from 'undici';
import { firstHeader, postJson, ResponseTooLargeError, tooLargeError } from './chat-post.ts';
import { modelRequest, modelRetried } from '../observability/metrics.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';

/** The model endpoint failed in a way that retrying will not fix, or retries ran out. */
export class ModelError extends Error {
  override name = 'ModelError';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface RetryRecord {
  attempt: number;
  error: string;
  status?: number;
  waitMs: number;
  at: string;
}

export type CompletionOutcome =
  | { kind: 'ok'; completion: ChatCompletion; attempts: number }
  | { kind: 'context_length'; message: string; attempts: number };

/**
 * What the agent loop needs from a model: one chat completion per turn. `ModelClient` is the HTTP
 * implementation; tests drive the loop with a scripted one.
 *
 * Contract: resolve with the completion, or `context_length` when the server refused the prompt as
 * too long; reject with `CancelledError` once `signal` fires, with `ModelError` when the endpoint
 * failed for good; call `onRetry` for every attempt that is retried.
 */
export interface ChatModel {
  /** `onSent`, when given, is called once the request has been written to the connection whole. */
  complete(body: Record<string, unknown>, signal: AbortSignal | undefined, onRetry: (r: RetryRecord) => void, onSent?: () => void): Promise<CompletionOutcome>;
}

export interface ModelClientOptions {
  baseURL: string;
  apiKey?: string | undefined;
  /** Per-request timeout. A 4B model writing 8192 tokens takes minutes on a busy GPU. */
  timeoutMs: number;
  /** Retries after the first attempt, for connection errors, 429 and 5xx only. */
  maxRetries: number;
  /** First backoff delay; doubles per retry up to 30 s. */
  retryBaseMs?: number;
  /** Largest response body read (LILYPAD_MODEL_MAX_RESPONSE_MB); a larger one is a ModelError. Default 16 MiB. */
  maxResponseBytes?: number;
  /** Where the user set the endpoint, named in errors (default: the environment variables). */
  settingNames?: ModelSettingNames | undefined;
}

/** What to tell the user to check: `lilypad run` has flags, `lilypad eval` has `--endpoint NAME=URL,…`. */
export interface ModelSettingNames {
  baseURL: string;
  model: string;
  apiKey: string;
}

export const ENV_SETTING_NAMES: ModelSettingNames = { baseURL: 'OPENAI_BASE_URL', model: 'LILYPAD_MODEL', apiKey: 'OPENAI_API_KEY' };

const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/**
 * Request bodies whose JSON the caller already holds as UTF-8 (the agent loop encodes its
 * append-only history once per message, not once per turn). The bytes must be exactly those of
 * `JSON.stringify(body)`; a body without them is serialised here.
 */
const serializedBodies = new WeakMap<object, Buffer>();

export function withJsonBytes<T extends object>(body: T, bytes: Buffer): T {
  serializedBodies.set(body, bytes);
  return body;
}

/** The bytes sent for `body`. */
export function jsonBytes(body: object): Buffer {
  return serializedBodies.get(body) ?? Buffer.from(JSON.stringify(body));
}

/** The JSON text sent for `body`. */
export function jsonText(body: object): string {
  return jsonBytes(body).toString('utf8');
}

const CONTEXT_LENGTH_RE = /context length|maximum context length|reduce the length|context window|too many tokens/i;

/**
 * The chat-completions client. The SDK's own retries are off: a retry re-runs a whole GPU
 * generation, so Lilypad decides when to retry and records every retry in the trajectory.
 */
export class ModelClient implements ChatModel {
  private readonly sdk: OpenAI;
  private lastErrorBody = '';
  private readonly retryBaseMs: number;
  private readonly maxResponseBytes: number;
  private readonly dispatcher: Agent;
  private readonly chatURL: URL;
  private readonly chatHeaders: Record<string, string>;
  private readonly names: ModelSettingNames;

  constructor(private readonly options: ModelClientOptions) {
    this.names = options.settingNames ?? ENV_SETTING_NAMES;
    this.retryBaseMs = options.retryBaseMs ?? 1000;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    // Node's fetch stops waiting for response headers after 300 s, while a 4B model writing 8192
    // tokens on a busy GPU may take longer: the request failed, was retried and the whole generation
    // ran again. This client's own connection pool waits as long as the model timeout says.
    this.dispatcher = new Agent({ connectTimeout: options.timeoutMs, headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs });
    this.sdk = new OpenAI({
      baseURL: options.baseURL,
      // Servers without auth accept any key; the SDK insists on a non-empty one.
      apiKey: options.apiKey ?? 'no-key',
      maxRetries: 0,
      // The SDK's timer runs until this client's fetch resolves, and that fetch reads the whole
      // body first: the timeout bounds the answer, not only its headers.
      timeout: options.timeoutMs,
      fetch: (url: string | URL | Request, init?: RequestInit) => this.boundedFetch(url, init),
    });
    // The same URL the SDK builds for chat.completions.create.
    const base = options.baseURL;
    this.chatURL = new URL(base + (base.endsWith('/') ? 'chat/completions' : '/chat/completions'));
    this.chatHeaders = {
      accept: 'application/json',
      'content-type': 'application/json',
      authorization: `Bearer ${options.apiKey ?? 'no-key'}`,
      'user-agent': 'lilypad',
    };
  }

  /**
   * One chat-completions attempt straight on the dispatcher (chat-post.ts). The SDK's fetch path (a
   * web Request, a web stream for the body, a second Response around the capped body, its JSON
   * re-encoding of the whole conversation) cost milliseconds per turn; the body is written here in
   * one piece. Errors are built the way the SDK builds them, so that classification, retries and
   * messages are unchanged. Like the SDK's, the timeout covers the whole answer, its body included.
   */
  private async postChat(body: Record<string, unknown>, signal: AbortSignal | undefined, onSent: (() => void) | undefined): Promise<unknown> {
    const res = await postJson(this.dispatcher, this.chatURL, this.chatHeaders, jsonBytes(body), {
      timeoutMs: this.options.timeoutMs,
      maxResponseBytes: this.maxResponseBytes,
      signal,
      onSent,
    });
    if (res.status < 200 || res.status >= 300) {
      const errText = res.body.toString('utf8');
      this.lastErrorBody = errText;
      const errJSON = safeJSON(errText);
      throw APIError.generate(res.status, errJSON as object | undefined, errJSON ? undefined : errText, headersOf(res.headers));
    }
    if (res.status === 204) return null;
    const mediaType = firstHeader(res.headers, 'content-type')?.split(';')[0]?.trim();
    if (mediaType?.includes('application/json') || mediaType?.endsWith('+json')) {
      if (firstHeader(res.headers, 'content-length') === '0') return undefined;
      return JSON.parse(res.body.toString('utf8')) as unknown;
    }
    return res.body.toString('utf8');
  }

  /**
   * fetch through this client's dispatcher that reads the whole body (at most maxResponseBytes)
   * before resolving. SGLang's error bodies lack the top-level `error` key, so the SDK drops their
   * text: keep the raw body of every failed response to classify it (context-length rejections).
   */
  private async boundedFetch(url: string | URL | Request, init?: RequestInit): Promise<Response> {
    const target = url instanceof Request ? url.url : url;
    const res = await undiciFetch(target, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: this.dispatcher });
    const body = await readCapped(res, this.maxResponseBytes);
    if (!res.ok) this.lastErrorBody = body.toString('utf8');
    const headers = new Headers();
    res.headers.forEach((value, key) => headers.append(key, value));
    return new Response(body.length > 0 ? body : null, { status: res.status, statusText: res.statusText, headers });
  }

  get baseURL(): string {
    return this.options.baseURL;
  }

  /** Lists the served model ids (GET /v1/models). */
  async listModels(signal?: AbortSignal): Promise<Array<{ id: string; max_model_len?: number }>> {
    const page = await this.sdk.models.list(signal ? { signal } : {});
    return page.data.map((m) => m as unknown as { id: string; max_model_len?: number });
  }

  /** The configured model, or the first id the server lists. */
  async resolveModel(configured: string | undefined, signal?: AbortSignal): Promise<string> {
    if (configured) return configured;
    let models: Array<{ id: string }>;
    try {
      models = await this.listModels(signal);
    } catch (err) {
      throw new ModelError(
        `could not list models at ${this.options.baseURL}/models: ${describe(err, '')}. ` +
          `Check ${this.names.baseURL} (it should end in /v1) and that the server is running, or set ${this.names.model}.`,
      );
    }
    const first = models[0]?.id;
    if (!first) throw new ModelError(`the server at ${this.options.baseURL} lists no models; set ${this.names.model}`);
    return first;
  }

  async complete(body: Record<string, unknown>, signal: AbortSignal | undefined, onRetry: (r: RetryRecord) => void, onSent?: () => void): Promise<CompletionOutcome> {
    let sent = false;
    const once = onSent
      ? () => {
          if (sent) return;
          sent = true;
          onSent();
        }
      : undefined;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
      this.lastErrorBody = '';
      const requestStarted = performance.now();
      try {
        const completion = (await this.postChat(body, signal, once)) as ChatCompletion;
        if (!completion || !Array.isArray(completion.choices) || completion.choices.length === 0) {
          throw new ModelError(`the model server returned a response without choices: ${JSON.stringify(completion).slice(0, 300)}`);
        }
        modelRequest((performance.now() - requestStarted) / 1000, 'ok', usageOf(completion));
        return { kind: 'ok', completion, attempts: attempt };
      } catch (err) {
        modelRequest((performance.now() - requestStarted) / 1000, 'error');
        if (err instanceof APIUserAbortError || signal?.aborted) throw new CancelledError(reasonText(signal?.reason));
        if (err instanceof ModelError) throw err;
        // Asking again would only bring the same oversized answer (and cost another generation).
        if (err instanceof APIConnectionError && err.cause instanceof ResponseTooLargeError) throw new ModelError(err.cause.message);
        const status = err instanceof APIError ? err.status : undefined;
        const text = describe(err, this.lastErrorBody);
        if (status === 400 && CONTEXT_LENGTH_RE.test(text)) return { kind: 'context_length', message: text, attempts: attempt };
        const retryable = err instanceof APIConnectionError || status === 408 || status === 429 || (status !== undefined && status >= 500);
        if (!retryable || attempt > this.options.maxRetries) {
          throw new ModelError(explain(status, text, attempt, this.names), status);
        }
        const waitMs = backoff(attempt, this.retryBaseMs, err instanceof APIError ? err.headers : undefined);
        modelRetried(status === undefined ? (/timed? ?out/i.test(text) ? 'timeout' : 'connection') : status === 408 ? 'timeout' : status === 429 ? 'rate_limited' : 'server_error');
        onRetry({ attempt, error: text, ...(status !== undefined ? { status } : {}), waitMs, at: new Date().toISOString() });
        await sleep(waitMs, signal);
      }
    }
  }
}

function usageOf(c: ChatCompletion): { prompt: number; completion: number; cached: number } | undefined {
  const u = c.usage;
  return u ? { prompt: u.prompt_tokens ?? 0, completion: u.completion_tokens ?? 0, cached: u.prompt_tokens_details?.cached_tokens ?? 0 } : undefined;
}

type UndiciResponse = Awaited<ReturnType<typeof undiciFetch>>;

/** The body, or ResponseTooLargeError as soon as it (or its announced length) passes `max`. */
async function readCapped(res: UndiciResponse, max: number): Promise<Buffer> {
  const tooLarge = () => tooLargeError(max);
  const announced = Number(res.headers.get('content-length') ?? NaN);
  if (announced > max) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!res.body) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let total = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
  }
  return Buffer.concat(chunks, total);
}

function headersOf(raw: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const [key, value] of Object.entries(raw)) {
    if (Array.isArray(value)) for (const v of value) headers.append(key, v);
    else if (value !== undefined) headers.append(key, value);
  }
  return headers;
}

function safeJSON(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function describe(err: unknown, rawBody: string): string {
  let base = err instanceof Error ? err.message : String(err);
  // The SDK's "Connection error." hides why (ECONNREFUSED, DNS, TLS): keep the cause.
  const cause = err instanceof Error ? (err.cause as { message?: string; code?: string } | undefined) : undefined;
  const causeText = cause?.code ?? cause?.message;
  if (causeText && !base.includes(causeText)) base = `${base.replace(/\.+$/, '')} (${causeText})`;
  const body = rawBody.trim();
  if (!body || base.includes(body.slice(0, 60))) return base;
  let inner = body;
  try {
    const parsed = JSON.parse(body) as { message?: unknown; error?: unknown };
    const wrapped = typeof parsed.error === 'object' && parsed.error !== null ? (parsed.error as { message?: unknown }).message : parsed.error;
    inner = String(wrapped ?? parsed.message ?? body);
  } catch {
    /* not JSON: keep the text */
  }
  // vLLM's wrapped body already reached the SDK's message; do not say it twice.
  if (base.includes(inner.slice(0, 200))) return base;
  return `${base}: ${inner.slice(0, 1000)}`;
}

function explain(status: number | undefined, message: string, attempts: number, names: ModelSettingNames): string {
  const tries = attempts > 1 ? ` (after ${attempts} attempts)` : '';
  const text = message.replace(/[.\s]+$/, '');
  if (/auto.? tool choice requires/i.test(text)) {
    return `the model server rejected tool calling${tries}: ${text}. Start vLLM with --enable-auto-tool-choice --tool-call-parser qwen3_coder.`;
  }
  if (status === 401 || status === 403) return `the model server refused the request (HTTP ${status})${tries}: ${text}. Check ${names.apiKey}.`;
  if (status === 404) return `the model server answered 404${tries}: ${text}. Check ${names.baseURL} (it should end in /v1) and ${names.model}.`;
  if (status === undefined) return `could not reach the model server${tries}: ${text}. Check ${names.baseURL} and that the server is up.`;
  return `the model server failed (HTTP ${status})${tries}: ${text}`;
}

function backoff(attempt: number, baseMs: number, headers: Headers | undefined): number {
  const retryAfterMs = parseRetryAfter(headers?.get?.('retry-after') ?? null);
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, 60_000);
  const exp = Math.min(baseMs * 2 ** (attempt - 1), 30_000);
  return Math.round(exp * (0.8 + Math.random() * 0.4));
}

/** Retry-After as delay-seconds or as an HTTP-date (RFC 9110); undefined when absent or unusable. */
function parseRetryAfter(value: string | null): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) {
    const seconds = Number(text);
    return seconds > 0 ? seconds * 1000 : undefined;
  }
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  const ms = at - Date.now();
  return ms > 0 ? ms : undefined;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new CancelledError(reasonText(signal?.reason)));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
