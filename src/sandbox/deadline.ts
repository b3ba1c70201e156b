import { SandboxError } from './errors.ts';

/** The sandbox did not answer in time: the container is removed and the run ends with this. */
export class SandboxDeadlineError extends SandboxError {
  override name = 'SandboxDeadlineError';
}

/**
 * Waits for `promise` at most `ms`. The promise itself cannot be stopped (Docker has no API to
 * stop an exec), so the caller must tear down whatever it was waiting on when this rejects.
 */
export async function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SandboxDeadlineError(`${what} did not finish within ${formatSeconds(ms)}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
    // A rejection after the deadline has nobody left to hear it.
    promise.catch(() => undefined);
  }
}

function formatSeconds(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`;
}
