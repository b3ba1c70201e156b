import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { throwIfCancelled } from '../shared/cancel.ts';

/** The lock was held by someone else for all of `waitMs`; the function did not run. Retry later. */
export class LockTimeoutError extends Error {
  override name = 'LockTimeoutError';
  constructor(
    readonly key: string,
    readonly waitedMs: number,
  ) {
    super(`could not take the Redis lock ${key} within ${waitedMs} ms: another holder has it`);
  }
}

export interface LockOptions {
  /** Expiry of the lock; it is renewed while the function runs, so this only bounds a crashed holder. */
  ttlMs: number;
  /** How long to wait for another holder before giving up with LockTimeoutError. */
  waitMs: number;
  /** Stops the wait (a cancelled job does not queue for a lock): rejects with CancelledError. */
  signal?: AbortSignal | undefined;
}

export interface HeldLock {
  /** Aborted if the lock was lost while held (its renewal found another holder): stop and let go. */
  signal: AbortSignal;
}

// Delete or extend only while the value is still this holder's token, in one step on the server: a
// GET followed by a DEL would, after a pause between the two, delete the next holder's lock.
const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

const POLL_MS = 50;

/**
 * Runs `fn` holding a Redis lock (SET NX with an expiry, renewed while `fn` runs, released only by
 * its holder). `fn` never runs without the lock: when it cannot be had within `waitMs`, this throws
 * LockTimeoutError.
 */
export async function withRedisLock<T>(redis: Redis, key: string, opts: LockOptions, fn: (lock: HeldLock) => Promise<T>): Promise<T> {
  const token = randomBytes(16).toString('hex');
  await acquire(redis, key, token, opts);
  const lost = new AbortController();
  const stopRenewing = keepAlive(redis, key, token, opts.ttlMs, lost);
  try {
    return await fn({ signal: lost.signal });
  } finally {
    stopRenewing();
    // A failed release (Redis unreachable) must not hide fn's outcome; the expiry frees the lock.
    await redis.eval(RELEASE, 1, key, token).catch(() => undefined);
  }
}

async function acquire(redis: Redis, key: string, token: string, opts: LockOptions): Promise<void> {
  const started = Date.now();
  for (;;) {
    throwIfCancelled(opts.signal);
    if ((await redis.set(key, token, 'PX', opts.ttlMs, 'NX')) === 'OK') return;
    const left = started + opts.waitMs - Date.now();
    if (left <= 0) throw new LockTimeoutError(key, opts.waitMs);
    await new Promise((r) => setTimeout(r, Math.min(POLL_MS, left)));
  }
}

/** Extends the lock every third of its ttl; returns the function that stops doing so. */
function keepAlive(redis: Redis, key: string, token: string, ttlMs: number, lost: AbortController): () => void {
  let busy = false;
  const timer = setInterval(
    () => {
      if (busy || lost.signal.aborted) return;
      busy = true;
      redis
        .eval(RENEW, 1, key, token, String(ttlMs))
        .then((renewed) => {
          if (renewed === 0) lost.abort(new Error(`the Redis lock ${key} expired and was taken by another holder`));
        })
        // Unreachable Redis: try again at the next tick; the ttl decides if the lock survives.
        .catch(() => undefined)
        .finally(() => (busy = false));
    },
    Math.max(10, Math.floor(ttlMs / 3)),
  );
  timer.unref();
  return () => clearInterval(timer);
}
