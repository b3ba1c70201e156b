import type { Redis } from 'ioredis';
import { keys } from './keys.ts';

const TTL_S = 30 * 24 * 3600;

/**
 * The reconcile sweep queues a job lost with Redis's data again once per status update: true only
 * for the first caller for this update (SET NX). The mark holds no data: only its presence is read.
 */
export async function markRecoveredOnce(redis: Redis, prefix: string, repoId: number, issueNumber: number, statusUpdatedAt: string): Promise<boolean> {
  return (await redis.set(keys.recovered(prefix, repoId, issueNumber, statusUpdatedAt), '1', 'EX', TTL_S, 'NX')) === 'OK';
}
