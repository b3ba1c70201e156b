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

/** One attempt's session; `maxSteps` cuts its step budget (a fresh attempt gets what a stuck one left). */
/** An attempt's result with its number (fresh attempts are numbered after the k). */
interface Numbered {
  n: number;
  r: PromiseSettledResult<SandboxSessionResult>;
  /** A fresh attempt: the stuck attempt whose steps it took. */
  freshFor?: number;
}

type Session = (attempt: number, sink: JsonlTrajectory, signal: AbortSignal, maxSteps?: number) => Promise<SandboxSessionResult>;

/** A stuck attempt's budget goes to a fresh one only when this many steps are left. */
const MIN_FRESH_STEPS = 10;

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
export async function bestOfK(ctx: RunContext, k: number, first: JsonlTrajectory, session: Session, maxSteps: number): Promise<BestOfK> {
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
  const fresh: JsonlTrajectory[] = [];
  const one = (n: number, sink: JsonlTrajectory, steps?: number) =>
    session(n, sink, all.signal, steps).then(
      (result) => {
        if (result.agent.exitReason === 'cancelled' && !all.signal.aborted) stopAll(new CancelledError('an attempt was cancelled'));
        return result;
      },
      (err: unknown) => {
        if (err instanceof StaleTriggerError || err instanceof CancelledError) stopAll(err);
        throw err;
      },
    );
  // An attempt that got stuck leaves its work as a candidate, and what is left of its step budget to
  // a fresh attempt with a seed of its own (numbered after the k).
  let next = k;
  const attempt = async (sink: JsonlTrajectory, i: number): Promise<Numbered[]> => {
    const [first] = await Promise.allSettled([one(i + 1, sink)]);
    const own: Numbered = { n: i + 1, r: first! };
    const left = first!.status === 'fulfilled' && first!.value.agent.exitReason === 'stuck' ? maxSteps - first!.value.agent.steps : 0;
    if (left < MIN_FRESH_STEPS || all.signal.aborted) return [own];
    const n = ++next;
    const freshSink = new JsonlTrajectory(path.join(ctx.outDir, `trajectory-attempt-${n}.jsonl`), ctx.scanner());
    fresh.push(freshSink);
    ctx.log.info({ attempt: i + 1, fresh: n, steps: left }, 'an attempt got stuck; a fresh one takes the steps it left');
    const [again] = await Promise.allSettled([one(n, freshSink, left)]);
    return [own, { n, r: again!, freshFor: i + 1 }];
  };
  try {
    // Attempts 1..k, then the fresh ones, by number.
    const numbered = (await Promise.all(sinks.map(attempt))).flat().sort((a, b) => a.n - b.n);
    const settled = numbered.map((x) => x.r);
    if (fatal instanceof StaleTriggerError) throw fatal;
    if (ctx.signal.aborted) throw new CancelledError(reasonText(ctx.signal.reason));
    if (fatal) throw fatal;
    return await choose(ctx, k, settled, numbered);
  } finally {
    ctx.signal.removeEventListener('abort', onCancel);
    for (const sink of [...sinks.slice(1), ...fresh]) await sink.close();
  }
}

/** `numbered[i]` is attempt i + 1 (the numbers run 1..k, then the fresh attempts'). */
async function choose(ctx: RunContext, k: number, settled: Array<PromiseSettledResult<SandboxSessionResult>>, numbered: Numbered[]): Promise<BestOfK> {
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
  const summaries = settled.map((r, i) => summarise(r, i, winner, ranking, numbered[i]?.freshFor));
  ctx.recorder.warning(`best of ${k}: attempt ${winner + 1} chosen; ${ranking.summary}`);
  ctx.log.info({ winner: winner + 1, decidedBy: ranking.decidedBy, k }, 'best of k');
  return { session: (settled[winner] as PromiseFulfilledResult<SandboxSessionResult>).value, attempts: { summaries, ranking, patches } };
}

function summarise(r: PromiseSettledResult<SandboxSessionResult>, i: number, winner: number, ranking: Ranking, freshFor?: number): AttemptSummary {
  const fresh = freshFor ? `a fresh attempt with the steps attempt ${freshFor} left when it got stuck; ` : '';
  if (r.status === 'rejected') {
    return { attempt: i + 1, exitReason: 'error', evidence: null, testsAfter: 'not run', steps: 0, tokens: 0, changedFiles: 0, chosen: false, note: `failed: ${(r.reason as Error).message}`.slice(0, 200) };
  }
  const a = r.value.agent;
  return {
    attempt: i + 1,
    exitReason: a.exitReason,
    evidence: r.value.evidence?.evidence.verdict ?? null,
    testsAfter: testWord(r.value.tests?.after, r.value.tests?.afterNotRun),
    steps: a.steps,
    tokens: a.usage.prompt_tokens + a.usage.completion_tokens,
    changedFiles: (r.value.patch?.diff.toString('utf8').match(/^diff --git /gm) ?? []).length,
    chosen: i === winner,
    note: `${fresh}${ranking.attempts.find((v) => v.index === i)?.note ?? ''}`,
  };
}
