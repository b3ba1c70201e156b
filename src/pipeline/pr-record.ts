import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Revision } from '../github/revisions.ts';
import { pinnedTextSchema } from '../queue/jobs.ts';
import { parseStored } from '../queue/stored-json.ts';
import { keys } from '../store/keys.ts';

/**
 * What Lilypad keeps about each pull request it opened: the issue and its pinned text (what a
 * follow-up run starts from), the branch, the last commit Lilypad pushed, and every revision.
 */
const revisionSchema = z.object({
  trigger: z.string(),
  sha: z.string(),
  testsBefore: z.string(),
  testsAfter: z.string(),
  steps: z.number(),
  tokens: z.number(),
  seconds: z.number(),
});

const prRecordSchema = z.object({
  issueNumber: z.number().int().positive(),
  branch: z.string(),
  pinned: pinnedTextSchema,
  lastSha: z.string(),
  revisions: z.array(revisionSchema),
});
export type PrRecord = z.infer<typeof prRecordSchema>;

const key = keys.pullRecord;
const TTL_S = 365 * 24 * 3600;

export async function readPrRecord(redis: Redis, prefix: string, repoId: number, pullNumber: number): Promise<PrRecord | null> {
  return parseStored(prRecordSchema, await redis.get(key(prefix, repoId, pullNumber)));
}

async function writePrRecord(redis: Redis, prefix: string, repoId: number, pullNumber: number, record: PrRecord): Promise<void> {
  await redis.set(key(prefix, repoId, pullNumber), JSON.stringify(prRecordSchema.parse(record)), 'EX', TTL_S);
}

/** Adds a revision (the issue run's, or a follow-up's) and moves `lastSha` to it. */
export async function addRevision(redis: Redis, prefix: string, repoId: number, pullNumber: number, base: Omit<PrRecord, 'revisions' | 'lastSha'>, revision: Revision): Promise<PrRecord> {
  const current = await readPrRecord(redis, prefix, repoId, pullNumber);
  const record: PrRecord = { ...base, ...(current ? { pinned: current.pinned } : {}), lastSha: revision.sha, revisions: [...(current?.revisions ?? []), revision].slice(-50) };
  await writePrRecord(redis, prefix, repoId, pullNumber, record);
  return record;
}
