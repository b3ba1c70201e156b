import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';
import { parseStoredList } from './stored-json.ts';

/** An edit of an issue made while its job waited or ran (recorded from `issues.edited`). */
export const issueEditSchema = z.object({ login: z.string(), writer: z.boolean(), at: z.string() });
export type IssueEdit = z.infer<typeof issueEditSchema>;

const TTL_S = 30 * 24 * 3600;

export async function recordIssueEdit(redis: Redis, prefix: string, jobId: string, edit: IssueEdit): Promise<void> {
  const key = keys.edits(prefix, jobId);
  await redis.multi().rpush(key, JSON.stringify(issueEditSchema.parse(edit))).expire(key, TTL_S).exec();
}

/** The edits recorded for the job, oldest first; entries that cannot be read are left out. */
export async function readIssueEdits(redis: Redis, prefix: string, jobId: string): Promise<IssueEdit[]> {
  return parseStoredList(issueEditSchema, await redis.lrange(keys.edits(prefix, jobId), 0, -1));
}

/** A new trigger starts with no edits on record (and no finishing mark: see finishing-marks.ts). */
export async function forgetIssueEdits(redis: Redis, prefix: string, jobId: string): Promise<void> {
  await redis.del(keys.edits(prefix, jobId));
}
