import { evidenceOf, type Evidence, type TestRunRecord } from '../evidence/verdict.ts';
import { selectTestsCommand } from '../evidence/select-tests.ts';
import { splitPatch, type SplitPatch } from '../evidence/split-patch.ts';
import { weakenedTests } from '../evidence/weakened.ts';
import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { SANDBOX_GIT, type ExtractedPatch } from '../workspace/patch.ts';
import { writeSandboxFile } from '../workspace/sandbox-file.ts';
import { moveToHead } from '../workspace/setup-base.ts';
import { checkoutInKept, type Environment, type LiveSandbox } from './environment.ts';
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
}

/**
 * The evidence a change carries, computed by Lilypad, never by the model: the tests before and
 * after, and the change's own test files run twice on a fresh copy of the base code (once with the
 * tests alone, the fix reverted; once with the whole change), with the repository's runner,
 * selected by file. Weakened tests are read from the diff. The fresh copy is a sandbox of its own
 * from the kept environment, or, without one, the agent's sandbox put back to the base (every
 * process the agent left killed first). See src/evidence/ for the rules.
 */
export async function gatherEvidence(input: SandboxSessionInput, env: Environment, patch: ExtractedPatch, before: TestRun | null, after: TestRun): Promise<EvidenceRuns> {
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

async function runChangeTests(input: SandboxSessionInput, env: Environment, split: { tests: Buffer; code: Buffer }, command: string): Promise<{ onBase: TestRunRecord; withChange: TestRunRecord }> {
  const fresh = await freshBase(input, env);
  try {
    const box = fresh.sandbox;
    await applyInSandbox(box, split.tests, "the change's tests");
    const onBase = await runTests(box, command, input.testRunner ?? null, input.testTimeoutSeconds);
    await box.takeOver();
    if (split.code.length > 0) await applyInSandbox(box, split.code, 'the rest of the change');
    const withChange = await runTests(box, command, input.testRunner ?? null, input.testTimeoutSeconds);
    return { onBase: record(onBase), withChange: record(withChange) };
  } finally {
    await fresh.release();
  }
}

/** A worktree at the agent's starting point, with setup's work in place and nothing of the agent's. */
async function freshBase(input: SandboxSessionInput, env: Environment): Promise<LiveSandbox> {
  if (env.kept) {
    const live = await checkoutInKept({ ...input, runId: `${input.runId}-evidence` }, env.kept.image);
    await live.sandbox.takeOver();
    if (input.headAfterSetup) await moveToHead(live.sandbox, input.headAfterSetup.setupCommit, input.baseCommit, input.headAfterSetup.branch);
    return live;
  }
  // The agent's sandbox, put back: its processes killed, tracked files as after setup, its new files gone.
  const box = env.sandbox;
  await box.takeOver();
  const state = env.setupState?.commit ?? input.baseCommit;
  await must(box, 'putting the worktree back to the base', [...SANDBOX_GIT, 'reset', '-q', '--hard', state]);
  await must(box, 'removing the files the agent added', [...SANDBOX_GIT, 'clean', '-q', '-f', '-d']);
  return { sandbox: box, release: async () => undefined };
}

async function applyInSandbox(sandbox: Sandbox, patch: Buffer, what: string): Promise<void> {
  if (patch.length === 0) return;
  const file = await writeSandboxFile(sandbox, patch, what);
  try {
    await must(sandbox, `applying ${what}`, [...SANDBOX_GIT, 'apply', '--whitespace=nowarn', '--', file]);
  } finally {
    await sandbox.exec(['rm', '-f', '--', file], { timeoutSeconds: 30 });
  }
}

async function must(sandbox: Sandbox, what: string, argv: string[]): Promise<void> {
  const res = await sandbox.exec(argv, { cwd: sandbox.options.workdir, timeoutSeconds: 300 });
  if (res.exitCode !== 0) throw new SandboxError(`${what} failed in the sandbox: ${res.stderr.toString().trim() || `exit ${res.exitCode}`}`);
}

function record(run: TestRun): TestRunRecord {
  return { run: run.parsed, exitCode: run.outcome.exitCode, output: run.output };
}

