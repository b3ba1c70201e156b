import type { IssueRef } from '../github/client.ts';
import { RepoTokens } from '../github/repo-tokens.ts';
import type { StatusWriter } from '../github/status-comment.ts';
import type { Logger } from '../observability/logger.ts';
import { jobFinished } from '../observability/metrics.ts';
import type { RunStore } from '../observability/run-store.ts';
import { SecretScanner } from '../observability/secrets.ts';
import { parseCancelRequest, type CancelBus, type CancelRequest } from '../store/cancel-bus.ts';
import { markFinishing } from '../store/finishing-marks.ts';
import { reportedNumber, type FollowupRunJob, type IssueRunJob, type RunJob } from '../store/jobs.ts';
import type { RunQueue } from '../store/run-queue.ts';
import { runLinkFor } from '../config/public-urls.ts';
import { classifyFailure, failedOutcome } from './failures.ts';
import { followupEnded, type FollowupPullRef } from './followups.ts';
import { createJobContext, type JobContext, type JobDeps, type RunJobOutcome } from './job-context.ts';
import { runFollowup } from './kinds/followup.ts';
import { issuePlug } from './kinds/issue.ts';
import { writeOutcome, writeQueuedJobOutcome, type OutcomeSinks, type RunOutcome } from './outcome.ts';
import { runSpine } from './spine.ts';
import { RunStatus } from './run-status.ts';

/** Why a running job's signal was aborted, besides a user's cancel (`cancel:<json>`). */
export const SHUTDOWN = 'shutdown';
export const LOST_LOCK = 'lost-lock';
export const JOB_DEADLINE = 'job-deadline';

/** The queue gives the job back to be run again later (a worker stopping). */
export class HandBack extends Error {
  override name = 'HandBack';
}
/** The job failed for good: the queue must not retry it. */
export class FinalFailure extends Error {
  override name = 'FinalFailure';
}
/** This copy of the job lost its claim; the queue's record of it belongs to another worker now. */
export class LostClaim extends Error {
  override name = 'LostClaim';
}

/** One job as the queue hands it over. Only cli/run-worker.ts knows this is BullMQ. */
export interface QueuedRun {
  id: string;
  data: RunJob;
  /** 1 for the first attempt. */
  attempt: number;
  attempts: number;
  signal: AbortSignal;
  holdsJob(): Promise<boolean>;
  /** Aborts the job's signal with `reason` (see SHUTDOWN, LOST_LOCK, JOB_DEADLINE, cancel:). */
  cancel(reason: string): void;
}

/** What the runner needs besides what each job gets (see JobDeps; the rest is made per job). */
export interface RunnerDeps extends Omit<JobDeps, 'deadlineAt' | 'holdsJob' | 'recorder'> {
  status: StatusWriter;
  cancelBus: CancelBus;
  runStore: RunStore;
  runs: RunQueue;
  /** Work that outlives the job (token revocation) and that a stopping worker waits for. */
  background: (work: Promise<unknown>) => void;
  /** What runs each kind of job (tests give fakes); default: the spine with the issue or follow-up plug. */
  kinds?: JobKinds;
}

/** The two kinds of queued job, each a run of the spine with its plug. */
export interface JobKinds {
  issue(ctx: JobContext<IssueRunJob>): Promise<RunOutcome>;
  followup(ctx: JobContext<FollowupRunJob>, jobId: string): Promise<RunOutcome>;
}

const SPINE_KINDS: JobKinds = {
  issue: (ctx) => runSpine(ctx, issuePlug(ctx)),
  followup: (ctx, jobId) => runFollowup(ctx, jobId),
};

/**
 * The job lifecycle around either kind of job: the run's one status writer, early and late
 * cancels, the whole-job deadline, fresh tokens, the run record, and what a failure becomes
 * (handed back, retried, cancelled or failed with why). Every final status goes through the
 * status writer, in order.
 */
