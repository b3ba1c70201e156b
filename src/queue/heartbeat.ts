import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import type { Redis } from 'ioredis';
import type { Logger } from '../observability/logger.ts';
import { LABEL_ROLE, removeEgressLeftovers } from '../sandbox/egress.ts';
import { LABEL_RUN } from '../sandbox/sandbox.ts';

/** A worker instance is alive while this key exists; it is refreshed far more often than it expires. */
const TTL_MS = 45_000;
const EVERY_MS = 15_000;
export const LABEL_INSTANCE = 'dev.lilypad.instance';
/** The queue job a sandbox or setup network belongs to. */
export const LABEL_JOB = 'dev.lilypad.job';
/** The queue prefix an instance served (informational: two installations may share a prefix). */
export const LABEL_PREFIX = 'dev.lilypad.prefix';
/**
 * The installation a container or network belongs to. Worker ids default to the host name and
 * prefixes to `lilypad`, so two installations (staging and production, two test runs) with their
 * own Redis on one Docker engine share both: every sweep only touches what carries its own id.
 */
export const LABEL_INSTALLATION = 'dev.lilypad.installation';
/** The marker in an instance's temp dir naming its installation (the sweep reads it). */
const INSTALLATION_MARKER = '.lilypad-installation';
const INSTALLATION_RE = /^inst-[0-9a-f]{16}$/;

