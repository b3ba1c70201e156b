import { compareRuns, type ParsedRun, type TestCaseOutcome } from '../test-results/index.ts';
import { failureOnBase, failureReasons, isWholeFileResult } from './base-failures.ts';
import type { WeakenedTest } from './weakened.ts';

/** One run of a test command, as the sandbox phase recorded it. */
export interface TestRunRecord {
  /** What parseTestRun read from the output. */
  run: ParsedRun;
  /** The command's exit code; null when it did not finish (timed out, killed). */
  exitCode: number | null;
  /** The output, read for why a test failed on the base code (see base-failures.ts). */
  output?: string;
}

export interface EvidenceInput {
  /** (a) The repository's tests on the base commit. */
  before: TestRunRecord;
  /** (b) The repository's tests with the change. */
  after: TestRunRecord;
  /** (c) The change's test files on the base code (its other files reverted); null: it has none. */
  changeTestsOnBase: TestRunRecord | null;
  /** (d) The change's test files with the whole change. */
  changeTestsWithChange: TestRunRecord | null;
  weakened: WeakenedTest[];
}

export type Verdict = 'verified' | 'unverified' | 'failing';

export interface Evidence {
  verdict: Verdict;
  /** Tests the change adds or modifies that fail on the base code and pass with the change. */
  reproduction: string[];
  /** Tests that failed before the change and pass after it. */
  fixed: string[];
  /** Tests that passed before the change (or on the base code) and fail with it. */
  broken: string[];
  /** Tests that do not pass after the change and did not pass before it, the change's own included. */
  still_failing: string[];
  weakened: WeakenedTest[];
  /** Sentences for the reader: what could not be read, what was not counted and why. */
  notes: string[];
}

type Outcomes = Map<string, TestCaseOutcome>;

const bad = (o: TestCaseOutcome | undefined) => o === 'failed' || o === 'error';

function outcomesOf(r: TestRunRecord | null): Outcomes | null {
  if (!r || !r.run.parsed || r.run.results.length === 0) return null;
  return new Map(r.run.results.map((x) => [x.id, x.outcome]));
}

const list = (ids: string[], max = 5) => `${ids.slice(0, max).join(', ')}${ids.length > max ? ` and ${ids.length - max} more` : ''}`;
const exit = (r: TestRunRecord) => (r.exitCode === null ? 'it did not finish' : `exit code ${r.exitCode}`);

/**
 * The evidence a change carries, from four runs (issue 17): verified when at least one test
 * reproduces the issue or is fixed, nothing is broken and nothing weakened; failing when a test is
 * broken or the tests fail after the change where they did not before; unverified otherwise.
 * Tests that failed before the change and still fail do not make it failing; a test that passes on
 * the base code as well as with the change is not evidence. Runs whose output gives no per-test
 * results are judged by exit codes, which can make a change failing but never verified.
 */
export function evidenceOf(input: EvidenceInput): Evidence {
  const notes: string[] = [];
  const suite = suiteChanges(input.before, input.after, notes);
  const own = changeTests(input, notes);
  const reproduction = [...new Set(own.reproduction)].sort();
  const fixed = [...new Set([...suite.fixed, ...own.fixedToo])].filter((id) => !reproduction.includes(id) && !own.passOnBase.has(id)).sort();
  const broken = [...new Set([...suite.broken, ...own.broken])].sort();
  const still = [...new Set([...suite.preexisting, ...suite.newFailing, ...own.failing])].filter((id) => !broken.includes(id)).sort();
  const newFailing = [...suite.newFailing, ...own.failing.filter((id) => !suite.preexisting.includes(id) && !own.failedBefore.has(id))];
  const failing = broken.length > 0 || newFailing.length > 0 || suite.failsUnread || own.failsUnread;
  const shown = reproduction.length + fixed.length > 0;
  const verdict: Verdict = failing ? 'failing' : shown && input.weakened.length === 0 ? 'verified' : 'unverified';
  if (suite.preexisting.length > 0) notes.push(`${suite.preexisting.length} test(s) failed before the change and still fail (not counted against it): ${list(suite.preexisting)}`);
  if (verdict === 'unverified' && shown) notes.push(`not verified: the change weakens ${input.weakened.length} test(s)`);
  if (verdict === 'unverified' && !shown) notes.push('not verified: no test fails without the change and passes with it');
  const passOnBaseToo = suite.fixed.filter((id) => own.passOnBase.has(id));
  if (passOnBaseToo.length > 0) notes.push(`not counted as fixed, because the change's version of the test passes on the base code too: ${list(passOnBaseToo)}`);
  return { verdict, reproduction, fixed, broken, still_failing: still, weakened: input.weakened, notes };
}

interface SuiteChanges {
  fixed: string[];
  broken: string[];
  /** Failed before and after. */
  preexisting: string[];
  /** Fail after, and were not there (or not known to fail) before. */
  newFailing: string[];
  /** The tests fail after the change and the output names no test. */
  failsUnread: boolean;
}