export async function runQueuedJob(run: QueuedRun, deps: RunnerDeps): Promise<RunJobOutcome> {
  const { env, redis } = deps;
  const data = run.data;
  const prefix = env.LILYPAD_QUEUE_PREFIX;
  const started = Date.now();
  const log = deps.logger.child({ job: run.id, attempt: run.attempt });
  const ref: IssueRef = { owner: data.owner, repo: data.repo, issueNumber: reportedNumber(data) };
  // Tokens for this one repository, minted afresh whenever the one in hand is close to expiring.
  const tokens = new RepoTokens(deps.github, data.installationId, data.repo);
  const runId = `${run.id}-${Date.now().toString(36)}`;
  const runUrl = runLinkFor(env, runId);
  const status = new RunStatus({
    comments: deps.status,
    client: async () => await deps.github.installation(data.installationId),
    freshClient: () => tokens.rest(),
    // A trigger that arrives between this final status and the queue marking the job completed is a
    // re-run, not a duplicate: the trigger logic waits for the job to finish when it sees this.
    onFinal: () => markFinishing(redis, prefix, run.id),
    ref,
    triggeredBy: data.triggeredBy,
    log,
    ...(data.kind === 'followup' && data.statusSlot ? { slot: data.statusSlot } : {}),
    ...(runUrl ? { runUrl } : {}),
  });

  const recorder = deps.runStore.recorder(
    { runId, jobId: run.id, owner: data.owner, repo: data.repo, repoId: data.repoId, issueNumber: ref.issueNumber, triggeredBy: data.triggeredBy, attempt: run.attempt, workerId: deps.workerId },
    new SecretScanner([env.OPENAI_API_KEY, env.WEBHOOK_SECRET, deps.github.opts.privateKey, ...(deps.processSecrets ?? [])]),
    log,
  );
  const sinks: OutcomeSinks = { status, recorder, metrics: (kind, outcome, seconds) => jobFinished(kind === 'followup' ? 'followup' : 'run', outcome, seconds) };
  const kind = data.kind === 'followup' ? 'followup' : 'run';
  const write = (o: RunOutcome) => writeOutcome(sinks, kind, o, started);

  const early = await deps.cancelBus.pending(run.id);
  if (early) {
    await write({ result: 'cancelled', by: early.by, why: early.why });
    await deps.cancelBus.clear(run.id);
    await afterFollowup(run, deps);
    return { result: 'cancelled' };
  }
  // The whole job has a deadline: the agent's budget is cut to fit it, and past it the job stops.
  const deadlineAt = Date.now() + env.LILYPAD_JOB_MAX_MINUTES * 60_000;
  const deadline = setTimeout(() => run.cancel(JOB_DEADLINE), deadlineAt - Date.now());
  // Pub/sub can miss a message (a reconnect); the stored flag is checked every few seconds too.
  const poll = setInterval(() => {
    deps.cancelBus
      .pending(run.id)
      .then((req) => {
        if (req && !run.signal.aborted) run.cancel(`cancel:${JSON.stringify(req)}`);
      })
      .catch(() => undefined);
  }, 5000);
  let settled = true;
  try {
    const context = <J extends RunJob>(job: J) => createJobContext(job, { ...deps, logger: log, deadlineAt, holdsJob: () => run.holdsJob(), recorder }, run.signal, runId, status, tokens, ref);
    const kinds = deps.kinds ?? SPINE_KINDS;
    const outcome = data.kind === 'followup' ? await kinds.followup(context(data), run.id) : await kinds.issue(context(data));
    log.info({ outcome: outcome.result }, 'job finished');
    await write(outcome);
    return forQueue(outcome);
  } catch (err) {
    const outcome = await failureOutcome(run, err, log, deps);
    await write(outcome);
    settled = outcome.result !== 'handed_back' && outcome.result !== 'lost' && !(outcome.result === 'failed' && outcome.retry);
    if (outcome.result === 'cancelled') return { result: 'cancelled' };
    throw toQueueError(outcome, err);
  } finally {
    clearInterval(poll);
    clearTimeout(deadline);
    // Revoked in the background: the job is over for its users once its final status is written.
    deps.background(tokens.revokeAll());
    if (settled) await afterFollowup(run, deps);
  }
}

/** The outcome as the queue keeps it: without the diff (the run record has it). */
function forQueue(o: RunOutcome): RunOutcome {
  return 'diff' in o ? { ...o, diff: undefined } as RunOutcome : o;
}

