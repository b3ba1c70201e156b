import os from 'node:os';
import type { GitHubClient } from '../github/client.ts';
import type { StatusState, StatusWriter } from '../github/status-comment.ts';
import { jobFinished } from '../observability/metrics.ts';
import type { RunFinish, RunStore } from '../observability/run-store.ts';
import { SecretScanner } from '../observability/secrets.ts';
import { reportedNumber, type RunJob } from '../store/jobs.ts';

/**
 * How a run ended, for every kind of run. Written once, here (writeOutcome): the status the
 * person waiting sees, the run's record, the metrics and, for local runs and eval, the result.
 */
export type RunOutcome =
  | { result: 'pull_request'; number: number; url: string; updated: boolean; incomplete: boolean; branch: string; exitReason: string; draft: boolean; note?: string | undefined }
  | { result: 'revised'; number: number; url: string; sha: string; commitUrl: string; incomplete: boolean; exitReason: string; threads: number; diff: Buffer; note?: string | undefined }
  /** `lilypad run` wrote the patch to disk; `lilypad eval` kept it as a prediction. */
  | { result: 'patch'; exitReason: string; incomplete: boolean; diff: Buffer }
  | { result: 'no_change'; why: string; exitReason: string; diff?: Buffer | undefined }
  /** `publish: verified` and the change is not: kept for `/lilypad publish`, nothing published. */
  | { result: 'withheld'; verdict: string; tried: string; evidence: string; exitReason: string; diff: Buffer }
  /** The trigger stopped holding (the issue was edited, unlabelled, closed): the run stopped, as cancelled. */
  | { result: 'stale'; why: string }
  | { result: 'cancelled'; by?: string | undefined; why?: string | undefined }
  /** The run failed: for good, or (retry) it will run again after an infrastructure problem. */
  | { result: 'failed'; what: string; todo: string; error: string; retry: boolean; fault: Fault }
  /** A stopping worker gave the run back to the queue; another picks it up. */
  | { result: 'handed_back' }
  /** This copy lost its claim on the job; another worker runs it now and reports it. */
  | { result: 'lost' };

/** Whose a failure is to fix: the repository's (its configuration, setup, a secret in the change) or Lilypad's. */
export type Fault = 'user' | 'infrastructure';

export type RunKind = 'run' | 'followup' | 'local' | 'eval';

/** Where an outcome is written. Each is optional: a local run has no status comment, eval no metrics. */
export interface OutcomeSinks {
  status?: { finish(s: StatusState): Promise<void>; phase(s: StatusState): Promise<void> } | undefined;
  recorder: { finish(f: RunFinish): Promise<void> };
  metrics?: ((kind: RunKind, outcome: string, seconds: number) => void) | undefined;
  /** The run's own result (result.json, an eval record). */
  result?: ((outcome: RunOutcome) => Promise<void>) | undefined;
}

/** The one writer of a run's outcome. */
export async function writeOutcome(sinks: OutcomeSinks, kind: RunKind, outcome: RunOutcome, startedAt: number): Promise<void> {
  const status = statusOf(outcome);
  if (status && sinks.status) await (status.final ? sinks.status.finish(status.state) : sinks.status.phase(status.state));
  await sinks.recorder.finish(recordOf(outcome));
  sinks.metrics?.(kind, metricOf(outcome), (Date.now() - startedAt) / 1000);
  await sinks.result?.(outcome);
}

/** What the status comment says of an outcome (null: nothing, another copy of the job reports). */
export function statusOf(o: RunOutcome): { state: StatusState; final: boolean } | null {
  switch (o.result) {
    case 'pull_request':
      return { final: true, state: { state: 'done', prUrl: o.url, prNumber: o.number, incomplete: o.incomplete, updated: o.updated, exitReason: o.exitReason, draft: o.draft, ...(o.note ? { note: o.note } : {}) } };
    case 'revised':
      return { final: true, state: { state: 'revised', sha: o.sha, commitUrl: o.commitUrl, incomplete: o.incomplete, exitReason: o.exitReason, threads: o.threads, ...(o.note ? { note: o.note } : {}) } };
    case 'patch':
      return null;
    case 'no_change':
      return { final: true, state: { state: 'no_change', why: o.why } };
    case 'withheld':
      return { final: true, state: { state: 'withheld', verdict: o.verdict, tried: o.tried, evidence: o.evidence } };
    case 'stale':
      return { final: true, state: { state: 'cancelled', why: o.why } };
    case 'cancelled':
      return { final: true, state: { state: 'cancelled', by: o.by, why: o.why } };
    case 'failed':
      return o.retry
        ? { final: false, state: { state: 'queued', position: null, note: `Retrying after an infrastructure problem: ${o.what}` } }
        : { final: true, state: { state: 'failed', what: o.what, todo: o.todo } };
    case 'handed_back':
      return { final: false, state: { state: 'queued', position: null, note: 'A worker stopped while running it; it will start again shortly.' } };
    case 'lost':
      return null;
  }
}

