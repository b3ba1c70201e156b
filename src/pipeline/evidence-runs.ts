import { evidenceOf, type Evidence, type TestRunRecord } from '../evidence/verdict.ts';
import { selectTestsCommand } from '../evidence/select-tests.ts';
import { splitPatch, type SplitPatch } from '../evidence/split-patch.ts';
import { weakenedTests } from '../evidence/weakened.ts';
import type { Environment } from './environment.ts';
import { freshBaseOf } from './fresh-base.ts';
import { applyPatch, type PublishedPatch } from './published-patch.ts';
import type { SandboxSessionInput } from './sandbox-session.ts';
import { runTests, type TestRun } from './test-command.ts';

/** Tests a reproduction run wrote before the fix attempts (reproduce.ts): the fix attempts are judged by them too. */
export interface ReproTests {
  /** The test files as a patch on the base commit. */
  patch: Buffer;
  files: string[];
  /** The tests in them that failed on the base code for a reason that can show the issue. */
  ids: string[];
}

export interface EvidenceRuns {
  evidence: Evidence;
  /** The change's own test files and the command that ran just them (null: the change adds no test). */
  changeTests: { files: string[]; command: string } | null;
  /** The change's test files on the base code, as run (a reproduction run's test is judged by it). */
  changeTestsOnBase: TestRunRecord | null;
  /** Tests that pass in the agent's own sandbox and fail on the published change alone (verdict-check.ts). */
  disagreement?: SandboxDisagreement | undefined;
}

/** Where the agent's own sandbox and a fresh one with only the published change disagree. */
export interface SandboxDisagreement {
  /** Tests that fail on the published change in a fresh sandbox and pass in the agent's own. */
  tests: string[];
  /** The command that ran them in the agent's sandbox. */
  command: string;
  /** What the agent changed outside its published patch (its home, site-packages, ignored files, /tmp), by path. */
  outside: string[];
  /** How many more such paths there were beyond `outside`. */
  outsideMore: number;
}

/**
 * The evidence a change carries, computed by Lilypad, never by the model: the tests before and
 * after, and the change's own test files run twice on a fresh copy of the base code (once with the
 * tests alone, the fix reverted; once with the whole change), with the repository's runner,
 * selected by file. Weakened tests are read from the diff. The fresh copy is a sandbox of its own
 * in the state right after setup (fresh-base.ts), never the agent's. `patch` is what will be
 * published. See src/evidence/ for the rules.
 */
export async function gatherEvidence(input: SandboxSessionInput, env: Environment, patch: PublishedPatch, before: TestRun | null, after: TestRun): Promise<EvidenceRuns> {
  const weakened = weakenedTests(patch.diff);
  const split = withReproTests(splitPatch(patch.diff), input.reproTests ?? null);
  const runner = input.testRunner ?? null;
  let own: { onBase: TestRunRecord; withChange: TestRunRecord } | null = null;
  let changeTests: EvidenceRuns['changeTests'] = null;
  if (split.testFiles.length > 0 && input.testCommand) {
    const command = selectTestsCommand(runner, input.testCommand, { files: split.testFiles, ids: [] }) ?? input.testCommand;
    changeTests = { files: split.testFiles, command };
    own = await input.phase('evidence', () => runChangeTests(input, env, split, command));
  }
  const evidence = evidenceOf({
    before: before ? record(before) : { run: { parsed: false, reason: 'the tests on the untouched code did not run' }, exitCode: null },
    after: record(after),
    changeTestsOnBase: own?.onBase ?? null,
    changeTestsWithChange: own?.withChange ?? null,
    weakened,
  });
  return { evidence, changeTests, changeTestsOnBase: own?.onBase ?? null };
}

/**
 * The reproduction run's tests join the change's own, unless the change itself wrote those files
 * (then its version is the one judged).
 */
function withReproTests(split: SplitPatch<Buffer>, repro: ReproTests | null): SplitPatch<Buffer> {
  if (!repro || repro.files.some((f) => split.testFiles.includes(f) || split.codeFiles.includes(f))) return split;
  return { ...split, tests: Buffer.concat([repro.patch, split.tests]), testFiles: [...repro.files, ...split.testFiles] };
}

async function runChangeTests(input: SandboxSessionInput, env: Environment, split: SplitPatch<Buffer>, command: string): Promise<{ onBase: TestRunRecord; withChange: TestRunRecord }> {
  const fresh = await freshBaseOf(env).open('evidence');
  try {
    const box = fresh.sandbox;
    await applyPatch(box, split.tests, split.testFiles, input.baseCommit, "the change's tests");
    const onBase = await runTests(box, command, input.testRunner ?? null, input.testTimeoutSeconds);
    await box.takeOver();
    await applyPatch(box, split.code, split.codeFiles, input.baseCommit, 'the rest of the change');
    const withChange = await runTests(box, command, input.testRunner ?? null, input.testTimeoutSeconds);
    return { onBase: record(onBase), withChange: record(withChange) };
  } finally {
    await fresh.release();
  }
}

function record(run: TestRun): TestRunRecord {
  return { run: run.parsed, exitCode: run.outcome.exitCode, output: run.output };
}

