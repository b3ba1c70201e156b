import { Worker, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Env } from '../config/env.ts';
import type { GitHubApp } from '../github/app-auth.ts';
import { reconcileMissedTriggers } from '../github/reconcile.ts';
import type { StatusComments } from '../github/status-comment.ts';
import type { Logger } from '../observability/logger.ts';
import { jobFinished } from '../observability/metrics.ts';
import type { RunStore } from '../observability/run-store.ts';
import { handleEvent } from '../pipeline/triggers.ts';
import type { CancelBus } from '../store/cancel-bus.ts';
import { EVENTS_QUEUE, eventJobSchema, type EventJob, type RunJob } from '../store/jobs.ts';
import { createRedis } from '../store/redis.ts';
import type { RunQueue } from '../store/run-queue.ts';

/** The job name of the reconcile sweep's ticks in the events queue. */
const RECONCILE = 'reconcile';
/** Webhook events are cheap (a few GitHub calls each): several at once per worker. */
const EVENT_CONCURRENCY = 8;

export interface EventWorkerDeps {
  env: Env;
  github: GitHubApp;
  logger: Logger;
  redis: Redis;
  redisUrl: string;
  status: StatusComments;
  cancelBus: CancelBus;
  /** Run records of jobs a cancel removes before they start. */
  runStore: RunStore;
  /** The run queue as the trigger logic sees it, and BullMQ's own queues for the reconcile sweep. */
  runQueue: RunQueue;
  runsQueue: Queue<RunJob>;
  eventsQueue: Queue<EventJob>;
}

/** The BullMQ worker of the events queue: each webhook event goes to the trigger logic; reconcile ticks to the sweep. */
export function startEventWorker(deps: EventWorkerDeps): Worker<EventJob> {
  const { env, logger, redis } = deps;
  const prefix = env.LILYPAD_QUEUE_PREFIX;
  const events = new Worker<EventJob>(
    EVENTS_QUEUE,
    async (job) => {
      if (job.name === RECONCILE) {
        const summary = await reconcileMissedTriggers({ github: deps.github, runs: deps.runsQueue, events: deps.eventsQueue, logger, redis, prefix });
        return `reconciled: ${summary.enqueued} missed trigger(s) among ${summary.checked} labelled issue(s)`;
      }
      const evt = eventJobSchema.parse(job.data);
      const started = Date.now();
      try {
        const outcome = await handleEvent(evt, { env, github: deps.github, runs: deps.runQueue, redis, status: deps.status, cancelBus: deps.cancelBus, logger, runStore: deps.runStore });
        logger.info({ delivery: evt.deliveryId, kind: evt.kind, issue: 'issueNumber' in evt ? `${evt.owner}/${evt.repo}#${evt.issueNumber}` : `${evt.owner}/${evt.repo}@${evt.headSha.slice(0, 7)}`, outcome }, 'event handled');
        jobFinished('event', 'handled', (Date.now() - started) / 1000);
        return outcome;
      } catch (err) {
        jobFinished('event', 'failed', (Date.now() - started) / 1000);
        throw err;
      }
    },
    { connection: createRedis(deps.redisUrl, { forWorker: true }), prefix, concurrency: EVENT_CONCURRENCY },
  );
  events.on('error', (err) => logger.error({ err: err.message }, 'worker error'));
  return events;
}

/**
 * The reconcile sweep's schedule (LILYPAD_RECONCILE_SECONDS; 0 removes it). One schedule is shared
 * by every worker (BullMQ runs each tick once, on one of them). It lives in Redis: after Redis lost
 * its data it is written again, every `rewriteEveryMs` and on every reconnect. Returns the function
 * that stops rewriting it.
 */
export async function scheduleReconcile(eventsQueue: Queue<EventJob>, redis: Redis, env: Pick<Env, 'LILYPAD_RECONCILE_SECONDS'>, logger: Pick<Logger, 'warn'>, rewriteEveryMs: number): Promise<() => void> {
  const schedule = async () => {
    if (env.LILYPAD_RECONCILE_SECONDS > 0) {
      await eventsQueue.upsertJobScheduler(RECONCILE, { every: env.LILYPAD_RECONCILE_SECONDS * 1000 }, { name: RECONCILE, data: {} as EventJob, opts: { removeOnComplete: 50, removeOnFail: 50 } });
    } else {
      await eventsQueue.removeJobScheduler(RECONCILE).catch(() => undefined);
    }
  };
  await schedule();
  const reschedule = () => void schedule().catch((err: Error) => logger.warn({ err: err.message }, 'could not write the reconcile schedule'));
  const timer = setInterval(reschedule, rewriteEveryMs);
  timer.unref();
  redis.on('ready', reschedule);
  return () => {
    clearInterval(timer);
    redis.off('ready', reschedule);
  };
}
