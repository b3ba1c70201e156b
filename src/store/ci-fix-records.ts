import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';
import { withRedisLock } from './redis-lock.ts';
import { parseStored } from './stored-json.ts';

/**
 * What Lilypad keeps about failing CI on one of its pull requests (pipeline/ci-triggers.ts decides,
 * the follow-up run records what a fix addressed): how many fixes it started by itself, which head
 * commits it has already decided about (one start or one hint per head, however many CI events
 * arrive for it), and the failure signatures each pushed fix addressed, so that a check that fails
 * the same way after a fix is not retried automatically.
 */
const addressedSchema = z.object({
  /** The commit the fix was pushed as. */
  commit: z.string(),
  /** The head whose failing checks it addressed. */
  forHead: z.string(),
  checks: z.array(z.object({ name: z.string(), signature: z.string() })).max(50),
  auto: z.boolean(),
  at: z.string(),
});
export type AddressedFix = z.infer<typeof addressedSchema>;

const ciFixRecordSchema = z.object({
  /** Automatic CI fixes started on the pull request (`ci_fix_attempts` bounds them). */
  autoFixes: z.number().int().min(0),
  /** Head commits decided about, newest last. */
  decided: z.array(z.string()),
  /** Fixes pushed, oldest first. */
  fixes: z.array(addressedSchema),
});
export type CiFixRecord = z.infer<typeof ciFixRecordSchema>;

export const EMPTY_CI_FIX_RECORD: CiFixRecord = { autoFixes: 0, decided: [], fixes: [] };

const TTL_S = 365 * 24 * 3600;
/** Kept per pull request; older entries drop off (a head long gone is not decided about again). */
const MAX_DECIDED = 100;
const MAX_FIXES = 50;

export interface CiFixPull {
  repoId: number;
  pullNumber: number;
}

/** Runs `fn` holding the pull request's CI decision lock. */
export function withCiFixLock<T>(redis: Redis, prefix: string, pull: CiFixPull, fn: () => Promise<T>): Promise<T> {
  return withRedisLock(redis, keys.ciFixLock(prefix, pull.repoId, pull.pullNumber), { ttlMs: 60_000, waitMs: 30_000 }, fn);
}

/** The record; an unreadable or missing one reads as empty. */
export async function readCiFixRecord(redis: Redis, prefix: string, pull: CiFixPull): Promise<CiFixRecord> {
  return parseStored(ciFixRecordSchema, await redis.get(keys.ciFix(prefix, pull.repoId, pull.pullNumber))) ?? EMPTY_CI_FIX_RECORD;
}

async function writeCiFixRecord(redis: Redis, prefix: string, pull: CiFixPull, record: CiFixRecord): Promise<void> {
  const bounded: CiFixRecord = { ...record, decided: record.decided.slice(-MAX_DECIDED), fixes: record.fixes.slice(-MAX_FIXES) };
  await redis.set(keys.ciFix(prefix, pull.repoId, pull.pullNumber), JSON.stringify(ciFixRecordSchema.parse(bounded)), 'EX', TTL_S);
}

/** Marks `headSha` as decided about, counting an automatic fix when one was started. Call under the lock. */
export async function recordCiDecision(redis: Redis, prefix: string, pull: CiFixPull, headSha: string, startedAutoFix: boolean): Promise<CiFixRecord> {
  const current = await readCiFixRecord(redis, prefix, pull);
  const record: CiFixRecord = {
    ...current,
    autoFixes: current.autoFixes + (startedAutoFix ? 1 : 0),
    decided: current.decided.includes(headSha) ? current.decided : [...current.decided, headSha],
  };
  await writeCiFixRecord(redis, prefix, pull, record);
  return record;
}

/** A fix was not started after all (another follow-up took the pull request first): it does not count. */
export async function uncountAutoFix(redis: Redis, prefix: string, pull: CiFixPull): Promise<void> {
  const current = await readCiFixRecord(redis, prefix, pull);
  await writeCiFixRecord(redis, prefix, pull, { ...current, autoFixes: Math.max(0, current.autoFixes - 1) });
}

/** A fix was pushed: what it addressed. Taken under the lock, so a decision never reads half of it. */
export async function recordAddressedFix(redis: Redis, prefix: string, pull: CiFixPull, fix: AddressedFix): Promise<void> {
  await withCiFixLock(redis, prefix, pull, async () => {
    const current = await readCiFixRecord(redis, prefix, pull);
    await writeCiFixRecord(redis, prefix, pull, { ...current, fixes: [...current.fixes, fix] });
  });
}

/** Every failure signature an earlier fix addressed. */
export function addressedSignatures(record: CiFixRecord): Set<string> {
  return new Set(record.fixes.flatMap((f) => f.checks.map((c) => c.signature)));
}
