import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * Runs `fn` holding a Redis lock (SET NX with an expiry, released only by its holder). If the lock
 * cannot be had within `waitMs`, `fn` runs anyway: a late edit beats a lost one.
 */
export async function withRedisLock<T>(redis: Redis, key: string, opts: { ttlMs: number; waitMs: number }, fn: () => Promise<T>): Promise<T> {
  const token = randomBytes(8).toString('hex');
  for (const until = Date.now() + opts.waitMs; Date.now() < until; ) {
    if ((await redis.set(key, token, 'PX', opts.ttlMs, 'NX')) === 'OK') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  try {
    return await fn();
  } finally {
    if ((await redis.get(key)) === token) await redis.del(key);
  }
}
