import { Redis } from 'ioredis';

/**
 * One Redis connection. BullMQ workers need `maxRetriesPerRequest: null` (blocking commands must
 * wait through reconnects); RESP2 keeps ioredis 5 and Redis 7 in step.
 */
export function createRedis(url: string, opts: { forWorker?: boolean } = {}): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: opts.forWorker ? null : 3,
    enableReadyCheck: true,
    lazyConnect: false,
  });
}
