import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';
import { parseStored } from './stored-json.ts';

/**
 * A stop for an outsider's last edit of an issue, remembered so that a writer's next trigger on the
 * same text and the same last edit counts as "read and confirmed" (pipeline/phases/validate.ts).
 * `mark` is the edit's time and the text's digest; `deliveryId` the trigger that was stopped.
 */
const textConfirmationSchema = z.object({ mark: z.string(), deliveryId: z.string() });
export type TextConfirmation = z.infer<typeof textConfirmationSchema>;

const TTL_S = 30 * 24 * 3600;

/** The stored stop, or null when there is none or it cannot be read. */
export async function readTextConfirmation(redis: Redis, prefix: string, repoId: number, issueNumber: number): Promise<TextConfirmation | null> {
  return parseStored(textConfirmationSchema, await redis.get(keys.textConfirm(prefix, repoId, issueNumber)));
}

export async function writeTextConfirmation(redis: Redis, prefix: string, repoId: number, issueNumber: number, value: TextConfirmation): Promise<void> {
  await redis.set(keys.textConfirm(prefix, repoId, issueNumber), JSON.stringify(textConfirmationSchema.parse(value)), 'EX', TTL_S);
}
