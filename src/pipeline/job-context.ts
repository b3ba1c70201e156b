import path from 'node:path';
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
import type { RunOutcome } from './outcome.ts';
import { phaseStepper, runSettingsFromEnv, type RunContext, type RunProgress } from './run-context.ts';
import type { RunStatus } from './run-status.ts';
import type { SetupNetworkProvider } from './sandbox-session.ts';
import type { SandboxSlots } from './sandbox-slots.ts';
import type { EnvCache } from '../sandbox/env-cache/index.ts';

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
  /** Environments kept after setup (null: off). */
  envCache: EnvCache | null;
  /** LILYPAD_EXTRA_CA_CERTS as read at start (null: none). */
  extraCaPem: string | null;
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
  /** Secrets of the process besides the app's keys (the Redis password): redacted and refused like them. */
  processSecrets?: readonly string[];
}

/** What a queued job returns to the queue (its outcome without the diff, which the run record keeps). */
export type RunJobOutcome = RunOutcome;

/** One job's context: a run's (run-context.ts), with the job, its GitHub tokens and its status writer. */
export interface JobContext<J extends RunJob = RunJob> extends RunContext {
  job: J;
  deps: JobDeps;
  /** The one writer of this run's status comment (progress goes through ctx.progress). */
  status: RunStatus;
  /** The issue (issue jobs) or the pull request (follow-ups) the status is written on. */
  ref: IssueRef;
  tokens: RepoTokens;
}

export function createJobContext<J extends RunJob>(job: J, deps: JobDeps, signal: AbortSignal, runId: string, status: RunStatus, tokens: RepoTokens, ref: IssueRef): JobContext<J> {
  const log = deps.logger.child({ runId, [job.kind === 'followup' ? 'pull' : 'issue']: `${job.owner}/${job.repo}#${ref.issueNumber}` });
  const baseScanner = new SecretScanner([deps.env.OPENAI_API_KEY, deps.env.WEBHOOK_SECRET, deps.github.opts.privateKey, ...(deps.processSecrets ?? [])]);
  return {
    job,
    deps,
    runId,
    settings: runSettingsFromEnv(deps.env),
    docker: deps.docker,
    setupNetwork: deps.setupNetwork,
    sandboxSlots: deps.sandboxSlots,
    envCache: deps.envCache,
    extraCaPem: deps.extraCaPem,
    workerId: deps.workerId,
    labels: deps.labels,
    outDir: path.join(deps.env.LILYPAD_DATA_DIR, 'runs', runId),
    deadlineAt: deps.deadlineAt,
    signal,
    log,
    // Every token minted for the job is a secret to refuse and redact, including later ones.
    scanner: () => baseScanner.withValues(tokens.secretValues()),
    recorder: deps.recorder,
    progress: statusProgress(status),
    step: phaseStepper(signal, deps.recorder, log, phaseTimed),
    cleanups: [],
    status,
    ref,
    tokens,
  };
}

/** A run's progress, as the status comment shows it. */
function statusProgress(status: RunStatus): RunProgress {
  return {
    phase: (p) => {
      if (p.kind === 'testing') return status.phase({ state: 'testing', which: p.which });
      if (p.kind === 'agent') return status.phase({ state: 'running', step: 0, phase: p.attempts > 1 ? `the agent is starting (${p.attempts} attempts in parallel)` : 'the agent is starting' });
      return status.phase({ state: 'running', step: 0, phase: p.text });
    },
    agentStep: (p, maxSteps, attempts) =>
      status.progress({ state: 'running', step: p.step, phase: `agent step ${p.step} of at most ${maxSteps}${attempts > 1 ? ` (attempt 1 of ${attempts})` : ''}` }),
  };
}

/**
 * Right before anything is pushed: not cancelled, and this worker still holds the job (renewing its
 * claim). A worker whose job was handed over must leave publishing to the copy that took it.
 */
export async function assertStillOwned(ctx: JobContext): Promise<void> {
  if (ctx.signal.aborted) throw new CancelledError(reasonText(ctx.signal.reason));
  if (!(await ctx.deps.holdsJob())) throw new CancelledError('this worker no longer holds the job; another worker took it over');
}
