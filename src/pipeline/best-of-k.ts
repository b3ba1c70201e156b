import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { JsonlTrajectory } from '../agent/trajectory.ts';
import { selectAttempt, type Candidate, type Selection } from '../evidence/select-attempt.ts';
import { testWord } from '../github/revisions.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import type { RunContext } from './run-context.ts';
import type { SandboxSessionResult } from './sandbox-session.ts';
import { StaleTriggerError } from './validate-trigger.ts';

export interface AttemptSummary {
  /** 1-based. */
  attempt: number;
  exitReason: string;
  testsAfter: string;
  steps: number;
  tokens: number;
  changedFiles: number;
  chosen: boolean;
  note: string;
}

type Session = (attempt: number, sink: JsonlTrajectory, signal: AbortSignal) => Promise<SandboxSessionResult>;

export interface BestOfK {
  session: SandboxSessionResult;
  attempts: { summaries: AttemptSummary[]; selection: Selection; patches: Array<Buffer | null> };
}

/**
 * Best of k: k attempts from the same checkout, each in its own sandbox with its own sampling
 * seed, in parallel; the tests, then agreement among the attempts, then the smaller diff choose
 * (the rule in evidence/select-attempt.ts, which `lilypad eval` measures). Every attempt's patch is kept with
 * the run (attempt-N.diff in the run's folder), and every trajectory. A stale task or a cancel in
 * any attempt ends them all: no sibling's patch may be published on a text nobody approved.
 */
export async function bestOfK(ctx: RunContext, k: number, first: JsonlTrajectory, session: Session): Promise<BestOfK> {
  const sinks = [first, ...Array.from({ length: k - 1 }, (_, i) => new JsonlTrajectory(path.join(ctx.outDir, `trajectory-attempt-${i + 2}.jsonl`), ctx.scanner()))];
  const all = new AbortController();
  const onCancel = () => all.abort(ctx.signal.reason);
  if (ctx.signal.aborted) onCancel();
  else ctx.signal.addEventListener('abort', onCancel, { once: true });
  let fatal: unknown = null;
  const stopAll = (err: unknown) => {
    fatal ??= err;
    if (!all.signal.aborted) all.abort(fatal);
  };
  const attempt = (sink: JsonlTrajectory, i: number) =>
    session(i + 1, sink, all.signal).then(
      (result) => {
        if (result.agent.exitReason === 'cancelled' && !all.signal.aborted) stopAll(new CancelledError('an attempt was cancelled'));
        return result;
      },
      (err: unknown) => {
        if (err instanceof StaleTriggerError || err instanceof CancelledError) stopAll(err);
        throw err;
      },
    );
  try {
    const settled = await Promise.allSettled(sinks.map(attempt));
    if (fatal instanceof StaleTriggerError) throw fatal;
    if (ctx.signal.aborted) throw new CancelledError(reasonText(ctx.signal.reason));
    if (fatal) throw fatal;
    return await choose(ctx, k, settled);
  } finally {
    ctx.signal.removeEventListener('abort', onCancel);
    for (const sink of sinks.slice(1)) await sink.close();
  }
}

async function choose(ctx: RunContext, k: number, settled: Array<PromiseSettledResult<SandboxSessionResult>>): Promise<BestOfK> {
  const done = settled.flatMap((r, i) => (r.status === 'fulfilled' ? [{ i, result: r.value }] : []));
  if (done.length === 0) throw (settled[0] as PromiseRejectedResult).reason;
  const patches = settled.map((r) => (r.status === 'fulfilled' ? (r.value.patch?.diff ?? null) : null));
  const candidates: Candidate[] = settled.map((r, i) => {
    if (r.status === 'rejected') return { index: i, patch: null, testsPassed: null };
    const after = r.value.tests?.after;
    return { index: i, patch: patches[i]?.toString('utf8') ?? null, testsPassed: after ? after.outcome === 'passed' : null };
  });
  const selection = selectAttempt(candidates);
  const winner = selection.winner ?? done[0]!.i;
  for (const [i, p] of patches.entries()) if (p && p.length > 0) await writeFile(path.join(ctx.outDir, `attempt-${i + 1}.diff`), p);
  const summaries = settled.map((r, i) => summarise(r, i, winner, selection));
  ctx.recorder.warning(`best of ${k}: attempt ${winner + 1} chosen; ${selection.summary}`);
  ctx.log.info({ winner: winner + 1, decidedBy: selection.decidedBy, k }, 'best of k');
  return { session: (settled[winner] as PromiseFulfilledResult<SandboxSessionResult>).value, attempts: { summaries, selection, patches } };
}

function summarise(r: PromiseSettledResult<SandboxSessionResult>, i: number, winner: number, selection: Selection): AttemptSummary {
  if (r.status === 'rejected') {
    return { attempt: i + 1, exitReason: 'error', testsAfter: 'not run', steps: 0, tokens: 0, changedFiles: 0, chosen: false, note: `failed: ${(r.reason as Error).message}`.slice(0, 200) };
  }
  const a = r.value.agent;
  return {
    attempt: i + 1,
    exitReason: a.exitReason,
    testsAfter: testWord(r.value.tests?.after),
    steps: a.steps,
    tokens: a.usage.prompt_tokens + a.usage.completion_tokens,
    changedFiles: (r.value.patch?.diff.toString('utf8').match(/^diff --git /gm) ?? []).length,
    chosen: i === winner,
    note: selection.attempts.find((v) => v.index === i)?.note ?? '',
  };
}
