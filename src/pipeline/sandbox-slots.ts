import { CancelledError, reasonText } from '../shared/cancel.ts';

/**
 * The sandboxes one worker runs at once. Every sandbox session (each attempt of a best-of-k job
 * counts as one) holds a slot from before its container and setup network exist until both are
 * removed, so a worker never runs more than LILYPAD_WORKER_CONCURRENCY sandboxes, whatever the
 * jobs' `attempts` say (Docker's default address pools run out near 30 networks). Waiters are
 * served first come, first served; a slot is taken one at a time, never several at once, so two
 * jobs waiting for more slots than are free cannot block each other.
 */
export class SandboxSlots {
  private free: number;
  private readonly waiting: Array<{ grant: () => void }> = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`the sandbox slot count must be a positive integer, got ${size}`);
    this.free = size;
  }

  /** Slots in use now. */
  get inUse(): number {
    return this.size - this.free;
  }

  /** Runs `fn` holding one slot; waits for one first (giving up when `signal` aborts). */
  async use<T>(signal: AbortSignal | undefined, fn: () => Promise<T>, onWait?: () => void): Promise<T> {
    await this.acquire(signal, onWait);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private acquire(signal: AbortSignal | undefined, onWait?: () => void): Promise<void> {
    if (signal?.aborted) return Promise.reject(new CancelledError(reasonText(signal.reason)));
    if (this.free > 0 && this.waiting.length === 0) {
      this.free--;
      return Promise.resolve();
    }
    onWait?.();
    return new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(entry);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(new CancelledError(reasonText(signal?.reason)));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(entry);
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.free++;
  }
}
