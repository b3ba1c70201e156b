import diagnostics from 'node:diagnostics_channel';
import { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError } from 'openai';
import type { Dispatcher } from 'undici';

/**
 * One POST of a chat request, its answer read whole. This is the agent loop's own path to the
 * model server: straight on undici's dispatcher with a handler that keeps the answer's chunks, no
 * web Request, stream or async iterator in between (they were most of the client's time in a
 * step). Failures are the OpenAI SDK's error classes, as its own fetch path raises them, so that
 * ModelClient classifies and retries them the same way.
 */

export interface PostOptions {
  /** The whole exchange, the answer's body included. */
  timeoutMs: number;
  /** Largest answer read; past it the exchange stops with ResponseTooLargeError as the cause. */
  maxResponseBytes: number;
  signal?: AbortSignal | undefined;
  /** Called once undici has written the request whole. */
  onSent?: (() => void) | undefined;
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** The answer went past maxResponseBytes; carried as the cause of an APIConnectionError. */
export class ResponseTooLargeError extends Error {
  override name = 'ResponseTooLargeError';
}

export function tooLargeError(max: number): ResponseTooLargeError {
  return new ResponseTooLargeError(
    `the model server's response is larger than ${formatSize(max)} (LILYPAD_MODEL_MAX_RESPONSE_MB); stopped reading it. ` +
      'Check the server (a runaway generation, or not a chat-completions endpoint) or raise the limit.',
  );
}

function formatSize(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  return Number.isInteger(mib) ? `${mib} MiB` : bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}

export function firstHeader(raw: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = raw[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * When undici has written a request whole. Its documented diagnostics channels say when it
 * creates a request (synchronously, inside the dispatch call) and when it has written one; the
 * request created while `awaitingRequest` is set is the one that callback belongs to.
 */
const onRequestWritten = new WeakMap<object, () => void>();
let awaitingRequest: (() => void) | undefined;
diagnostics.subscribe('undici:request:create', (message) => {
  if (!awaitingRequest) return;
  onRequestWritten.set((message as { request: object }).request, awaitingRequest);
  awaitingRequest = undefined;
});
diagnostics.subscribe('undici:request:bodySent', (message) => {
  const request = (message as { request: object }).request;
  const callback = onRequestWritten.get(request);
  if (!callback) return;
  onRequestWritten.delete(request);
  callback();
});

/** POSTs `payload` to `url` on `dispatcher` and reads the answer whole. */
export function postJson(dispatcher: Dispatcher, url: URL, headers: Record<string, string>, payload: Buffer, options: PostOptions): Promise<RawAnswer> {
  const { signal, maxResponseBytes: max } = options;
  if (signal?.aborted) return Promise.reject(new APIUserAbortError());
  return new Promise<RawAnswer>((resolve, reject) => {
    let controller: Dispatcher.DispatchController | undefined;
    let stopped: Error | undefined;
    let settled = false;
    let status = 0;
    let answerHeaders: RawAnswer['headers'] = {};
    let chunks: Buffer[] = [];
    let bytes = 0;
    const settle = (error: Error | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve({ status, headers: answerHeaders, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes) });
    };
    // Ends the exchange from this side; undici is told as soon as it has started the request.
    const stop = (error: Error): void => {
      stopped ??= error;
      settle(error);
      controller?.abort(error);
    };
    const timer = setTimeout(() => stop(new APIConnectionTimeoutError()), options.timeoutMs);
    const onAbort = (): void => stop(new APIUserAbortError());
    signal?.addEventListener('abort', onAbort, { once: true });
    const tooLarge = (): void => stop(new APIConnectionError({ message: undefined, cause: tooLargeError(max) }));
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (stopped) c.abort(stopped);
      },
      onResponseStart(_c, statusCode, responseHeaders) {
        // 1xx answers come first and are not the answer.
        status = statusCode;
        answerHeaders = responseHeaders;
        chunks = [];
        bytes = 0;
        if (Number(firstHeader(responseHeaders, 'content-length') ?? NaN) > max) tooLarge();
      },
      onResponseData(_c, chunk) {
        bytes += chunk.length;
        if (bytes > max) tooLarge();
        else chunks.push(chunk);
      },
      onResponseEnd() {
        settle(undefined);
      },
      onResponseError(_c, error) {
        settle(stopped ?? asSdkError(error));
      },
    };
    awaitingRequest = options.onSent;
    try {
      dispatcher.dispatch({ origin: url.origin, path: url.pathname + url.search, method: 'POST', headers, body: payload }, handler);
    } finally {
      awaitingRequest = undefined;
    }
  });
}

/** As the SDK tells them apart: the dispatcher's headers/body timeouts are timeouts, the rest connection errors. */
function asSdkError(error: Error): Error {
  if (error.name === 'AbortError' || /timed? ?out/i.test(String(error) + (error.cause ? String(error.cause) : ''))) return new APIConnectionTimeoutError();
  return new APIConnectionError({ message: undefined, cause: error });
}
