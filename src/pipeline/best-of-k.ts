import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { JsonlTrajectory } from '../agent/trajectory.ts';
import { rankAttempts, type RankCandidate, type Ranking } from '../evidence/rank.ts';
import { testWord } from '../github/revisions.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import type { RunContext } from './run-context.ts';
import type { SandboxSessionResult } from './sandbox-session.ts';
import { StaleTriggerError } from './validate-trigger.ts';

export interface AttemptSummary {
  /** 1-based. */
  attempt: number;
  exitReason: string;
  /** The attempt's evidence verdict (verified, unverified, failing), or null when none was gathered. */
  evidence: string | null;
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
  attempts: { summaries: AttemptSummary[]; ranking: Ranking; patches: Array<Buffer | null> };
}

/**
 * Best of k: k attempts from the same checkout, each in its own sandbox with its own sampling
 * seed, in parallel; their evidence chooses (evidence/rank.ts: verified first, then nothing broken
 * or weakened, then the tests passing, then agreement among the attempts, then the smaller diff).
 * Every attempt's patch is kept with the run (attempt-N.diff in the run's folder), and every
 * trajectory. A stale task or a cancel in any attempt ends them all: no sibling's patch may be
 * published on a text nobody approved.
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
  const candidates: RankCandidate[] = settled.map((r, i) => {
    if (r.status === 'rejected') return { index: i, patch: null, testsPassed: null, evidence: null };
    const after = r.value.tests?.after;
    return { index: i, patch: patches[i]?.toString('utf8') ?? null, testsPassed: after ? after.outcome === 'passed' : null, evidence: r.value.evidence?.evidence ?? null };
  });
  // Verified first, then nothing broken or weakened, then the tests, then agreement, then size.
  const ranking = rankAttempts(candidates);
  const winner = ranking.winner ?? done[0]!.i;
  for (const [i, p] of patches.entries()) if (p && p.length > 0) await writeFile(path.join(ctx.outDir, `attempt-${i + 1}.diff`), p);
  const summaries = settled.map((r, i) => summarise(r, i, winner, ranking));
  ctx.recorder.warning(`best of ${k}: attempt ${winner + 1} chosen; ${ranking.summary}`);
  ctx.log.info({ winner: winner + 1, decidedBy: ranking.decidedBy, k }, 'best of k');
  return { session: (settled[winner] as PromiseFulfilledResult<SandboxSessionResult>).value, attempts: { summaries, ranking, patches } };
}

function summarise(r: PromiseSettledResult<SandboxSessionResult>, i: number, winner: number, ranking: Ranking): AttemptSummary {
  if (r.status === 'rejected') {
    return { attempt: i + 1, exitReason: 'error', evidence: null, testsAfter: 'not run', steps: 0, tokens: 0, changedFiles: 0, chosen: false, note: `failed: ${(r.reason as Error).message}`.slice(0, 200) };
  }
  const a = r.value.agent;
  return {
    attempt: i + 1,
    exitReason: a.exitReason,
    evidence: r.value.evidence?.evidence.verdict ?? null,
    testsAfter: testWord(r.value.tests?.after),
    steps: a.steps,
    tokens: a.usage.prompt_tokens + a.usage.completion_tokens,
    changedFiles: (r.value.patch?.diff.toString('utf8').match(/^diff --git /gm) ?? []).length,
    chosen: i === winner,
    note: ranking.attempts.find((v) => v.index === i)?.note ?? '',
  };
}
