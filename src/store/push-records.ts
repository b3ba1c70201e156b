import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';
import { parseStored } from './stored-json.ts';

/**
 * What Lilypad last pushed to a branch (`sha`), and what it was about to push (`pending`), should it
 * crash between the two: a branch is Lilypad's to reuse only while its tip is one of these
 * (pipeline/publish-change.ts decides).
 */
const pushRecordSchema = z.object({ sha: z.string().nullable(), pending: z.string().nullable() });
export type PushRecord = z.infer<typeof pushRecordSchema>;

const TTL_S = 365 * 24 * 3600;
const NOTHING: PushRecord = { sha: null, pending: null };

/** The branch's record; a branch with none (or an unreadable one) has nothing of Lilypad's on record. */
export async function readPushRecord(redis: Redis, prefix: string, repoId: number, branch: string): Promise<PushRecord> {
  return parseStored(pushRecordSchema, await redis.get(keys.pushed(prefix, repoId, branch))) ?? NOTHING;
}

export async function writePushRecord(redis: Redis, prefix: string, repoId: number, branch: string, record: PushRecord): Promise<void> {
  await redis.set(keys.pushed(prefix, repoId, branch), JSON.stringify(pushRecordSchema.parse(record)), 'EX', TTL_S);
}

/**
 * After review, the branch is no longer Lilypad's alone: a follow-up's commit sits on top of what
 * reviewers may have pushed, so a later re-run of the issue must not take the branch over (it uses
 * the next free name instead).
 */
export async function forgetPush(redis: Redis, prefix: string, repoId: number, branch: string): Promise<void> {
  await redis.del(keys.pushed(prefix, repoId, branch));
}

/**
 * The commit Lilypad's own last push made the branch's head, and when (Lilypad's clock, taken
 * right after the push: never earlier than the moment the branch moved). `/lilypad ci` releases a
 * tip only if this says it was the head before the command was written; a commit's own dates are
 * whatever its pusher wrote. Kept apart from the record above, which a follow-up forgets.
 */
const headPushSchema = z.object({ sha: z.string(), at: z.string() });
export type HeadPush = z.infer<typeof headPushSchema>;

export async function recordHeadPush(redis: Redis, prefix: string, repoId: number, branch: string, sha: string, at: Date = new Date()): Promise<void> {
  await redis.set(keys.headPushed(prefix, repoId, branch), JSON.stringify({ sha, at: at.toISOString() }), 'EX', TTL_S);
}

/** Lilypad's last push to the branch, or null when it has none on record (or an unreadable one). */
export async function readHeadPush(redis: Redis, prefix: string, repoId: number, branch: string): Promise<HeadPush | null> {
  return parseStored(headPushSchema, await redis.get(keys.headPushed(prefix, repoId, branch))) ?? null;
}
