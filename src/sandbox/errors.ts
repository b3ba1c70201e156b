/** The sandbox could not be created, talked to, or is gone. Infrastructure, not a model mistake. */
export class SandboxError extends Error {
  override name = 'SandboxError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The operation was stopped because its AbortSignal fired (cancel, Ctrl-C, shutdown). */
export class CancelledError extends Error {
  override name = 'CancelledError';
  constructor(message = 'cancelled') {
    super(message);
  }
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
}

export function reasonText(reason: unknown): string {
  if (reason instanceof Error) return reason.message;
  if (typeof reason === 'string') return reason;
  return 'cancelled';
}
