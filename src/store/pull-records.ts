import type { Redis } from 'ioredis';
import { z } from 'zod';
import { pinnedTextSchema } from './jobs.ts';
import { keys } from './keys.ts';
import { parseStored } from './stored-json.ts';

/**
 * What Lilypad keeps about each pull request it opened: the issue and its pinned text (what a
 * follow-up run starts from), the branch, the last commit Lilypad pushed, and every revision.
 */
export const revisionSchema = z.object({
  /** What started it, e.g. "label by @alice", "changes requested by @bob", "/lilypad by @carol". */
  trigger: z.string(),
  sha: z.string(),
  testsBefore: z.string(),
  testsAfter: z.string(),
  steps: z.number(),
  tokens: z.number(),
  seconds: z.number(),
});
/** One revision of a Lilypad pull request: the first run, then each follow-up. */
export type Revision = z.infer<typeof revisionSchema>;

const prRecordSchema = z.object({
  issueNumber: z.number().int().positive(),
  branch: z.string(),
  pinned: pinnedTextSchema,
  lastSha: z.string(),
  revisions: z.array(revisionSchema),
});
export type PrRecord = z.infer<typeof prRecordSchema>;

const TTL_S = 365 * 24 * 3600;
/** Older revisions drop off the record past this many. */
const MAX_REVISIONS = 50;

/** The record, or null when the pull request is not Lilypad's (or its record cannot be read). */
export async function readPrRecord(redis: Redis, prefix: string, repoId: number, pullNumber: number): Promise<PrRecord | null> {
  return parseStored(prRecordSchema, await redis.get(keys.pullRecord(prefix, repoId, pullNumber)));
}

async function writePrRecord(redis: Redis, prefix: string, repoId: number, pullNumber: number, record: PrRecord): Promise<void> {
  await redis.set(keys.pullRecord(prefix, repoId, pullNumber), JSON.stringify(prRecordSchema.parse(record)), 'EX', TTL_S);
}

/**
 * Adds a revision (the issue run's, or a follow-up's) and moves `lastSha` to it. The pinned text
 * of an existing record is kept: follow-ups work from what the maintainer first approved.
 */
export async function addRevision(redis: Redis, prefix: string, repoId: number, pullNumber: number, base: Omit<PrRecord, 'revisions' | 'lastSha'>, revision: Revision): Promise<PrRecord> {
  const current = await readPrRecord(redis, prefix, repoId, pullNumber);
  const record: PrRecord = { ...base, ...(current ? { pinned: current.pinned } : {}), lastSha: revision.sha, revisions: [...(current?.revisions ?? []), revision].slice(-MAX_REVISIONS) };
  await writePrRecord(redis, prefix, repoId, pullNumber, record);
  return record;
}
