import { readdir, rm } from 'node:fs/promises';
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
/** The queue prefix an instance served: sweeps never touch another installation's containers. */
export const LABEL_PREFIX = 'dev.lilypad.prefix';

const key = (prefix: string, instance: string) => `${prefix}:heartbeat:${instance}`;

/** Keeps this instance's heartbeat in Redis until stopped. */
export function startHeartbeat(redis: Redis, prefix: string, instance: string, logger: Logger): { stop(): Promise<void> } {
  const beat = () => redis.set(key(prefix, instance), String(Date.now()), 'PX', TTL_MS).catch((err: Error) => logger.warn({ err: err.message }, 'heartbeat failed'));
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

/**
 * Removes what dead instances left on this machine, whatever host name they ran under: their
 * sandboxes and proxies (by label, from this Docker engine) and their temporary directories (under
 * LILYPAD_DATA_DIR/tmp). Run on every worker, every minute; an instance is dead when its
 * heartbeat has expired.
 */
export async function sweepDeadInstances(docker: Docker, redis: Redis, prefix: string, tmpRoot: string, self: string, confirmMs = EVERY_MS + 5_000): Promise<SweepSummary> {
  const summary: SweepSummary = { instances: [], containers: 0, networks: 0, tmpDirs: 0 };
  const labelled = await docker.listContainers({ all: true, filters: { label: [LABEL_INSTANCE, `${LABEL_PREFIX}=${prefix}`] } });
  const fromDocker = labelled.map((c) => c.Labels[LABEL_INSTANCE]).filter((i): i is string => !!i);
  const fromDisk = await readdir(tmpRoot).catch(() => [] as string[]);
  for (const instance of new Set([...fromDocker, ...fromDisk])) {
    if (instance === self || (await isAlive(redis, prefix, instance))) continue;
    // A heartbeat can be missing for a moment (Redis lost its data, a slow refresh): an instance is
    // dead only if it is still silent after a full refresh interval.
    await new Promise((r) => setTimeout(r, confirmMs));
    if (await isAlive(redis, prefix, instance)) continue;
    summary.instances.push(instance);
    summary.containers += await removeContainers(docker, labelled.filter((c) => c.Labels[LABEL_INSTANCE] === instance));
    // Setup networks go after the sandboxes attached to them.
    const gone = await removeEgressLeftovers(docker, LABEL_INSTANCE, instance);
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
export async function sweepOwnLeftovers(docker: Docker, self: string, liveJobs: ReadonlySet<string>): Promise<{ containers: number; networks: number }> {
  const mine = `${LABEL_INSTANCE}=${self}`;
  const stale = (labels: Record<string, string> | undefined) => {
    const job = labels?.[LABEL_JOB];
    return labels?.[LABEL_RUN] !== undefined && job !== undefined && !liveJobs.has(job);
  };
  const containers = await removeContainers(docker, (await docker.listContainers({ all: true, filters: { label: [mine, LABEL_RUN] } })).filter((c) => stale(c.Labels)));
  let networks = 0;
  for (const n of await docker.listNetworks({ filters: { label: [mine, LABEL_RUN, LABEL_ROLE] } })) {
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
