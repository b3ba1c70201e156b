import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Queue } from 'bullmq';
import type Docker from 'dockerode';
import type { Redis } from 'ioredis';
import type { Logger } from '../observability/logger.ts';
import { LABEL_ROLE, removeEgressLeftovers } from '../sandbox/egress.ts';
import { LABEL_RUN, LABEL_WORKER } from '../sandbox/sandbox.ts';
import { listSnapshots, removeSnapshots } from '../sandbox/snapshot.ts';
import { HEARTBEAT_EVERY_MS, isAlive } from '../store/heartbeats.ts';
import type { RunJob } from '../store/jobs.ts';
import { LABEL_INSTALLATION, LABEL_INSTANCE, LABEL_JOB } from './worker-labels.ts';

/**
 * What a worker removes that Lilypad left behind on its machine: sandboxes, proxies, setup networks
 * and temporary directories of instances that died (a crash, a kill -9, a lost machine) and of runs
 * whose own cleanup failed. Only this installation's: see LABEL_INSTALLATION.
 */

/** The marker in an instance's temp dir naming its installation (the sweep reads it). */
const INSTALLATION_MARKER = '.lilypad-installation';
/** Sweeps come every four heartbeats (a minute by default): a dead instance's beat has expired by the next one. */
const SWEEP_EVERY_BEATS = 4;

/** Marks an instance's temp dir as this installation's, so that only its sweeps remove it. */
export async function markInstanceDir(dir: string, installation: string): Promise<void> {
  await writeFile(path.join(dir, INSTALLATION_MARKER), `${installation}\n`);
}

async function instanceDirInstallation(dir: string): Promise<string | undefined> {
  const text = await readFile(path.join(dir, INSTALLATION_MARKER), 'utf8').catch(() => undefined);
  return text?.trim();
}

export interface SweepSummary {
  instances: string[];
  containers: number;
  /** Snapshot images of runs (the state right after setup the judging sandboxes start from). */
  images: number;
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
export async function sweepDeadInstances(docker: Docker, redis: Redis, scope: SweepScope, tmpRoot: string, self: string, confirmMs = HEARTBEAT_EVERY_MS + 5_000): Promise<SweepSummary> {
  const { prefix, installation } = scope;
  const summary: SweepSummary = { instances: [], containers: 0, images: 0, networks: 0, tmpDirs: 0 };
  const labelled = await docker.listContainers({ all: true, filters: { label: [LABEL_INSTANCE, `${LABEL_INSTALLATION}=${installation}`] } });
  const snapshots = await listSnapshots(docker, [LABEL_INSTANCE, `${LABEL_INSTALLATION}=${installation}`]);
  const fromDocker = [...labelled.map((c) => c.Labels[LABEL_INSTANCE]), ...snapshots.map((i) => i.Labels?.[LABEL_INSTANCE])].filter((i): i is string => !!i);
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
    // Snapshots after their sandboxes, which start from them.
    summary.images += await removeSnapshots(docker, [`${LABEL_INSTANCE}=${instance}`, `${LABEL_INSTALLATION}=${installation}`]);
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
 * Removes this live instance's own leftovers: sandboxes, snapshots and setup networks of jobs it is
 * no longer running. A run's own cleanup can fail (the Docker engine restarted under it and was not
 * back in time); the next sweep finishes the job.
 */
export async function sweepOwnLeftovers(docker: Docker, self: string, liveJobs: ReadonlySet<string>, installation: string): Promise<{ containers: number; images: number; networks: number }> {
  const mine = [`${LABEL_INSTANCE}=${self}`, `${LABEL_INSTALLATION}=${installation}`];
  const stale = (labels: Record<string, string> | undefined) => {
    const job = labels?.[LABEL_JOB];
    return labels?.[LABEL_RUN] !== undefined && job !== undefined && !liveJobs.has(job);
  };
  const containers = await removeContainers(docker, (await docker.listContainers({ all: true, filters: { label: [...mine, LABEL_RUN] } })).filter((c) => stale(c.Labels)));
  const images = await removeSnapshots(docker, [...mine, LABEL_RUN], (labels) => !stale(labels));
  let networks = 0;
  for (const n of await docker.listNetworks({ filters: { label: [...mine, LABEL_RUN, LABEL_ROLE] } })) {
    if (!stale(n.Labels)) continue;
    await docker
      .getNetwork(n.Id)
      .remove()
      .then(() => networks++)
      .catch(() => undefined);
  }
  return { containers, images, networks };
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

/**
 * Removes this machine's sandboxes whose job is not active any more. Only this installation's:
 * another one's jobs are not in this Redis, so its live sandboxes would look like orphans.
 */
export async function sweepOrphans(docker: Docker, runs: Queue<RunJob>, workerId: string, installation: string): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL_WORKER}=${workerId}`, `${LABEL_INSTALLATION}=${installation}`, LABEL_JOB] } });
  let removed = 0;
  for (const c of list) {
    const jobId = c.Labels[LABEL_JOB];
    const job = jobId ? await runs.getJob(jobId) : undefined;
    if (job && (await job.getState()) === 'active') continue;
    await docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined);
    removed++;
  }
  return removed;
}

export interface SweepsOptions {
  docker: Docker;
  redis: Redis;
  scope: SweepScope;
  tmpRoot: string;
  /** This worker instance. */
  instance: string;
  /** The jobs this instance is running now: sandboxes and networks of its other jobs are leftovers. */
  liveRuns: ReadonlySet<string>;
  logger: Pick<Logger, 'warn'>;
  /** How often instances beat (LILYPAD_HEARTBEAT_SECONDS): the sweep's schedule and its wait before calling one dead follow it. */
  heartbeatMs?: number;
}

/**
 * Every four heartbeats, a minute by default (and once now): what dead instances of this installation left on this machine, then
 * this instance's own leftovers. A sweep still running when the next is due is not doubled.
 * Returns the function that stops the schedule.
 */
export function startSweeps(opts: SweepsOptions): () => void {
  const { docker, redis, scope, tmpRoot, instance, liveRuns, logger, heartbeatMs = HEARTBEAT_EVERY_MS } = opts;
  // A silent instance is dead only after a full beat and a third more (20 s by default).
  const confirmMs = Math.round((heartbeatMs * 4) / 3);
  let sweeping = false;
  const sweep = async () => {
    if (sweeping) return;
    sweeping = true;
    const done = await sweepDeadInstances(docker, redis, scope, tmpRoot, instance, confirmMs)
      .catch((err: Error) => {
        logger.warn({ err: err.message }, 'sweep failed');
        return null;
      })
      .finally(() => (sweeping = false));
    if (done && done.instances.length > 0) logger.warn(done, 'removed what stopped worker instances left behind');
    const own = await sweepOwnLeftovers(docker, instance, liveRuns, scope.installation).catch((err: Error) => {
      logger.warn({ err: err.message }, 'sweep of own leftovers failed');
      return null;
    });
    if (own && own.containers + own.images + own.networks > 0) logger.warn(own, 'removed sandboxes, snapshots and networks of runs that had ended without removing them');
  };
  void sweep();
  const timer = setInterval(() => void sweep(), heartbeatMs * SWEEP_EVERY_BEATS);
  timer.unref();
  return () => clearInterval(timer);
}
