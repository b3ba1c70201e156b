import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';
import { revisionSchema } from './pull-records.ts';
import { parseStored } from './stored-json.ts';

/**
 * A change a run made and did not publish because the repository publishes only verified changes
 * (`publish: verified`) and its evidence was not: the commit's files as a patch on its base, the
 * pull request's title and body as they would have been. `/lilypad publish` by a writer opens it.
 * One per issue (a later run replaces it); kept 30 days.
 */
const withheldSchema = z.object({
  runId: z.string(),
  issueNumber: z.number().int().positive(),
  baseCommit: z.string(),
  /** The filtered change as a binary diff, base64. */
  patch: z.string(),
  title: z.string(),
  body: z.string(),
  verdict: z.string(),
  exitReason: z.string(),
  incomplete: z.boolean(),
  /** The pull request's first revision as the run made it (its commit is made again when published). */
  revision: revisionSchema,
  at: z.string(),
});
export type WithheldChange = z.infer<typeof withheldSchema>;

const TTL_S = 30 * 24 * 3600;
/** A patch over this is not kept for `/lilypad publish` (it stays in the run's folder on the worker). */
export const MAX_WITHHELD_BYTES = 4 * 1024 * 1024;

export async function keepWithheld(redis: Redis, prefix: string, repoId: number, change: WithheldChange): Promise<void> {
  await redis.set(keys.withheld(prefix, repoId, change.issueNumber), JSON.stringify(withheldSchema.parse(change)), 'EX', TTL_S);
}

export async function readWithheld(redis: Redis, prefix: string, repoId: number, issueNumber: number): Promise<WithheldChange | null> {
  return parseStored(withheldSchema, await redis.get(keys.withheld(prefix, repoId, issueNumber)));
}

export async function forgetWithheld(redis: Redis, prefix: string, repoId: number, issueNumber: number): Promise<void> {
  await redis.del(keys.withheld(prefix, repoId, issueNumber));
}
