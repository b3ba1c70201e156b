import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys, type IssueKeyRef } from './keys.ts';
import { withRedisLock } from './redis-lock.ts';

/**
 * The id of the status comment Lilypad edits on an issue (or of a follow-up run's status reply on a
 * pull request, by `slot`), so that it is found without listing the comments every time.
 */
const commentIdSchema = z.coerce.number().int().positive();

const TTL_S = 90 * 24 * 3600;

/** The remembered id, or null when none is remembered (or what is stored is not an id). */
export async function readStatusCommentId(redis: Redis, prefix: string, ref: IssueKeyRef, slot?: string): Promise<number | null> {
  const parsed = commentIdSchema.safeParse(await redis.get(keys.statusComment(prefix, ref, slot)));
  return parsed.success ? parsed.data : null;
}

export async function writeStatusCommentId(redis: Redis, prefix: string, ref: IssueKeyRef, slot: string | undefined, id: number): Promise<void> {
  await redis.set(keys.statusComment(prefix, ref, slot), String(commentIdSchema.parse(id)), 'EX', TTL_S);
}

/** Runs `fn` holding the comment's lock, so that two processes do not both create one. */
export function withStatusCommentLock<T>(redis: Redis, prefix: string, ref: IssueKeyRef, slot: string | undefined, fn: () => Promise<T>): Promise<T> {
  return withRedisLock(redis, keys.statusCommentLock(prefix, ref, slot), { ttlMs: 15_000, waitMs: 5_000 }, fn);
}
