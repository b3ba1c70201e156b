/**
 * Cancellation, shared by every layer: a job's AbortSignal (a cancel, Ctrl-C, shutdown, a lost
 * lock) reaches git, Docker, the model client and GitHub calls, and each ends with this error.
 */
export class CancelledError extends Error {
  override name = 'CancelledError';
  constructor(message = 'cancelled') {
    super(message);
  }
}

/** The human text of an abort reason. */
export function reasonText(reason: unknown): string {
  if (reason instanceof Error) return reason.message;
  if (typeof reason === 'string') return reason;
  return 'cancelled';
}

/** Throws a CancelledError when the signal has fired. */
export function throwIfCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
}