/** What the run's record keeps of an outcome. */
export function recordOf(o: RunOutcome): RunFinish {
  switch (o.result) {
    case 'pull_request':
      return { outcome: 'pull_request', exitReason: o.exitReason, pr: { number: o.number, url: o.url } };
    case 'revised':
      return { outcome: 'pull_request', exitReason: o.exitReason, diff: o.diff, pr: { number: o.number, url: o.url } };
    case 'patch':
      return { outcome: 'patch', exitReason: o.exitReason, diff: o.diff };
    case 'no_change':
      return { outcome: 'no_change', exitReason: o.exitReason, why: o.why, ...(o.diff ? { diff: o.diff } : {}) };
    case 'withheld':
      return { outcome: 'withheld', exitReason: o.exitReason, why: `not published: the change is ${o.verdict} (publish: verified)`, diff: o.diff };
    case 'stale':
      return { outcome: 'stale', why: o.why };
    case 'cancelled':
      return { outcome: 'cancelled', ...(o.why ? { why: o.why } : {}) };
    case 'failed':
      return { outcome: 'failed', error: o.error, why: o.retry ? 'infrastructure problem; the job is retried' : null };
    case 'handed_back':
      return { outcome: 'failed', error: 'handed back', why: 'a worker stopped; the job runs again' };
    case 'lost':
      return { outcome: 'failed', error: 'the job lock was lost', why: 'another worker owns the job now' };
  }
}

/** The outcome label of the jobs-finished metric. */
export function metricOf(o: RunOutcome): string {
  if (o.result === 'failed') return o.retry ? 'retried' : 'failed';
  if (o.result === 'revised') return 'revised';
  return o.result;
}

/** Where the outcome of a queued job goes when no runner of it writes it. */
export interface QueuedJobSinks {
  runStore: RunStore;
  status: StatusWriter;
  /** Who writes the record (default: this machine's name). */
  workerId?: string | undefined;
}

/**
 * The outcome of a queued job that ended without its runner: removed while it waited (a cancel),
 * or failed by the queue after its workers died. Written like any other: the status comment,
 * a run record (named as the runner names its runs) and the jobs metric.
 */
export async function writeQueuedJobOutcome(sinks: QueuedJobSinks, client: GitHubClient, job: { id: string; data: RunJob; attempt: number }, outcome: RunOutcome): Promise<void> {
  const { data } = job;
  const ref = { owner: data.owner, repo: data.repo, issueNumber: reportedNumber(data) };
  // A follow-up's status lives in its slot of the pull request's comment; without one it has none.
  const slot = data.kind === 'followup' ? data.statusSlot : undefined;
  const say = (s: StatusState) => sinks.status.set(client, ref, s, data.triggeredBy, slot);
  const status = data.kind === 'followup' && !slot ? undefined : { finish: say, phase: say };
  const recorder = sinks.runStore.recorder(
    { runId: `${job.id}-${Date.now().toString(36)}`, jobId: job.id, owner: data.owner, repo: data.repo, repoId: data.repoId, issueNumber: ref.issueNumber, triggeredBy: data.triggeredBy, attempt: job.attempt, workerId: sinks.workerId ?? os.hostname() },
    new SecretScanner([]),
  );
  const kind = data.kind === 'followup' ? 'followup' : 'run';
  // No run of the job is being timed here: it counts with a duration of 0.
  await writeOutcome({ status, recorder, metrics: (k, o, seconds) => jobFinished(k === 'followup' ? 'followup' : 'run', o, seconds) }, kind, outcome, Date.now());
}
