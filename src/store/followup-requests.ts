import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';
import { withRedisLock } from './redis-lock.ts';
import { parseStoredList } from './stored-json.ts';

/**
 * The Redis side of follow-up runs on Lilypad's pull requests (pipeline/followups.ts decides when
 * one runs): per pull request, the requests waiting for the next run, the follow-up job queued or
 * running now, and two counters; per follow-up job, the requests it took over.
 */
const followupRequestSchema = z.object({
  by: z.string(),
  /** The text after `/lilypad` (empty for a "changes requested" review without the command). */
  instructions: z.string(),
  /** ci: Lilypad's own automatic CI fix (`ci_fix: auto`); `/lilypad fix-ci` is a comment with `ci`. */
  trigger: z.enum(['comment', 'review', 'review_comment', 'ci']),
  /**
   * A request to fix failing CI: the head commit whose checks failed when it was made (the run reads
   * the checks on the head it works on), and whether Lilypad made it by itself.
   */
  ci: z.object({ headSha: z.string().regex(/^[0-9a-f]{40}$/), auto: z.boolean() }).optional(),
  commentId: z.number().int().optional(),
  reviewId: z.number().int().optional(),
  deliveryId: z.string(),
  at: z.string(),
  /** The repository's `max_followups` when the request was made. */
  maxFollowups: z.number().int().min(0).optional(),
});
export type FollowupRequest = z.infer<typeof followupRequestSchema>;

/** One of Lilypad's pull requests, as its follow-up keys name it. */
export interface FollowupPull {
  repoId: number;
  pullNumber: number;
}

const TTL_S = 30 * 24 * 3600;
const COUNTER_TTL_S = 365 * 24 * 3600;

/** Runs `fn` holding the pull request's follow-up lock: every change below is made under it. */
export function withFollowupLock<T>(redis: Redis, prefix: string, pull: FollowupPull, fn: () => Promise<T>): Promise<T> {
  return withRedisLock(redis, keys.followupLock(prefix, pull.repoId, pull.pullNumber), { ttlMs: 30_000, waitMs: 15_000 }, fn);
}

export async function appendRequest(redis: Redis, prefix: string, pull: FollowupPull, req: FollowupRequest): Promise<void> {
  const key = keys.followupPending(prefix, pull.repoId, pull.pullNumber);
  await redis.multi().rpush(key, JSON.stringify(followupRequestSchema.parse(req))).expire(key, TTL_S).exec();
}

/** The oldest waiting request, if any can be read. */
export async function firstPendingRequest(redis: Redis, prefix: string, pull: FollowupPull): Promise<FollowupRequest | undefined> {
  return parseStoredList(followupRequestSchema, await redis.lrange(keys.followupPending(prefix, pull.repoId, pull.pullNumber), 0, 0))[0];
}

/** Drops every waiting request; returns how many there were. */
export async function dropPendingRequests(redis: Redis, prefix: string, pull: FollowupPull): Promise<number> {
  const key = keys.followupPending(prefix, pull.repoId, pull.pullNumber);
  const replies = await redis.multi().llen(key).del(key).exec();
  return Number(replies?.[0]?.[1] ?? 0);
}

/** The follow-up job last queued for the pull request (it may have ended since). */
export async function currentFollowup(redis: Redis, prefix: string, pull: FollowupPull): Promise<string | null> {
  return redis.get(keys.followupCurrent(prefix, pull.repoId, pull.pullNumber));
}

export async function setCurrentFollowup(redis: Redis, prefix: string, pull: FollowupPull, jobId: string): Promise<void> {
  await redis.set(keys.followupCurrent(prefix, pull.repoId, pull.pullNumber), jobId, 'EX', TTL_S);
}

export async function clearCurrentFollowup(redis: Redis, prefix: string, pull: FollowupPull): Promise<void> {
  await redis.del(keys.followupCurrent(prefix, pull.repoId, pull.pullNumber));
}

/** Follow-up runs queued since the pull request's last full run (what `max_followups` limits). */
export async function followupRunCount(redis: Redis, prefix: string, pull: FollowupPull): Promise<number> {
  return Number((await redis.get(keys.followupRuns(prefix, pull.repoId, pull.pullNumber))) ?? 0);
}

/** The number of the pull request's last follow-up job ('0' before the first). */
export async function lastFollowupSeq(redis: Redis, prefix: string, pull: FollowupPull): Promise<string> {
  return (await redis.get(keys.followupSeq(prefix, pull.repoId, pull.pullNumber))) ?? '0';
}

/** Counts one more follow-up run and returns its number (unique per pull request, for its job id). */
export async function countFollowupRun(redis: Redis, prefix: string, pull: FollowupPull): Promise<number> {
  const runs = keys.followupRuns(prefix, pull.repoId, pull.pullNumber);
  const seq = keys.followupSeq(prefix, pull.repoId, pull.pullNumber);
  await redis.multi().incr(runs).expire(runs, COUNTER_TTL_S).exec();
  const n = await redis.incr(seq);
  await redis.expire(seq, COUNTER_TTL_S);
  return n;
}

/** A full run from the issue published this pull request again: its follow-ups count from zero. */
export async function resetFollowupCount(redis: Redis, prefix: string, repoId: number, pullNumber: number): Promise<void> {
  await redis.del(keys.followupRuns(prefix, repoId, pullNumber));
}

/**
 * The requests a follow-up run works on: taken from the waiting list once, and kept under the job's
 * id so that a retry of the same job (an infrastructure failure) works on the same ones.
 */
export async function takeRequests(redis: Redis, prefix: string, pull: FollowupPull, jobId: string): Promise<FollowupRequest[]> {
  const taken = (await redis.eval(TAKE, 2, keys.followupPending(prefix, pull.repoId, pull.pullNumber), keys.followupTaken(prefix, jobId), TTL_S)) as string[];
  return parseStoredList(followupRequestSchema, taken);
}

/** Moves the waiting list onto the job's own list in one step (nothing is lost between the two). */
const TAKE = `
local waiting = redis.call('lrange', KEYS[1], 0, -1)
if #waiting > 0 then
  redis.call('rpush', KEYS[2], unpack(waiting))
  redis.call('del', KEYS[1])
  redis.call('expire', KEYS[2], ARGV[1])
end
return redis.call('lrange', KEYS[2], 0, -1)`;

/** The job has ended: what it took is no longer needed for a retry. */
export async function forgetTakenRequests(redis: Redis, prefix: string, jobId: string): Promise<void> {
  await redis.del(keys.followupTaken(prefix, jobId));
}
