import { Redis } from 'ioredis';
import { urlForDisplay } from '../shared/url-secrets.ts';

/**
 * One Redis connection. BullMQ workers need `maxRetriesPerRequest: null` (blocking commands must
 * wait through reconnects); RESP2 keeps ioredis 5 and Redis 7 in step.
 */
export function createRedis(url: string, opts: { forWorker?: boolean } = {}): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: opts.forWorker ? null : 3,
    enableReadyCheck: true,
    lazyConnect: false,
  });
  // ioredis reconnects by itself; without a listener every failed attempt is printed as
  // "Unhandled error event". Report an outage once, and again when it is over.
  let down = false;
  redis.on('error', (err: Error) => {
    if (!down) process.stderr.write(`lilypad: Redis at ${urlForDisplay(url)} is unreachable (${err.message}); retrying\n`);
    down = true;
  });
  redis.on('ready', () => {
    if (down) process.stderr.write(`lilypad: Redis at ${urlForDisplay(url)} is reachable again\n`);
    down = false;
  });
  return redis;
}

/** Fails fast, with what to do, when Redis cannot be reached at start-up. */
export async function checkRedis(url: string): Promise<void> {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 5000, retryStrategy: () => null });
  let cause = '';
  probe.on('error', (err: Error) => (cause ||= err.message));
  try {
    await probe.connect();
    await probe.ping();
  } catch (err) {
    throw new Error(`cannot reach Redis at ${urlForDisplay(url)} (${cause || (err as Error).message}). Start Redis, or point REDIS_URL at it.`);
  } finally {
    probe.disconnect();
  }
}
