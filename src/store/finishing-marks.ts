import type { Redis } from 'ioredis';
import { keys } from './keys.ts';

/**
 * A run job that has written its final status may still show as active in BullMQ for a moment. It
 * marks itself finishing first, so that a new trigger in that moment waits for the queue instead of
 * answering "already working on this issue". The mark holds no data: only its presence is read.
 */
const TTL_S = 600;

export async function markFinishing(redis: Redis, prefix: string, jobId: string): Promise<void> {
  await redis.set(keys.finishing(prefix, jobId), '1', 'EX', TTL_S);
}

export async function isFinishing(redis: Redis, prefix: string, jobId: string): Promise<boolean> {
  return (await redis.exists(keys.finishing(prefix, jobId))) === 1;
}

export async function clearFinishing(redis: Redis, prefix: string, jobId: string): Promise<void> {
  await redis.del(keys.finishing(prefix, jobId));
}