/** What a job that threw becomes: handed back, cancelled, retried, or failed with why. Writes nothing. */
async function failureOutcome(run: QueuedRun, err: unknown, log: Logger, deps: RunnerDeps): Promise<RunOutcome> {
  const { env } = deps;
  if (run.signal.aborted) {
    const reason = run.signal.reason;
    if (reason === LOST_LOCK) return { result: 'lost' };
    if (reason === SHUTDOWN) {
      // Hand the job back: another worker (or this one, restarted) picks it up from the start.
      log.warn('worker stopping: job handed back to the queue');
      return { result: 'handed_back' };
    }
    if (reason === JOB_DEADLINE) {
      const what = `the job ran longer than ${env.LILYPAD_JOB_MAX_MINUTES} minutes (LILYPAD_JOB_MAX_MINUTES) and was stopped.`;
      const todo = 'lower `max_minutes`, the test or setup time in `.github/lilypad.yml`, or ask the administrator to raise the limit; then run Lilypad again.';
      return { result: 'failed', what, todo, error: what, retry: false, fault: 'user' };
    }
    const req = parseCancel(reason);
    await deps.cancelBus.clear(run.id);
    log.info({ by: req?.by }, 'job cancelled');
    return { result: 'cancelled', by: req?.by, why: req?.why };
  }
  const verdict = classifyFailure(err);
  log.error({ err: (err as Error).message, verdict: verdict.kind }, 'job failed');
  const retry = verdict.kind === 'transient' && run.attempt < run.attempts;
  return failedOutcome(err, verdict, retry);
}

function toQueueError(outcome: RunOutcome, err: unknown): Error {
  if (outcome.result === 'handed_back') return new HandBack('handed back');
  if (outcome.result === 'lost') return new LostClaim('the job lock was lost; another worker owns the job now');
  if (outcome.result === 'failed' && !outcome.retry) return new FinalFailure(outcome.what);
  return err instanceof Error ? err : new Error(String(err));
}

/** Said when the queue fails a job whose workers kept dying (BullMQ's stalled limit). */
const STALLED = {
  what: 'the workers running this job stopped unexpectedly several times.',
  todo: 'ask the Lilypad administrator to check the workers (memory, restarts), then run Lilypad again.',
};

/**
 * A job the queue failed as stalled, without running it again: its status comment would say
 * "Running" for ever. Its outcome is written as any other (status, run record, metric).
 */
export async function failStalledJob(deps: Pick<RunnerDeps, 'github' | 'status' | 'runStore' | 'workerId'>, job: { id: string; data: RunJob; attemptsMade: number }, err: Error): Promise<void> {
  const client = await deps.github.installation(job.data.installationId);
  const outcome: RunOutcome = { result: 'failed', ...STALLED, error: err.message, retry: false, fault: 'infrastructure' };
  await writeQueuedJobOutcome(deps, client, { id: job.id, data: job.data, attempt: job.attemptsMade }, outcome);
}

/** A follow-up that ended (done, failed for good, cancelled) lets the next one for its pull request start. */
async function afterFollowup(run: QueuedRun, deps: RunnerDeps): Promise<void> {
  const data = run.data;
  if (data.kind !== 'followup') return;
  const target: FollowupPullRef = { installationId: data.installationId, repoId: data.repoId, owner: data.owner, repo: data.repo, pullNumber: data.pullNumber, issueNumber: data.issueNumber };
  const client = await deps.github.installation(data.installationId);
  await followupEnded({ redis: deps.redis, prefix: deps.env.LILYPAD_QUEUE_PREFIX, runs: deps.runs, status: deps.status, cancelBus: deps.cancelBus, runStore: deps.runStore }, client, target, run.id).catch((err: unknown) =>
    deps.logger.error({ err: (err as Error).message, job: run.id }, 'could not queue the next follow-up'),
  );
}

function parseCancel(reason: unknown): CancelRequest | null {
  if (typeof reason !== 'string' || !reason.startsWith('cancel:')) return null;
  const parsed = parseCancelRequest(reason.slice('cancel:'.length));
  return parsed.ok ? parsed.request : null;
}
