import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';
import { parseStored } from './stored-json.ts';

/**
 * A signed-in viewer's session on the run pages (web/auth.ts): who, their GitHub token sealed with
 * a key derived from the app's client secret (never in the clear), the form token, and when it ends.
 */
const webSessionSchema = z.object({ login: z.string(), token: z.string(), csrf: z.string(), expiresAt: z.number() });
export type WebSessionRecord = z.infer<typeof webSessionSchema>;

/** The session, or null when there is none or what is stored cannot be read (the viewer signs in again). */
export async function readWebSession(redis: Redis, prefix: string, sessionId: string): Promise<WebSessionRecord | null> {
  return parseStored(webSessionSchema, await redis.get(keys.webSession(prefix, sessionId)));
}

export async function writeWebSession(redis: Redis, prefix: string, sessionId: string, record: WebSessionRecord, ttlSeconds: number): Promise<void> {
  await redis.set(keys.webSession(prefix, sessionId), JSON.stringify(webSessionSchema.parse(record)), 'EX', ttlSeconds);
}

export async function deleteWebSession(redis: Redis, prefix: string, sessionId: string): Promise<void> {
  await redis.del(keys.webSession(prefix, sessionId));
}
