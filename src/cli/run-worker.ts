import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { RunJobOutcome } from '../pipeline/job-context.ts';
import { failStalledJob, FinalFailure, HandBack, LOST_LOCK, LostClaim, runQueuedJob, type QueuedRun, type RunnerDeps } from '../pipeline/job-runner.ts';
import { RUNS_QUEUE, runJobSchema, type RunJob } from '../store/jobs.ts';
import { createRedis } from '../store/redis.ts';
import { LABEL_INSTALLATION, LABEL_INSTANCE, LABEL_JOB, LABEL_PREFIX } from './worker-labels.ts';

/** Where this worker instance runs jobs: its ids, and the job ids it is running now. */
export interface RunWorkerPlace {
  redisUrl: string;
  prefix: string;
  instance: string;
  installation: string;
  /** Filled and emptied here as jobs start and end; the sweeps treat every other job's sandbox as a leftover. */
  liveRuns: Set<string>;
}

/**
 * The BullMQ worker of the runs queue: each job is handed to the pipeline's job runner, and its
 * verdicts (hand back, final failure, lost claim) become BullMQ's. Only this file knows a run job
 * is a BullMQ job.
 */
export function startRunWorker(place: RunWorkerPlace, deps: Omit<RunnerDeps, 'labels'>): Worker<RunJob, RunJobOutcome> {
  const { env } = deps;
  const runs: Worker<RunJob, RunJobOutcome> = new Worker<RunJob, RunJobOutcome>(RUNS_QUEUE, async (job, token, signal) => processRun(job, token, signal ?? new AbortController().signal), {
    connection: createRedis(place.redisUrl, { forWorker: true }),
    prefix: place.prefix,
    concurrency: env.LILYPAD_WORKER_CONCURRENCY,
    // A job's claim lapses when it cannot be renewed for this long (Redis unreachable or paused);
    // the stalled check, on any worker, then hands the job to another.
    lockDuration: env.LILYPAD_JOB_LOCK_SECONDS * 1000,
    stalledInterval: Math.min(30_000, env.LILYPAD_JOB_LOCK_SECONDS * 500),
    maxStalledCount: 2,
  });

  async function processRun(job: Job<RunJob, RunJobOutcome>, token: string | undefined, signal: AbortSignal): Promise<RunJobOutcome> {
    const run = queuedRun(job, token, signal);
    const labels = { [LABEL_JOB]: run.id, [LABEL_INSTANCE]: place.instance, [LABEL_PREFIX]: place.prefix, [LABEL_INSTALLATION]: place.installation };
    place.liveRuns.add(run.id);
    try {
      return await runQueuedJob(run, { ...deps, labels });
    } catch (err) {
      if (err instanceof HandBack) {
        await job.moveToDelayed(Date.now() + 1000, token);
        throw new DelayedError();
      }
      if (err instanceof FinalFailure) throw new UnrecoverableError(err.message);
      if (err instanceof LostClaim) throw new Error(err.message);
      throw err;
    } finally {
      place.liveRuns.delete(run.id);
    }
  }

  function queuedRun(job: Job<RunJob, RunJobOutcome>, token: string | undefined, signal: AbortSignal): QueuedRun {
    const id = job.id!;
    return {
      id,
      data: runJobSchema.parse(job.data),
      attempt: job.attemptsMade + 1,
      attempts: job.opts.attempts ?? 1,
      signal,
      holdsJob: async () => {
        const held = !token || Number(await job.extendLock(token, env.LILYPAD_JOB_LOCK_SECONDS * 1000)) === 1;
        if (!held) runs.cancelJob(id, LOST_LOCK);
        return held;
      },
      cancel: (reason: string) => void runs.cancelJob(id, reason),
    };
  }

  watchRunWorker(runs, deps);
  return runs;
}

/** What BullMQ reports about jobs outside their processor: lost locks and jobs failed as stalled. */
function watchRunWorker(runs: Worker<RunJob, RunJobOutcome>, deps: Pick<RunnerDeps, 'github' | 'status' | 'logger' | 'runStore' | 'workerId'>): void {
  const { logger } = deps;
  runs.on('error', (err) => logger.error({ err: err.message }, 'worker error'));
  // Redis was unreachable long enough for the job's lock to lapse: another worker may take the job
  // over, so stop this copy (its sandbox goes with it) instead of racing it.
  runs.on('lockRenewalFailed', (jobIds: string[]) => {
    for (const id of jobIds) if (runs.cancelJob(id, LOST_LOCK)) logger.error({ job: id }, 'lost the job lock; stopping this copy of the job');
  });
  // A job whose worker died too often is failed by BullMQ without running the processor again:
  // its status comment would say "Running" forever.
  runs.on('failed', (job, err) => {
    if (!job || !/stalled/i.test(err.message)) return;
    const parsed = runJobSchema.safeParse(job.data);
    if (!parsed.success) return;
    void failStalledJob(deps, { id: job.id ?? '', data: parsed.data, attemptsMade: job.attemptsMade }, err).catch((e: unknown) =>
      logger.error({ err: (e as Error).message }, 'status update failed'),
    );
  });
}
