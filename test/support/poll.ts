/**
 * The one way tests wait: poll a condition, never sleep a fixed time and hope. A wait that fails
 * says what it waited for and, if the check threw, the last thing it said.
 */
export interface WaitOptions {
  /** What is awaited, as the failure should say it: "the first beat", "the run record". */
  what: string;
  /** Give up after this long (default 10 s). */
  timeoutMs?: number;
  /** Time between checks (default 25 ms). */
  intervalMs?: number;
}

/** The error a wait fails with; `cause` holds the check's last error, if it threw. */
export class WaitTimeout extends Error {
  override name = 'WaitTimeout';
}

/**
 * Calls `check` until it returns true, then resolves. A check that throws counts as "not yet" (so an
 * asserting check can be polled); after `timeoutMs` the wait fails with a `WaitTimeout` naming `what`.
 */
export async function waitFor(check: () => boolean | Promise<boolean>, opts: WaitOptions): Promise<void> {
  const { what, timeoutMs = 10_000, intervalMs = 25 } = opts;
  const started = Date.now();
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
      last = undefined;
    } catch (err) {
      last = err;
    }
    if (Date.now() - started >= timeoutMs) {
      const said = last instanceof Error ? `; the check last said: ${last.message}` : '';
      throw new WaitTimeout(`timed out after ${timeoutMs} ms waiting for ${what}${said}`, { cause: last });
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Runs `check` (which asserts) until it passes; after `timeoutMs` rethrows its last assertion error
 * as it is, so the failure shows the assertion's own diff.
 */
export async function eventually(check: () => void | Promise<void>, opts: WaitOptions): Promise<void> {
  try {
    await waitFor(async () => {
      await check();
      return true;
    }, opts);
  } catch (err) {
    if (err instanceof WaitTimeout && err.cause instanceof Error) throw err.cause;
    throw err;
  }
}
