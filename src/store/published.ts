import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';
import { parseStored } from './stored-json.ts';

/**
 * What one trigger (one delivery) published. A copy of the job that runs again after the trigger
 * was published (a worker that lost its lock while publishing, a stalled job handed over) reads it
 * and reports the pull request instead of publishing a second time.
 */
const publishedSchema = z.object({
  deliveryId: z.string(),
  number: z.number().int(),
  url: z.string(),
  branch: z.string(),
  /** The commit published (older records may lack it). */
  sha: z.string().optional(),
  updated: z.boolean(),
  incomplete: z.boolean(),
  exitReason: z.string(),
  draft: z.boolean(),
  note: z.string().optional(),
});
export type Published = z.infer<typeof publishedSchema>;

const TTL_S = 7 * 24 * 3600;

/** What this trigger already published, if anything (the record of an older trigger does not count). */
export async function readPublished(redis: Redis, prefix: string, jobId: string, deliveryId: string): Promise<Published | null> {
  const published = parseStored(publishedSchema, await redis.get(keys.published(prefix, jobId)));
  return published?.deliveryId === deliveryId ? published : null;
}

export async function recordPublished(redis: Redis, prefix: string, jobId: string, published: Published): Promise<void> {
  await redis.set(keys.published(prefix, jobId), JSON.stringify(publishedSchema.parse(published)), 'EX', TTL_S);
}
