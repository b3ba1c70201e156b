import type { Redis } from 'ioredis';
import { keys, type IssueKeyRef } from './keys.ts';

/** A one-time reply (e.g. "only writers can start Lilypad") is marked for this long. */
const TTL_S = 90 * 24 * 3600;

/**
 * Marks the reply `what` on the issue as posted; true only for the first caller (SET NX), who posts
 * it. The mark holds no data: only its presence is read.
 */
export async function markRepliedOnce(redis: Redis, prefix: string, ref: IssueKeyRef, what: string): Promise<boolean> {
  return (await redis.set(keys.replied(prefix, ref, what), '1', 'EX', TTL_S, 'NX')) === 'OK';
}