/** (a) against (b): per test where both runs were read, by exit codes where not. */
function suiteChanges(before: TestRunRecord, after: TestRunRecord, notes: string[]): SuiteChanges {
  const out: SuiteChanges = { fixed: [], broken: [], preexisting: [], newFailing: [], failsUnread: false };
  const cmp = compareRuns(before.run, after.run);
  if (!cmp.fallback) {
    const now = outcomesOf(after)!;
    const was = outcomesOf(before)!;
    out.fixed = cmp.fixed;
    out.broken = cmp.broken;
    out.preexisting = cmp.still_failing;
    out.newFailing = cmp.only_after.filter((id) => bad(now.get(id)));
    const skippedNow = cmp.skipped.filter((id) => was.get(id) === 'passed' && now.get(id) === 'skipped');
    if (skippedNow.length > 0) notes.push(`passed before the change and are skipped after it: ${list(skippedNow)}`);
    const gone = cmp.only_before.filter((id) => was.get(id) === 'passed');
    if (gone.length > 0) notes.push(`passed before the change and did not run after it: ${list(gone)}`);
    if (before.exitCode === 0 && after.exitCode !== 0 && out.broken.length + out.newFailing.length === 0) {
      out.failsUnread = true;
      notes.push(`the test command passed before the change and fails after it (${exit(after)}), though no test is reported failing`);
    }
    return out;
  }
  notes.push(`the tests before and after the change: ${cmp.fallback.reason}`);
  const now = outcomesOf(after);
  if (now) {
    const failingNow = [...now].filter(([, o]) => bad(o)).map(([id]) => id);
    // A command that passed as a whole had no failing test: every test failing now is the change's doing.
    if (before.exitCode === 0) out.broken = failingNow;
    else out.newFailing = failingNow;
  } else if (after.exitCode !== 0) {
    out.failsUnread = true;
    notes.push(`the tests fail after the change (${exit(after)})${before.exitCode === 0 ? ' and passed before it' : `, as they did before it (${exit(before)})`}`);
  }
  if (before.exitCode !== 0 && after.exitCode === 0) notes.push(`the test command failed before the change (${exit(before)}) and passes after it, but no test can be named as fixed without per-test results`);
  return out;
}

interface ChangeTests {
  reproduction: string[];
  /** Tests of the change's files that failed on the base code, also before the change, and pass with it. */
  fixedToo: string[];
  /** The change's tests that pass on the base code. */
  passOnBase: Set<string>;
  /** Pass on the base code, fail with the change. */
  broken: string[];
  /** Fail with the change and did not pass on the base code. */
  failing: string[];
  /** Of those, the ones that already failed before the change (in run a). */
  failedBefore: Set<string>;
  failsUnread: boolean;
}

/** (c) against (d): the change's own tests on the base code and with the change. */
function changeTests(input: EvidenceInput, notes: string[]): ChangeTests {
  const out: ChangeTests = { reproduction: [], fixedToo: [], passOnBase: new Set(), broken: [], failing: [], failedBefore: new Set(), failsUnread: false };
  const c = input.changeTestsOnBase;
  const d = input.changeTestsWithChange;
  if (!c || !d) {
    notes.push('the change adds or changes no test files, so none of its own tests can show the issue fixed');
    return out;
  }
  const onBase = outcomesOf(c);
  const withChange = outcomesOf(d);
  if (!onBase || !withChange || !c.run.parsed) {
    unreadChangeTests(c, d, notes, out);
    return out;
  }
  for (const [id, o] of onBase) if (o === 'passed') out.passOnBase.add(id);
  const was = outcomesOf(input.before);
  const reasons = failureReasons(c.run.format, c.output ?? '');
  const passedOnBaseToo: string[] = [];
  for (const [id, o] of withChange) {
    const base = onBase.get(id);
    if (bad(o)) {
      if (base === 'passed') out.broken.push(id);
      else out.failing.push(id);
      if (bad(was?.get(id))) out.failedBefore.add(id);
      continue;
    }
    if (o !== 'passed' || base === undefined || base === 'skipped') {
      if (o === 'passed' && base === undefined) notes.push(`${id} is not counted as a reproduction: it did not run on the base code${notLoaded(onBase, c)}`);
      continue;
    }
    if (base === 'passed') {
      // Only tests the change adds or changed the outcome of: where (c) ran the whole suite, the
      // untouched tests pass there too and say nothing.
      if (was?.get(id) !== 'passed') passedOnBaseToo.push(id);
      continue;
    }
    const judged = failureOnBase(id, base, c.run.format, reasons);
    if (!judged.counts) notes.push(`${id} is not counted as a reproduction: ${judged.why}`);
    else if (bad(was?.get(id))) out.fixedToo.push(id);
    else out.reproduction.push(id);
  }
  if (passedOnBaseToo.length > 0) notes.push(`${passedOnBaseToo.length} of the change's tests pass on the base code too, so they do not show the issue: ${list(passedOnBaseToo)}`);
  return out;
}

function notLoaded(onBase: Outcomes, c: TestRunRecord): string {
  if (!c.run.parsed) return '';
  const format = c.run.format;
  const files = [...onBase].filter(([id, o]) => bad(o) && isWholeFileResult(id, format)).map(([id]) => id);
  return files.length > 0 ? ` (on the base code ${list(files)} did not load: a syntax, import or build error)` : '';
}

function unreadChangeTests(c: TestRunRecord, d: TestRunRecord, notes: string[], out: ChangeTests): void {
  const why = [c, d].map((r, i) => `${i === 0 ? 'on the base code' : 'with the change'}: ${r.run.parsed ? 'no tests ran' : r.run.reason}`).join('; ');
  if (d.exitCode !== 0) {
    out.failsUnread = true;
    notes.push(`the change's own tests fail with the change (${exit(d)}); ${why}`);
    return;
  }
  const hint = c.exitCode !== 0 ? `they failed on the base code (${exit(c)}) and pass with the change, but` : 'they pass on the base code and with the change, and';
  notes.push(`the change's own tests: ${hint} their output gives no per-test results (${why}), so none is counted as a reproduction`);
}
