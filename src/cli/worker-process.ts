import { mkdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import type Docker from 'dockerode';
import type { Redis } from 'ioredis';
import type { Env } from '../config/env.ts';
import type { GitHubApp } from '../github/app-auth.ts';
import { StatusComments } from '../github/status-comment.ts';
import type { Logger } from '../observability/logger.ts';
import { runStoreFromEnv } from '../observability/run-store.ts';
import { SecretScanner } from '../observability/secrets.ts';
import { urlSecretValues } from '../shared/url-secrets.ts';
import { SHUTDOWN } from '../pipeline/job-runner.ts';
import type { SetupNetworkProvider } from '../pipeline/sandbox-session.ts';
import { SandboxSlots } from '../pipeline/sandbox-slots.ts';
import { EgressProxy, parseEgressPolicy, parsePrivateAllow, readEgressHostsFile } from '../sandbox/egress.ts';
import { checkSandboxRuntime } from '../sandbox/runtime.ts';
import { LABEL_WORKER, removeLabelled } from '../sandbox/sandbox.ts';
import { removeSnapshots } from '../sandbox/snapshot.ts';
import { CancelBus, type CancelRequest } from '../store/cancel-bus.ts';
import { startHeartbeat } from '../store/heartbeats.ts';
import { installationId } from '../store/installation-id.ts';
import { EnvCache } from '../sandbox/env-cache/index.ts';
import { prepareExtraCa } from '../sandbox/extra-ca.ts';
import { EVENTS_QUEUE, RUNS_QUEUE, type EventJob, type RunJob } from '../store/jobs.ts';
import { createRedis } from '../store/redis.ts';
import { bullRunQueue } from '../store/run-queue.ts';
import { scheduleReconcile, startEventWorker } from './event-worker.ts';
import { startRunWorker } from './run-worker.ts';
import { LABEL_INSTALLATION, LABEL_INSTANCE, LABEL_PREFIX } from './worker-labels.ts';
import { markInstanceDir, startSweeps, sweepOrphans } from './worker-sweeps.ts';

export interface WorkerOptions {
  env: Env;
  redisUrl: string;
  github: GitHubApp;
  docker: Docker;
  logger: Logger;
  workerId?: string;
  /** Where setup commands may connect (the egress proxy); null or absent: no network for setup. */
  setupNetwork?: SetupNetworkProvider | null;
}

export interface WorkerRuntime {
  workerId: string;
  /** Stops taking jobs; running jobs are handed back to the queue and their sandboxes removed. */
  close(): Promise<void>;
}

/** How often the reconcile schedule is written again (it lives in Redis, which may lose it). */
const RESCHEDULE_EVERY_MS = 60_000;

/**
 * A worker process: handles webhook events (cheap, several at once) and runs issue jobs (one
 * sandbox each, LILYPAD_WORKER_CONCURRENCY at once). Any number of these may share one Redis.
 * This is where the worker's parts are made and wired; each part lives in its own file.
 */
export async function startWorker(opts: WorkerOptions): Promise<WorkerRuntime> {
  const { env, logger } = opts;
  // A runtime the engine does not have stops the worker before any container or job.
  await checkSandboxRuntime(opts.docker, env);
  const workerId = opts.workerId ?? env.LILYPAD_WORKER_ID ?? os.hostname();
  const instance = `${workerId}-${process.pid}-${Date.now().toString(36)}`;
  const prefix = env.LILYPAD_QUEUE_PREFIX;
  // A CA bundle that is missing or not PEM stops the worker now, naming the setting, not setup later.
  const extraCa = prepareExtraCa(env);
  // So does a bad LILYPAD_SETUP_EGRESS_HOSTS, or a name it maps to an address the proxy would refuse.
  const egressHosts = readEgressHostsFile(env.LILYPAD_SETUP_EGRESS_HOSTS, parsePrivateAllow(env.LILYPAD_SETUP_EGRESS_PRIVATE));
  const redis = createRedis(opts.redisUrl);
  // The Redis password (REDIS_URL's, or the private Redis's) is a secret like the app's keys.
  const processSecrets = urlSecretValues(opts.redisUrl);
  const status = new StatusComments(redis, prefix, new SecretScanner([env.OPENAI_API_KEY, env.WEBHOOK_SECRET, opts.github.opts.privateKey, ...processSecrets]), () => opts.github.botLogin());
  const cancelBus = new CancelBus(redis, prefix, logger);
  const runsQueue = new Queue<RunJob>(RUNS_QUEUE, { connection: createRedis(opts.redisUrl, { forWorker: true }), prefix });
  const eventsQueue = new Queue<EventJob>(EVENTS_QUEUE, { connection: createRedis(opts.redisUrl, { forWorker: true }), prefix });
  const runQueue = bullRunQueue(runsQueue, env);
  const runStore = runStoreFromEnv(redis, env);

  // Every container and network this worker makes carries the installation's id; sweeps touch nothing else.
  const installation = await installationId(redis, prefix, { dataDir: env.LILYPAD_DATA_DIR, redisUrl: opts.redisUrl });
  // Containers of this machine whose job is no longer running (a crash, a kill -9) go first.
  const swept = await sweepOrphans(opts.docker, runsQueue, workerId, installation).catch(() => 0);
  if (swept > 0) logger.warn({ workerId, swept }, 'removed sandboxes left behind by an earlier worker');

  const place = await occupyMachine(opts, redis, instance, installation);

  // Setup commands reach the network only through this worker's egress proxy (or not at all).
  const labels = { [LABEL_WORKER]: workerId, [LABEL_INSTANCE]: instance, [LABEL_PREFIX]: prefix, [LABEL_INSTALLATION]: installation };
  const setupNetwork = opts.setupNetwork !== undefined ? opts.setupNetwork : await startEgress(env, opts.docker, labels, egressHosts, logger);

  const events = startEventWorker({ env, github: opts.github, logger, redis, redisUrl: opts.redisUrl, status, cancelBus, runStore, runQueue, runsQueue, eventsQueue });
  const background = backgroundWork();
  const runs = startRunWorker(
    { redisUrl: opts.redisUrl, prefix, instance, installation, liveRuns: place.liveRuns },
    {
      env,
      github: opts.github,
      docker: opts.docker,
      redis,
      logger,
      workerId,
      setupNetwork,
      sandboxSlots: new SandboxSlots(env.LILYPAD_WORKER_CONCURRENCY),
      // Kept environments are this installation's: never looked up, kept or evicted for another.
      extraCaPem: extraCa?.pem ?? null,
      envCache: new EnvCache({ docker: opts.docker, owner: installation, dataDir: env.LILYPAD_DATA_DIR, maxBytes: env.LILYPAD_ENV_CACHE_GB * 1024 ** 3, maxAgeHours: env.LILYPAD_ENV_MAX_AGE_HOURS, logger }),
      status,
      cancelBus,
      runStore,
      runs: runQueue,
      processSecrets,
      background: background.add,
    },
  );
  const stopRescheduling = await scheduleReconcile(eventsQueue, redis, env, logger, RESCHEDULE_EVERY_MS);
  await cancelBus.subscribe((req: CancelRequest) => {
    if (runs.cancelJob(req.jobId, `cancel:${JSON.stringify(req)}`)) logger.info({ job: req.jobId, by: req.by }, 'cancelling running job');
  });
  logger.info({ workerId, concurrency: env.LILYPAD_WORKER_CONCURRENCY }, 'worker started');

  let closing: Promise<void> | undefined;
  return {
    workerId,
    close() {
      closing ??= (async () => {
        logger.info({ workerId }, 'worker stopping');
        runs.cancelAllJobs(SHUTDOWN);
        await Promise.all([runs.close(), events.close()]);
        await background.settled();
        await cancelBus.close();
        await runsQueue.close();
        await eventsQueue.close();
        place.stopSweeps();
        stopRescheduling();
        await removeLabelled(opts.docker, LABEL_INSTANCE, instance).catch(() => 0);
        await removeSnapshots(opts.docker, [`${LABEL_INSTANCE}=${instance}`]).catch(() => 0);
        if (setupNetwork instanceof EgressProxy) await setupNetwork.stop();
        await place.leave();
        redis.disconnect();
        logger.info({ workerId }, 'worker stopped');
      })();
      return closing;
    },
  };
}

/** Work that outlives its job (token revocation): a stopping worker waits for it, whatever its outcome. */
function backgroundWork(): { add(work: Promise<unknown>): void; settled(): Promise<void> } {
  const pending = new Set<Promise<void>>();
  return {
    add(work) {
      const p = work.then(() => undefined, () => undefined);
      pending.add(p);
      void p.finally(() => pending.delete(p));
    },
    settled: async () => void (await Promise.all(pending)),
  };
}

/** This instance on its machine: its heartbeat, its temp dir, and the sweeps that run beside it. */
interface MachinePlace {
  /** The jobs this instance is running now: sandboxes and networks of its other jobs are leftovers. */
  liveRuns: Set<string>;
  stopSweeps(): void;
  /** Removes the temp dir and the heartbeat. */
  leave(): Promise<void>;
}

/**
 * Every instance keeps a heartbeat; every minute (four heartbeats) each worker removes what dead instances left on
 * its machine (sandboxes, proxies, setup networks, temp dirs), whatever their host name was.
 */
async function occupyMachine(opts: WorkerOptions, redis: Redis, instance: string, installation: string): Promise<MachinePlace> {
  const prefix = opts.env.LILYPAD_QUEUE_PREFIX;
  const heartbeatMs = opts.env.LILYPAD_HEARTBEAT_SECONDS * 1000;
  const heartbeat = startHeartbeat(redis, prefix, instance, opts.logger, installation, heartbeatMs);
  const tmpRoot = path.join(opts.env.LILYPAD_DATA_DIR, 'tmp');
  const tmpDir = path.join(tmpRoot, instance);
  await mkdir(tmpDir, { recursive: true });
  await markInstanceDir(tmpDir, installation);
  // Workspaces are made with mkdtemp(os.tmpdir()): keep them where the sweep can find them.
  process.env['TMPDIR'] = tmpDir;
  const liveRuns = new Set<string>();
  const stopSweeps = startSweeps({ docker: opts.docker, redis, scope: { prefix, installation }, tmpRoot, instance, liveRuns, logger: opts.logger, heartbeatMs });
  return {
    liveRuns,
    stopSweeps,
    async leave() {
      await rm(tmpDir, { recursive: true, force: true });
      await heartbeat.stop();
    },
  };
}

/** The egress proxy for setup commands, unless LILYPAD_SETUP_EGRESS=none. */
async function startEgress(env: Env, docker: Docker, labels: Record<string, string>, hostsFile: string | undefined, logger: Logger): Promise<SetupNetworkProvider | null> {
  const policy = parseEgressPolicy(env.LILYPAD_SETUP_EGRESS, { githubHost: env.GHE_HOST ?? 'github.com' });
  if (policy.mode === 'none') return null;
  const proxy = await EgressProxy.start(docker, {
    image: env.LILYPAD_EGRESS_IMAGE,
    policy,
    privateAllow: parsePrivateAllow(env.LILYPAD_SETUP_EGRESS_PRIVATE),
    labels,
    sandboxImage: env.LILYPAD_SANDBOX_IMAGE,
    hostsFile,
  });
  logger.info({ allowed: proxy.allowed, notes: proxy.notes, pinnedNames: hostsFile ? hostsFile.trim().split('\n').length : 0 }, 'egress proxy for setup commands started');
  return proxy;
}
