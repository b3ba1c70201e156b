import type Docker from 'dockerode';
import type { Redis } from 'ioredis';
import type { Env } from '../config/env.ts';
import type { GitHubApp } from '../github/app-auth.ts';
import type { IssueRef } from '../github/client.ts';
import type { RepoTokens } from '../github/repo-tokens.ts';
import type { Logger } from '../observability/logger.ts';
import { phaseTimed } from '../observability/metrics.ts';
import type { RunRecorder } from '../observability/run-store.ts';
import { SecretScanner } from '../observability/secrets.ts';
import type { RunJob } from '../store/jobs.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import type { RunStatus } from './run-status.ts';
import { StaleTriggerError } from './validate-trigger.ts';
import type { SetupNetworkProvider } from './sandbox-session.ts';
import type { SandboxSlots } from './sandbox-slots.ts';

/** What every job needs from the process that runs it. */
export interface JobDeps {
  env: Env;
  github: GitHubApp;
  docker: Docker;
  redis: Redis;
  logger: Logger;
  workerId: string;
  /** Where setup commands may connect (the egress proxy); null: no network for setup. */
  setupNetwork: SetupNetworkProvider | null;
  /**
   * The worker's sandbox slots (LILYPAD_WORKER_CONCURRENCY): every sandbox session takes one, so a
   * best-of-k job with k attempts holds k while they run, and the worker never runs more.
   */
  sandboxSlots: SandboxSlots;
  /** Extra container labels (job id, worker instance) so that orphans can be swept. */
  labels: Record<string, string>;
  /** When the whole job must be over (LILYPAD_JOB_MAX_MINUTES); the agent's budget fits inside it. */
  deadlineAt: number;
  /**
   * Whether this worker still holds the job, renewing its claim when it does. Asked right before
   * publishing: a worker whose claim lapsed (Redis paused or unreachable) must leave publishing to
   * the copy that took the job over.
   */
  holdsJob: () => Promise<boolean>;
  /** The run's record for the run pages (Redis). */
  recorder: RunRecorder;
}

export type RunJobOutcome =
  | { result: 'pull_request'; number: number; url: string; updated: boolean; incomplete: boolean; branch: string }
  | { result: 'revised'; number: number; sha: string; incomplete: boolean }
  | { result: 'no_change'; why: string }
  | { result: 'stale'; why: string }
  | { result: 'cancelled' };

/** One job's context, shared by its phases. */
export interface JobContext<J extends RunJob = RunJob> {
  job: J;
  deps: JobDeps;
  signal: AbortSignal;
  runId: string;
  /** The one writer of this run's status. */
  status: RunStatus;
  log: Logger;
  /** The issue (issue jobs) or the pull request (follow-ups) the status is written on. */
  ref: IssueRef;
  tokens: RepoTokens;
  scanner: () => SecretScanner;
  /** Runs one named phase: checks for a cancel first, logs and measures it. */
  step: <T>(name: string, fn: () => Promise<T>) => Promise<T>;
  /** Run on the way out, newest first, whatever happened. */
  cleanups: Array<() => Promise<unknown>>;
}

export function createJobContext<J extends RunJob>(job: J, deps: JobDeps, signal: AbortSignal, runId: string, status: RunStatus, tokens: RepoTokens, ref: IssueRef): JobContext<J> {
  const log = deps.logger.child({ runId, [job.kind === 'followup' ? 'pull' : 'issue']: `${job.owner}/${job.repo}#${ref.issueNumber}` });
  const baseScanner = new SecretScanner([deps.env.OPENAI_API_KEY, deps.env.WEBHOOK_SECRET, deps.github.opts.privateKey]);
  return {
    job,
    deps,
    signal,
    runId,
    status,
    log,
    ref,
    tokens,
    // Every token minted for the job is a secret to refuse and redact, including later ones.
    scanner: () => baseScanner.withValues(tokens.secretValues()),
    cleanups: [],
    step: async (name, fn) => {
      if (signal.aborted) throw new CancelledError(reasonText(signal.reason));
      const t = Date.now();
      try {
        return await fn();
      } finally {
        const ms = Date.now() - t;
        phaseTimed(name, ms / 1000);
        deps.recorder.phase(name, ms);
        log.info({ phase: name, ms }, `phase ${name}`);
      }
    },
  };
}

/**
 * The trigger stopped holding (at the start, or right before the agent): the job ends saying so,
 * as cancelled, not failed. Anything else is rethrown for the runner's verdict.
 */
export async function endIfStale(ctx: JobContext, err: unknown): Promise<RunJobOutcome> {
  if (!(err instanceof StaleTriggerError)) throw err;
  await ctx.status.finish({ state: 'cancelled', why: err.message });
  ctx.deps.recorder.finish({ outcome: 'stale', why: err.message });
  return { result: 'stale', why: err.message };
}

/**
 * Right before anything is pushed: not cancelled, and this worker still holds the job (renewing its
 * claim). A worker whose job was handed over must leave publishing to the copy that took it.
 */
export async function assertStillOwned(ctx: JobContext): Promise<void> {
  if (ctx.signal.aborted) throw new CancelledError(reasonText(ctx.signal.reason));
  if (!(await ctx.deps.holdsJob())) throw new CancelledError('this worker no longer holds the job; another worker took it over');
}

/** Releases everything the job holds, newest first; a failing cleanup is logged, never thrown. */
export async function releaseJob(ctx: JobContext): Promise<void> {
  for (const cleanup of ctx.cleanups.reverse()) await cleanup().catch((err: unknown) => ctx.log.warn({ err: (err as Error).message }, 'cleanup failed'));
}
