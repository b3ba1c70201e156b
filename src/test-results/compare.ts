import type { ParsedRun } from './parse.ts';
import type { TestCaseOutcome } from './types.ts';

export interface RunComparison {
  /** Did not pass before (failed or error), passes after. */
  fixed: string[];
  /** Passed before, fails or errors after. */
  broken: string[];
  /** Failed or errored in both runs. */
  still_failing: string[];
  passed_both: string[];
  /** Skipped in either run. */
  skipped: string[];
  /** Reported in one run only (a test added, removed or renamed, or a file that stopped importing). */
  only_before: string[];
  only_after: string[];
  counts: Record<'fixed' | 'broken' | 'still_failing' | 'passed_both' | 'skipped' | 'only_before' | 'only_after', number> & {
    before: Record<TestCaseOutcome, number>;
    after: Record<TestCaseOutcome, number>;
  };
  /**
   * Set when either run gave no per-test results: the lists are empty and the caller judges by
   * the exit codes alone, saying so.
   */
  fallback: { reason: string } | null;
}

const bad = (o: TestCaseOutcome | undefined) => o === 'failed' || o === 'error';

function tally(run: ParsedRun): Record<TestCaseOutcome, number> {
  const t: Record<TestCaseOutcome, number> = { passed: 0, failed: 0, skipped: 0, error: 0 };
  if (run.parsed) for (const r of run.results) t[r.outcome]++;
  return t;
}

/** Per-test differences between the tests before the change and after it. */
export function compareRuns(before: ParsedRun, after: ParsedRun): RunComparison {
  const out: RunComparison = {
    fixed: [],
    broken: [],
    still_failing: [],
    passed_both: [],
    skipped: [],
    only_before: [],
    only_after: [],
    counts: { fixed: 0, broken: 0, still_failing: 0, passed_both: 0, skipped: 0, only_before: 0, only_after: 0, before: tally(before), after: tally(after) },
    fallback: null,
  };
  const unparsed = [
    !before.parsed ? `before: ${before.reason}` : before.results.length === 0 ? 'before: no tests ran' : null,
    !after.parsed ? `after: ${after.reason}` : after.results.length === 0 ? 'after: no tests ran' : null,
  ].filter((r): r is string => r !== null);
  if (unparsed.length > 0 || !before.parsed || !after.parsed) {
    out.fallback = { reason: `per-test results could not be compared (${unparsed.join('; ')}); judged by exit codes` };
    return out;
  }
  const was = new Map(before.results.map((r) => [r.id, r.outcome]));
  const now = new Map(after.results.map((r) => [r.id, r.outcome]));
  for (const [id, a] of now) {
    const b = was.get(id);
    if (b === undefined) out.only_after.push(id);
    else if (a === 'skipped' || b === 'skipped') out.skipped.push(id);
    else if (a === 'passed') (b === 'passed' ? out.passed_both : out.fixed).push(id);
    else if (bad(a)) (b === 'passed' ? out.broken : out.still_failing).push(id);
  }
  for (const id of was.keys()) if (!now.has(id)) out.only_before.push(id);
  for (const key of ['fixed', 'broken', 'still_failing', 'passed_both', 'skipped', 'only_before', 'only_after'] as const) {
    out[key].sort();
    out.counts[key] = out[key].length;
  }
  return out;
}
