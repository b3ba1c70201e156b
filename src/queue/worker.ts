import { mkdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DelayedError, Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type Docker from 'dockerode';
import type { Env } from '../config/env.ts';
import type { GitHubApp } from '../github/app-auth.ts';
import type { GitHubClient } from '../github/client.ts';
import { StatusComments } from '../github/status-comment.ts';
import { reconcileMissedTriggers } from '../github/reconcile.ts';
import type { Logger } from '../observability/logger.ts';
import { jobFinished } from '../observability/metrics.ts';
import { runStoreFromEnv } from '../observability/run-store.ts';
import { SecretScanner } from '../observability/secrets.ts';
import type { RunJobOutcome } from '../pipeline/job-context.ts';
import { FinalFailure, HandBack, LOST_LOCK, LostClaim, runQueuedJob, SHUTDOWN } from '../pipeline/job-runner.ts';
import type { SetupNetworkProvider } from '../pipeline/sandbox-session.ts';
import { handleEvent } from '../pipeline/triggers.ts';
import { SandboxSlots } from '../pipeline/sandbox-slots.ts';
import { LABEL_WORKER, removeLabelled } from '../sandbox/sandbox.ts';
import { CancelBus, type CancelRequest } from './cancel-bus.ts';
import { installationId, LABEL_INSTALLATION, LABEL_INSTANCE, LABEL_JOB, LABEL_PREFIX, markInstanceDir, startHeartbeat, sweepDeadInstances, sweepOwnLeftovers } from './heartbeat.ts';
import { EgressProxy, parseEgressPolicy, parsePrivateAllow } from '../sandbox/egress.ts';
import { checkSandboxRuntime } from '../sandbox/runtime.ts';
import { EVENTS_QUEUE, RUNS_QUEUE, eventJobSchema, reportedNumber, runJobSchema, type EventJob, type RunJob } from './jobs.ts';
import { createRedis } from './redis.ts';
import { bullRunQueue } from './run-queue.ts';

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

const RECONCILE = 'reconcile';
export { LABEL_JOB };
export { LABEL_INSTANCE, LABEL_INSTALLATION };

/**
 * A worker process: handles webhook events (cheap, several at once) and runs issue jobs (one
 * sandbox each, LILYPAD_WORKER_CONCURRENCY at once). Any number of these may share one Redis.
 */
export async function startWorker(opts: WorkerOptions): Promise<WorkerRuntime> {
  const { env, logger } = opts;
  // A runtime the engine does not have stops the worker before any container or job.
  await checkSandboxRuntime(opts.docker, env);
  const workerId = opts.workerId ?? env.LILYPAD_WORKER_ID ?? os.hostname();
  const instance = `${workerId}-${process.pid}-${Date.now().toString(36)}`;
  const prefix = env.LILYPAD_QUEUE_PREFIX;
  const redis = createRedis(opts.redisUrl);
  const status = new StatusComments(redis, prefix, new SecretScanner([env.OPENAI_API_KEY, env.WEBHOOK_SECRET, opts.github.opts.privateKey]), () => opts.github.botLogin());
  const cancelBus = new CancelBus(redis, prefix, logger);
  const runsQueue = new Queue<RunJob>(RUNS_QUEUE, { connection: createRedis(opts.redisUrl, { forWorker: true }), prefix });
  const runQueue = bullRunQueue(runsQueue, env);
  const runStore = runStoreFromEnv(redis, env);
  const eventsQueue = new Queue<EventJob>(EVENTS_QUEUE, { connection: createRedis(opts.redisUrl, { forWorker: true }), prefix });

  // Every container and network this worker makes carries the installation's id; sweeps touch nothing else.
  const installation = await installationId(redis, prefix, { dataDir: env.LILYPAD_DATA_DIR, redisUrl: opts.redisUrl });
  // Containers of this machine whose job is no longer running (a crash, a kill -9) go first.
  const swept = await sweepOrphans(opts.docker, runsQueue, workerId, installation).catch(() => 0);
  if (swept > 0) logger.warn({ workerId, swept }, 'removed sandboxes left behind by an earlier worker');

  // Every instance keeps a heartbeat; every minute each worker removes what dead instances left on
  // its machine (sandboxes, proxies, setup networks, temp dirs), whatever their host name was.
  const heartbeat = startHeartbeat(redis, prefix, instance, logger, installation);
  const tmpRoot = path.join(env.LILYPAD_DATA_DIR, 'tmp');
  await mkdir(path.join(tmpRoot, instance), { recursive: true });
  await markInstanceDir(path.join(tmpRoot, instance), installation);
  // Workspaces are made with mkdtemp(os.tmpdir()): keep them where the sweep can find them.
  process.env['TMPDIR'] = path.join(tmpRoot, instance);
  /** The jobs this instance is running now: sandboxes and networks of its other jobs are leftovers. */
  const liveRuns = new Set<string>();
  let sweeping = false;
  const sweep = async () => {
    if (sweeping) return;
    sweeping = true;
    const done = await sweepDeadInstances(opts.docker, redis, { prefix, installation }, tmpRoot, instance)
      .catch((err: Error) => {
        logger.warn({ err: err.message }, 'sweep failed');
        return null;
      })
      .finally(() => (sweeping = false));
    if (done && done.instances.length > 0) logger.warn(done, 'removed what stopped worker instances left behind');
    const own = await sweepOwnLeftovers(opts.docker, instance, liveRuns, installation).catch((err: Error) => {
      logger.warn({ err: err.message }, 'sweep of own leftovers failed');
      return null;
    });
    if (own && own.containers + own.networks > 0) logger.warn(own, 'removed sandboxes and networks of runs that had ended without removing them');
  };
  void sweep();
  const sweeper = setInterval(() => void sweep(), SWEEP_EVERY_MS);
  sweeper.unref();

  // Setup commands reach the network only through this worker's egress proxy (or not at all).
  const setupNetwork = opts.setupNetwork !== undefined ? opts.setupNetwork : await startEgress(env, opts.docker, { [LABEL_WORKER]: workerId, [LABEL_INSTANCE]: instance, [LABEL_PREFIX]: prefix, [LABEL_INSTALLATION]: installation }, logger);

  const events = new Worker<EventJob>(
    EVENTS_QUEUE,
    async (job) => {
      if (job.name === RECONCILE) {
        const summary = await reconcileMissedTriggers({ github: opts.github, runs: runsQueue, events: eventsQueue, logger, redis, prefix });
        return `reconciled: ${summary.enqueued} missed trigger(s) among ${summary.checked} labelled issue(s)`;
      }
      const evt = eventJobSchema.parse(job.data);
      const started = Date.now();
      try {
        const outcome = await handleEvent(evt, { env, github: opts.github, runs: runQueue, redis, status, cancelBus, logger });
        logger.info({ delivery: evt.deliveryId, kind: evt.kind, issue: `${evt.owner}/${evt.repo}#${evt.issueNumber}`, outcome }, 'event handled');
        jobFinished('event', 'handled', (Date.now() - started) / 1000);
        return outcome;
      } catch (err) {
        jobFinished('event', 'failed', (Date.now() - started) / 1000);
        throw err;
      }
    },
    { connection: createRedis(opts.redisUrl, { forWorker: true }), prefix, concurrency: 8 },
  );

  const runs = new Worker<RunJob, RunJobOutcome>(
    RUNS_QUEUE,
    async (job, token, signal) => processRun(job, token, signal ?? new AbortController().signal),
    {
      connection: createRedis(opts.redisUrl, { forWorker: true }),
      prefix,
      concurrency: env.LILYPAD_WORKER_CONCURRENCY,
      // A job's claim lapses when it cannot be renewed for this long (Redis unreachable or paused);
      // the stalled check, on any worker, then hands the job to another.
      lockDuration: env.LILYPAD_JOB_LOCK_SECONDS * 1000,
      stalledInterval: Math.min(30_000, env.LILYPAD_JOB_LOCK_SECONDS * 500),
      maxStalledCount: 2,
    },
  );

  const revocations = new Set<Promise<void>>();
  const sandboxSlots = new SandboxSlots(env.LILYPAD_WORKER_CONCURRENCY);


  /** A BullMQ job, handed to the pipeline's job runner; its verdicts become BullMQ's. */
  async function processRun(job: Job<RunJob, RunJobOutcome>, token: string | undefined, signal: AbortSignal): Promise<RunJobOutcome> {
    const data = runJobSchema.parse(job.data);
    const labels = { [LABEL_JOB]: job.id!, [LABEL_INSTANCE]: instance, [LABEL_PREFIX]: prefix, [LABEL_INSTALLATION]: installation };
    const run = {
      id: job.id!,
      data,
      attempt: job.attemptsMade + 1,
      attempts: job.opts.attempts ?? 1,
      signal,
      holdsJob: async () => {
        const held = !token || Number(await job.extendLock(token, env.LILYPAD_JOB_LOCK_SECONDS * 1000)) === 1;
        if (!held) runs.cancelJob(job.id!, LOST_LOCK);
        return held;
      },
      cancel: (reason: string) => void runs.cancelJob(job.id!, reason),
    };
    liveRuns.add(job.id!);
    try {
      return await runQueuedJob(run, {
        env,
        github: opts.github,
        docker: opts.docker,
        redis,
        logger,
        workerId,
        setupNetwork,
        sandboxSlots,
        labels,
        status,
        cancelBus,
        runStore,
        runs: runQueue,
        background: (work) => {
          const p = work.then(() => undefined, () => undefined);
          revocations.add(p);
          void p.finally(() => revocations.delete(p));
        },
      });
    } catch (err) {
      if (err instanceof HandBack) {
        await job.moveToDelayed(Date.now() + 1000, token);
        throw new DelayedError();
      }
      if (err instanceof FinalFailure) throw new UnrecoverableError(err.message);
      if (err instanceof LostClaim) throw new Error(err.message);
      throw err;
    } finally {
      liveRuns.delete(job.id!);
    }
  }

  // One schedule shared by every worker (BullMQ runs each tick once, on one of them). It lives in
  // Redis: after Redis lost its data it is written again, at the next sweep or reconnect.
  const schedule = async () => {
    if (env.LILYPAD_RECONCILE_SECONDS > 0) {
      await eventsQueue.upsertJobScheduler(RECONCILE, { every: env.LILYPAD_RECONCILE_SECONDS * 1000 }, { name: RECONCILE, data: {} as EventJob, opts: { removeOnComplete: 50, removeOnFail: 50 } });
    } else {
      await eventsQueue.removeJobScheduler(RECONCILE).catch(() => undefined);
    }
  };
  await schedule();
  const reschedule = () => void schedule().catch((err: Error) => logger.warn({ err: err.message }, 'could not write the reconcile schedule'));
  const rescheduler = setInterval(reschedule, SWEEP_EVERY_MS);
  rescheduler.unref();
  redis.on('ready', reschedule);

  await cancelBus.subscribe((req: CancelRequest) => {
    if (runs.cancelJob(req.jobId, `cancel:${JSON.stringify(req)}`)) logger.info({ job: req.jobId, by: req.by }, 'cancelling running job');
  });
  for (const w of [events, runs]) w.on('error', (err) => logger.error({ err: err.message }, 'worker error'));
  // A job whose worker died too often is failed by BullMQ without running the processor again:
  // its status comment would say "Running" forever.
  // Redis was unreachable long enough for the job's lock to lapse: another worker may take the job
  // over, so stop this copy (its sandbox goes with it) instead of racing it.
  runs.on('lockRenewalFailed', (jobIds: string[]) => {
    for (const id of jobIds) if (runs.cancelJob(id, LOST_LOCK)) logger.error({ job: id }, 'lost the job lock; stopping this copy of the job');
  });
  runs.on('failed', (job, err) => {
    if (!job || !/stalled/i.test(err.message)) return;
    const parsed = runJobSchema.safeParse(job.data);
    if (!parsed.success) return;
    const data = parsed.data;
    const issueNumber = reportedNumber(data);
    void opts.github
      .installation(data.installationId)
      .then((client) =>
        status.set(client, { owner: data.owner, repo: data.repo, issueNumber }, { state: 'failed', what: 'the workers running this job stopped unexpectedly several times.', todo: 'ask the Lilypad administrator to check the workers (memory, restarts), then run Lilypad again.' }, data.triggeredBy, data.kind === 'followup' ? data.statusSlot : undefined),
      )
      .catch((e: unknown) => logger.error({ err: (e as Error).message }, 'status update failed'));
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
        await Promise.all(revocations);
        await cancelBus.close();
        await runsQueue.close();
        await eventsQueue.close();
        clearInterval(sweeper);
        clearInterval(rescheduler);
        redis.off('ready', reschedule);
        await removeLabelled(opts.docker, LABEL_INSTANCE, instance).catch(() => 0);
        if (setupNetwork instanceof EgressProxy) await setupNetwork.stop();
        await rm(path.join(tmpRoot, instance), { recursive: true, force: true });
        await heartbeat.stop();
        redis.disconnect();
        logger.info({ workerId }, 'worker stopped');
      })();
      return closing;
    },
  };
}

const SWEEP_EVERY_MS = 60_000;

/** The egress proxy for setup commands, unless LILYPAD_SETUP_EGRESS=none. */
async function startEgress(env: Env, docker: Docker, labels: Record<string, string>, logger: Logger): Promise<SetupNetworkProvider | null> {
  const policy = parseEgressPolicy(env.LILYPAD_SETUP_EGRESS, { githubHost: env.GHE_HOST ?? 'github.com' });
  if (policy.mode === 'none') return null;
  const proxy = await EgressProxy.start(docker, {
    image: env.LILYPAD_EGRESS_IMAGE,
    policy,
    privateAllow: parsePrivateAllow(env.LILYPAD_SETUP_EGRESS_PRIVATE),
    labels,
    sandboxImage: env.LILYPAD_SANDBOX_IMAGE,
  });
  logger.info({ allowed: proxy.allowed, notes: proxy.notes }, 'egress proxy for setup commands started');
  return proxy;
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
