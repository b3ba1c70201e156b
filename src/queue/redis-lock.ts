import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** The lock could not be had in time; the work did not run (a transient failure, retried). */
export class LockTimeoutError extends Error {
  override name = 'LockTimeoutError';
}

// Deletes the key only while it still holds this holder's token: one atomic step in Redis.
const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/**
 * Runs `fn` holding a Redis lock (SET NX with an expiry, released only by its holder, atomically).
 * `fn` never runs without the lock: when it cannot be had within `waitMs`, LockTimeoutError.
 */
export async function withRedisLock<T>(redis: Redis, key: string, opts: { ttlMs: number; waitMs: number }, fn: () => Promise<T>): Promise<T> {
  const token = randomBytes(12).toString('hex');
  const until = Date.now() + opts.waitMs;
  while ((await redis.set(key, token, 'PX', opts.ttlMs, 'NX')) !== 'OK') {
    if (Date.now() >= until) throw new LockTimeoutError(`the lock ${key} was still held by another worker after ${Math.round(opts.waitMs / 1000)} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  try {
    return await fn();
  } finally {
    await redis.eval(RELEASE, 1, key, token).catch(() => undefined);
  }
}
