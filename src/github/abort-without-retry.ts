import type { Octokit } from '@octokit/core';

/**
 * An Octokit plugin: a request whose AbortSignal fires fails at once instead of being retried.
 *
 * fetch rejects an aborted request with the signal's reason. Lilypad aborts with reasons of its
 * own (a cancel, a shutdown), which @octokit/request turns into a RequestError with status 500,
 * and @octokit/plugin-retry then retries that "500" three times, waiting 1, 4 and 9 s: a stopping
 * worker sat 14 s on every GitHub call left in its job. Handing fetch a signal whose reason is an
 * AbortError makes @octokit/request rethrow it as it is, which the retry plugin never retries.
 */
export function abortWithoutRetry(octokit: Octokit): void {
  octokit.hook.wrap('request', async (request, options) => {
    const signal = options.request?.signal as AbortSignal | undefined;
    if (signal) options.request = { ...options.request, signal: asAbortError(signal) };
    return request(options);
  });
}

/** A signal that aborts with an AbortError (carrying the original reason) when `signal` does. */
function asAbortError(signal: AbortSignal): AbortSignal {
  const toError = () => Object.assign(new DOMException(`the request was aborted: ${reasonOf(signal)}`, 'AbortError'), { cause: signal.reason as unknown });
  if (signal.aborted) return AbortSignal.abort(toError());
  const controller = new AbortController();
  signal.addEventListener('abort', () => controller.abort(toError()), { once: true });
  return controller.signal;
}

function reasonOf(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  return r instanceof Error ? r.message : String(r);
}
