import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from './keys.ts';

/** An installation id as Lilypad makes them; anything else under the key was not written by it. */
const installationIdSchema = z.string().regex(/^inst-[0-9a-f]{16}$/);

/**
 * This installation's id: the one its Redis holds under the queue prefix, made there once (SET NX)
 * by the first worker. Each machine also keeps it in LILYPAD_DATA_DIR, per Redis and prefix, so
 * that after Redis lost its data the next worker restores the same id (and its sweeps still find
 * what the workers before the loss left behind) instead of making a new one.
 */
export async function installationId(redis: Redis, prefix: string, opts: { dataDir: string; redisUrl: string }): Promise<string> {
  const file = path.join(opts.dataDir, 'installations.json');
  const where = `${redisIdentity(opts.redisUrl)} ${prefix}`;
  const known = await readInstallations(file);
  const remembered = installationIdSchema.safeParse(known[where]);
  const candidate = remembered.success ? remembered.data : `inst-${randomBytes(8).toString('hex')}`;
  await keepInstallationId(redis, prefix, candidate);
  const stored = await redis.get(keys.installation(prefix));
  const id = installationIdSchema.safeParse(stored);
  if (!id.success) {
    throw new Error(`the installation id in Redis (${keys.installation(prefix)}) is ${JSON.stringify(stored)}, not one Lilypad made; delete that key and start the worker again`);
  }
  if (known[where] !== id.data) {
    await mkdir(opts.dataDir, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify({ ...(await readInstallations(file)), [where]: id.data }, null, 2)}\n`);
    await rename(tmp, file);
  }
  return id.data;
}

/** Writes the id unless Redis already holds one (after Redis lost its data, the first writer wins). */
export async function keepInstallationId(redis: Redis, prefix: string, id: string): Promise<void> {
  await redis.set(keys.installation(prefix), installationIdSchema.parse(id), 'NX');
}

/** The Redis a URL points at, without its credentials (they do not go to disk). */
function redisIdentity(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.hostname}:${u.port || '6379'}${u.pathname.replace(/^\/$/, '') || '/0'}`;
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//');
  }
}

async function readInstallations(file: string): Promise<Record<string, string>> {
  const text = await readFile(file, 'utf8').catch(() => '{}');
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return {};
    return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === 'string'));
  } catch {
    return {};
  }
}
