import { changedLines, selectAttempt, type Candidate } from './select-attempt.ts';
import type { Evidence, Verdict } from './verdict.ts';

/**
 * Best of k by evidence (issue 17 #3): verified first, then nothing broken or weakened, then the
 * tests passing after the change; among attempts equal on those, eval/select.ts decides as it
 * always has (the largest group of attempts making the same change, then the smallest diff).
 * Pure; attempts without a patch never win.
 */
export interface RankCandidate extends Candidate {
  /** The attempt's evidence; null when it could not be computed (counts as neither verified nor clean). */
  evidence: Pick<Evidence, 'verdict' | 'broken' | 'weakened'> | null;
}

export type RankStep = 'only_candidate' | 'verified' | 'not_broken' | 'tests' | 'agreement' | 'smallest_diff';

export interface AttemptRank {
  index: number;
  verdict: Verdict | null;
  /** The attempt's evidence and where it stood, for the Attempts table. */
  note: string;
}

export interface Ranking {
  winner: number | null;
  decidedBy: RankStep | null;
  /** Every attempt's index, best first; attempts without a patch last. */
  order: number[];
  attempts: AttemptRank[];
  /** One sentence for the pull request body and the run page. */
  summary: string;
}

type WithPatch = RankCandidate & { patch: string };

const CRITERIA: Array<{ step: 'verified' | 'not_broken' | 'tests'; pool: string; only: string; holds: (c: RankCandidate) => boolean }> = [
  { step: 'verified', pool: 'verified attempts', only: 'the only verified attempt', holds: (c) => c.evidence?.verdict === 'verified' },
  {
    step: 'not_broken',
    pool: 'attempts that break and weaken no test',
    only: 'the only attempt that breaks and weakens no test',
    holds: (c) => c.evidence !== null && c.evidence.broken.length === 0 && c.evidence.weakened.length === 0,
  },
  { step: 'tests', pool: 'passing attempts', only: 'the only attempt whose tests passed after its change', holds: (c) => c.testsPassed === true },
];

const hasPatch = (c: RankCandidate): c is WithPatch => c.patch !== null && c.patch.trim() !== '';

export function rankAttempts(candidates: readonly RankCandidate[]): Ranking {
  const withPatch = candidates.filter(hasPatch);
  const order = [...tiers(withPatch).flatMap((tier) => selectAttempt(tier).clusters.flat()), ...candidates.filter((c) => !hasPatch(c)).map((c) => c.index)];
  const notes = new Map<number, string>();
  for (const tier of tiers(withPatch)) for (const v of selectAttempt(tier).attempts) notes.set(v.index, v.note);
  const attempts = candidates.map((c) => ({ index: c.index, verdict: c.evidence?.verdict ?? null, note: `${evidenceWords(c)}; ${notes.get(c.index) ?? 'no patch'}` }));
  if (withPatch.length === 0) return { winner: null, decidedBy: null, order, attempts, summary: `none of the ${candidates.length} attempt(s) produced a patch` };

  let pool = withPatch;
  let decidedBy: RankStep | null = withPatch.length === 1 ? 'only_candidate' : null;
  let why = 'the only attempt with a patch';
  let kind = '';
  for (const rule of CRITERIA) {
    const kept = pool.filter(rule.holds);
    if (kept.length === 0) continue;
    if (kind === '') kind = rule.pool;
    if (decidedBy === null && kept.length === 1) {
      decidedBy = rule.step;
      why = rule.only;
    }
    pool = kept;
  }
  if (decidedBy === null) {
    const sel = selectAttempt(pool);
    decidedBy = sel.decidedBy === 'agreement' ? 'agreement' : 'smallest_diff';
    const best = sel.clusters[0]!;
    const among = kind || 'attempts';
    why =
      decidedBy === 'agreement'
        ? `${best.length} of ${pool.length} ${among} made the same change`
        : `the smallest diff (${changedLines(pool.find((c) => c.index === best[0])!.patch)} changed lines) among ${pool.length} equally supported ${among}`;
  }
  const winner = order[0]!;
  return { winner, decidedBy, order, attempts, summary: `attempt ${winner + 1} of ${candidates.length}: ${why}` };
}

/** Groups of attempts equal on the three evidence rules, best group first. */
function tiers(withPatch: WithPatch[]): WithPatch[][] {
  const key = (c: RankCandidate) => CRITERIA.map((r) => (r.holds(c) ? '0' : '1')).join('');
  const groups = new Map<string, WithPatch[]>();
  for (const c of withPatch) groups.set(key(c), [...(groups.get(key(c)) ?? []), c]);
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, g]) => g);
}

function evidenceWords(c: RankCandidate): string {
  if (!c.evidence) return 'evidence not computed';
  const { verdict, broken, weakened } = c.evidence;
  const extra = [broken.length ? `${broken.length} broken` : '', weakened.length ? `${weakened.length} weakened` : ''].filter(Boolean);
  return extra.length ? `${verdict} (${extra.join(', ')})` : verdict;
}