const key = (prefix: string, instance: string) => `${prefix}:heartbeat:${instance}`;
/** This installation's id, made once by its first worker. */
const installationKey = (prefix: string) => `${prefix}:installation`;

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
  const remembered = known[where];
  const candidate = remembered !== undefined && INSTALLATION_RE.test(remembered) ? remembered : `inst-${randomBytes(8).toString('hex')}`;
  await redis.set(installationKey(prefix), candidate, 'NX');
  const id = await redis.get(installationKey(prefix));
  if (id === null || !INSTALLATION_RE.test(id)) {
    throw new Error(`the installation id in Redis (${installationKey(prefix)}) is ${JSON.stringify(id)}, not one Lilypad made; delete that key and start the worker again`);
  }
  if (known[where] !== id) {
    await mkdir(opts.dataDir, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify({ ...(await readInstallations(file)), [where]: id }, null, 2)}\n`);
    await rename(tmp, file);
  }
  return id;
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

/** Marks an instance's temp dir as this installation's, so that only its sweeps remove it. */
export async function markInstanceDir(dir: string, installation: string): Promise<void> {
  await writeFile(path.join(dir, INSTALLATION_MARKER), `${installation}\n`);
}

async function instanceDirInstallation(dir: string): Promise<string | undefined> {
  const text = await readFile(path.join(dir, INSTALLATION_MARKER), 'utf8').catch(() => undefined);
  return text?.trim();
}

/**
 * Keeps this instance's heartbeat in Redis until stopped. With `installation`, each beat also
 * writes the installation id back if Redis lost it, so that the workers still running keep it.
 */
export function startHeartbeat(redis: Redis, prefix: string, instance: string, logger: Logger, installation?: string): { stop(): Promise<void> } {
  const beat = async () => {
    try {
      await redis.set(key(prefix, instance), String(Date.now()), 'PX', TTL_MS);
      if (installation !== undefined) await redis.set(installationKey(prefix), installation, 'NX');
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'heartbeat failed');
    }
  };
  void beat();
  const timer = setInterval(() => void beat(), EVERY_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await redis.del(key(prefix, instance)).catch(() => undefined);
    },
  };
}

export async function isAlive(redis: Redis, prefix: string, instance: string): Promise<boolean> {
  return (await redis.exists(key(prefix, instance))) === 1;
}

export interface SweepSummary {
  instances: string[];
  containers: number;
  networks: number;
  tmpDirs: number;
}

/** Which installation a sweep works for: the queue prefix its heartbeats live under, and its id. */
export interface SweepScope {
  prefix: string;
  installation: string;
}

/**
 * Removes what dead instances of this installation left on this machine, whatever host name they
 * ran under: their sandboxes and proxies (by label, from this Docker engine) and their temporary
 * directories (under LILYPAD_DATA_DIR/tmp, marked with the installation). Run on every worker,
 * every minute; an instance is dead when its heartbeat has expired. Containers, networks and
 * directories of other installations are never touched, even when they share the engine, the
 * prefix, the worker id or the data directory: their heartbeats live in another Redis.
 */
export async function sweepDeadInstances(docker: Docker, redis: Redis, scope: SweepScope, tmpRoot: string, self: string, confirmMs = EVERY_MS + 5_000): Promise<SweepSummary> {
  const { prefix, installation } = scope;
  const summary: SweepSummary = { instances: [], containers: 0, networks: 0, tmpDirs: 0 };
  const labelled = await docker.listContainers({ all: true, filters: { label: [LABEL_INSTANCE, `${LABEL_INSTALLATION}=${installation}`] } });
  const fromDocker = labelled.map((c) => c.Labels[LABEL_INSTANCE]).filter((i): i is string => !!i);
  const fromDisk: string[] = [];
  for (const name of await readdir(tmpRoot).catch(() => [] as string[])) {
    if ((await instanceDirInstallation(path.join(tmpRoot, name))) === installation) fromDisk.push(name);
  }
  for (const instance of new Set([...fromDocker, ...fromDisk])) {
    if (instance === self || (await isAlive(redis, prefix, instance))) continue;
    // A heartbeat can be missing for a moment (Redis lost its data, a slow refresh): an instance is
    // dead only if it is still silent after a full refresh interval.
    await new Promise((r) => setTimeout(r, confirmMs));
    if (await isAlive(redis, prefix, instance)) continue;
    summary.instances.push(instance);
    summary.containers += await removeContainers(docker, labelled.filter((c) => c.Labels[LABEL_INSTANCE] === instance));
    // Setup networks go after the sandboxes attached to them.
    const gone = await removeEgressLeftovers(docker, LABEL_INSTANCE, instance, { [LABEL_INSTALLATION]: installation });
    summary.networks += gone.networks;
    if (fromDisk.includes(instance)) {
      await rm(path.join(tmpRoot, instance), { recursive: true, force: true });
      summary.tmpDirs++;
    }
  }
  return summary;
}

/**
 * Removes this live instance's own leftovers: sandboxes and setup networks of jobs it is no longer
 * running. A run's own cleanup can fail (the Docker engine restarted under it and was not back in
 * time); the next sweep finishes the job.
 */
export async function sweepOwnLeftovers(docker: Docker, self: string, liveJobs: ReadonlySet<string>, installation: string): Promise<{ containers: number; networks: number }> {
  const mine = [`${LABEL_INSTANCE}=${self}`, `${LABEL_INSTALLATION}=${installation}`];
  const stale = (labels: Record<string, string> | undefined) => {
    const job = labels?.[LABEL_JOB];
    return labels?.[LABEL_RUN] !== undefined && job !== undefined && !liveJobs.has(job);
  };
  const containers = await removeContainers(docker, (await docker.listContainers({ all: true, filters: { label: [...mine, LABEL_RUN] } })).filter((c) => stale(c.Labels)));
  let networks = 0;
  for (const n of await docker.listNetworks({ filters: { label: [...mine, LABEL_RUN, LABEL_ROLE] } })) {
    if (!stale(n.Labels)) continue;
    await docker
      .getNetwork(n.Id)
      .remove()
      .then(() => networks++)
      .catch(() => undefined);
  }
  return { containers, networks };
}

/** Removes the containers (and their anonymous volumes), one by one; returns how many went. */
async function removeContainers(docker: Docker, list: readonly Docker.ContainerInfo[]): Promise<number> {
  let removed = 0;
  for (const c of list) {
    await docker
      .getContainer(c.Id)
      .remove({ force: true, v: true })
      .then(() => removed++)
      .catch(() => undefined);
  }
  return removed;
}
