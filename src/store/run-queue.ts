import type { Job, Queue } from 'bullmq';
import type { Env } from '../config/env.ts';
import { runJobSchema, type RunJob, type RunJobInput } from './jobs.ts';

/** A job's place in the queue, as the trigger logic needs it. */
export type JobState = 'waiting' | 'delayed' | 'active' | 'completed' | 'failed' | 'unknown';

const LIVE = new Set<JobState>(['waiting', 'delayed', 'active']);
export const isLive = (s: JobState | undefined): boolean => s !== undefined && LIVE.has(s);

/**
 * The run queue as the pipeline sees it: add a job under a fixed id, look at one, remove one.
 * Only this file knows it is BullMQ.
 */
export interface RunQueue {
  state(jobId: string): Promise<JobState | undefined>;
  data(jobId: string): Promise<RunJob | undefined>;
  add(jobId: string, data: RunJobInput): Promise<void>;
  /** Removes a job that is not running; false when it could not be removed (it became active). */
  remove(jobId: string): Promise<boolean>;
  waitingCount(): Promise<number>;
}

export function bullRunQueue(queue: Queue<RunJob>, env: Pick<Env, 'LILYPAD_JOB_ATTEMPTS' | 'LILYPAD_JOB_RETRY_DELAY_MS'>): RunQueue {
  const get = (id: string): Promise<Job<RunJob> | undefined> => queue.getJob(id);
  return {
    async state(id) {
      const job = await get(id);
      if (!job) return undefined;
      const s = await job.getState();
      return s === 'prioritized' || s === 'waiting-children' ? 'waiting' : (s as JobState);
    },
    async data(id) {
      const job = await get(id);
      if (!job) return undefined;
      const parsed = runJobSchema.safeParse(job.data);
      return parsed.success ? parsed.data : undefined;
    },
    async add(id, data) {
      await queue.add('run', runJobSchema.parse(data), {
        jobId: id,
        attempts: env.LILYPAD_JOB_ATTEMPTS,
        backoff: { type: 'exponential', delay: env.LILYPAD_JOB_RETRY_DELAY_MS },
        removeOnComplete: { age: 7 * 24 * 3600 },
        removeOnFail: { age: 30 * 24 * 3600 },
      });
    },
    async remove(id) {
      const job = await get(id);
      if (!job) return true;
      return job.remove().then(
        () => true,
        () => false,
      );
    },
    waitingCount: () => queue.getWaitingCount(),
  };
}
