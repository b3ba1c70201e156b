import { lstat, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import { Sandbox, type SandboxOptions } from '../sandbox/sandbox.ts';
import { gitRun } from '../workspace/git.ts';
import type { EvalInstance } from './instance.ts';
import type { RepoCache } from './repo-source.ts';
import { buildTestCommand, detectFramework, lookupStatus, parseTestOutput, unreadOutputProblem, type TestStatusMap } from '../test-results/judging.ts';

export interface JudgeSandbox extends Pick<SandboxOptions, 'image' | 'workdir' | 'user' | 'allowRootImage' | 'memoryMb' | 'cpus' | 'pids' | 'diskMb' | 'maxLineBytes'> {
  testTimeoutSeconds: number;
}

export interface TestBucket {
  success: string[];
  failure: string[];
}

/** SWE-bench's per-instance report fields. */
export interface JudgeReport {
  patch_is_None: boolean;
  patch_exists: boolean;
  patch_successfully_applied: boolean;
  resolved: boolean;
  tests_status: { FAIL_TO_PASS: TestBucket; PASS_TO_PASS: TestBucket; FAIL_TO_FAIL: TestBucket; PASS_TO_FAIL: TestBucket };
}

export interface JudgeResult {
  report: JudgeReport;
  /** Set when the instance could not be judged (test_patch does not apply, setup failed, the sandbox broke). */
  error?: string;
  /** Why the model patch did not apply (git's words). */
  applyError?: string;
  /** Set when the test run printed no per-test result Lilypad can read: every test then counts as failed. */
  unreadOutput?: string;
  command: string | null;
  output: string;
  exitCode: number | null;
  timedOut: boolean;
  durationMs: number;
}

export interface JudgeInput {
  instance: EvalInstance;
  /** The patch under test; null when the attempt produced none. */
  patch: string | null;
  repos: RepoCache;
  docker: Docker;
  sandbox: JudgeSandbox;
  runId: string;
  labels: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** Run the tests even without a patch (gold validation: the tests must fail on the base commit). */
  runWithoutPatch?: boolean;
}

const OUTPUT_BYTES = 8 * 1024 * 1024;
const empty = (): TestBucket => ({ success: [], failure: [] });

export function emptyReport(patch: string | null): JudgeReport {
  return {
    patch_is_None: patch === null,
    patch_exists: patch !== null && patch.trim() !== '',
    patch_successfully_applied: false,
    resolved: false,
    tests_status: { FAIL_TO_PASS: empty(), PASS_TO_PASS: empty(), FAIL_TO_FAIL: empty(), PASS_TO_FAIL: empty() },
  };
}

/** The paths a unified diff touches (both sides of every `diff --git` header). */
export function patchPaths(patch: string): string[] {
  const out = new Set<string>();
  for (const m of patch.matchAll(/^diff --git a\/(\S+) b\/(\S+)$/gm)) {
    out.add(m[1]!);
    out.add(m[2]!);
  }
  return [...out];
}

async function applyPatch(dir: string, patch: string): Promise<string | null> {
  let last = '';
  // git apply as SWE-bench tries it first; then with less context and recounted hunks, which
  // takes patches whose line numbers drifted (a model that edited by hand).
  for (const extra of [[], ['--recount', '-C1']]) {
    const res = await gitRun(['apply', '--binary', '--whitespace=nowarn', ...extra, '-'], { cwd: dir, input: patch });
    if (res.code === 0) return null;
    last = res.stderr.trim();
  }
  return last || 'git apply failed';
}

/**
 * Judges one patch the way SWE-bench does: a fresh checkout of the base commit, the patch, the test
 * files the test patch touches put back to the base commit, the test patch; then, in a fresh
 * sandbox without network, the setup commands and the FAIL_TO_PASS and PASS_TO_PASS tests. Resolved
 * only if every one of them passes.
 */
/**
 * Removes `rel` under `root` without following a symbolic link on the way: the model's patch may
 * have turned any directory on the path into a link to anywhere on the eval host. A link (or a
 * file) in the way is itself removed, since it stands where the test patch must write.
 */
export async function removeInside(root: string, rel: string): Promise<void> {
  const parts = path.posix.normalize(rel).split('/').filter((x) => x !== '' && x !== '.');
  if (parts.length === 0 || parts.includes('..') || path.isAbsolute(rel)) return;
  let current = root;
  for (let i = 0; i < parts.length; i++) {
    current = path.join(current, parts[i]!);
    const st = await lstat(current).catch(() => null);
    if (!st) return;
    if (i === parts.length - 1 || !st.isDirectory()) {
      // rm never follows a link: it removes the link itself.
      await rm(current, { force: true, recursive: st.isDirectory() });
      return;
    }
  }
}

export async function judgePatch(input: JudgeInput): Promise<JudgeResult> {
  const { instance, patch, signal } = input;
  const started = Date.now();
  const report = emptyReport(patch);
  const result: JudgeResult = { report, command: null, output: '', exitCode: null, timedOut: false, durationMs: 0 };
  if (!report.patch_exists && !input.runWithoutPatch) {
    result.durationMs = Date.now() - started;
    return result;
  }
  const checkout = await input.repos.checkout(instance.repo, instance.base_commit);
  try {
    if (report.patch_exists) {
      const applyError = await applyPatch(checkout.dir, patch!);
      if (applyError) {
        result.applyError = applyError;
        return result;
      }
      report.patch_successfully_applied = true;
    }
    if (instance.test_patch.trim()) {
      for (const p of patchPaths(instance.test_patch)) {
        const atBase = await gitRun(['cat-file', '-e', `HEAD:${p}`], { cwd: checkout.dir });
        if (atBase.code === 0) await gitRun(['checkout', '-q', 'HEAD', '--', p], { cwd: checkout.dir });
        else await removeInside(checkout.dir, p);
      }
      const res = await gitRun(['apply', '--binary', '--whitespace=nowarn', '-'], { cwd: checkout.dir, input: instance.test_patch });
      if (res.code !== 0) {
        result.error = `the instance's test_patch does not apply: ${res.stderr.trim()}`;
        return result;
      }
    }
    if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
    await runTests(input, checkout.dir, result);
    return result;
  } finally {
    await checkout.dispose();
    result.durationMs = Date.now() - started;
  }
}

async function runTests(input: JudgeInput, dir: string, result: JudgeResult): Promise<void> {
  const { instance, signal } = input;
  const sandbox = await Sandbox.create(
    input.docker,
    { ...input.sandbox, network: 'none', runId: input.runId, workerId: os.hostname(), labels: input.labels },
    signal,
  );
  const stopWatching = sandbox.destroyOnAbort(signal);
  try {
    await sandbox.copyIn(dir);
    const exec = (command: string) =>
      sandbox.exec(['/bin/bash', '-c', '/bin/bash -lc "$0" 2>&1', command], {
        cwd: input.sandbox.workdir,
        timeoutSeconds: input.sandbox.testTimeoutSeconds,
        keepBytes: OUTPUT_BYTES,
        env: { PYTHONPYCACHEPREFIX: '/tmp/lilypad-eval-pycache' },
        what: 'the test command',
      });
    for (const command of instance.setup) {
      const res = await exec(command);
      if (res.timedOut || res.exitCode !== 0) {
        result.error = `the setup command \`${command}\` ${res.timedOut ? 'timed out' : `failed (exit ${res.exitCode})`}: ${res.stdout.toString('utf8').slice(-2000)}`;
        return;
      }
    }
    await sandbox.takeOver();
    const framework = instance.test_framework ?? detectFramework(instance.test_command);
    const ids = [...instance.FAIL_TO_PASS, ...instance.PASS_TO_PASS];
    const command = buildTestCommand(instance.test_command, framework, ids);
    result.command = command;
    const res = await exec(command);
    result.output = res.stdout.toString('utf8');
    result.exitCode = res.exitCode;
    result.timedOut = res.timedOut;
    const results = parseTestOutput(framework, result.output);
    const unread = unreadOutputProblem(command, framework, results, result.output, res.exitCode);
    if (unread) result.unreadOutput = unread;
    classify(instance, results, result.report);
  } catch (err) {
    if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
    result.error = `the tests could not run in the sandbox: ${(err as Error).message}`;
  } finally {
    stopWatching();
    await sandbox.destroy();
  }
}

/** Sorts every requested id into success or failure; an id the runner never reported failed. */
export function classify(instance: Pick<EvalInstance, 'FAIL_TO_PASS' | 'PASS_TO_PASS'>, results: TestStatusMap, report: JudgeReport): void {
  // As SWE-bench: a FAIL_TO_PASS test must pass; a PASS_TO_PASS test must not fail (skipped is not failing).
  for (const id of instance.FAIL_TO_PASS) {
    (lookupStatus(results, id) === 'passed' ? report.tests_status.FAIL_TO_PASS.success : report.tests_status.FAIL_TO_PASS.failure).push(id);
  }
  for (const id of instance.PASS_TO_PASS) {
    const s = lookupStatus(results, id);
    (s === 'passed' || s === 'skipped' ? report.tests_status.PASS_TO_PASS.success : report.tests_status.PASS_TO_PASS.failure).push(id);
  }
  report.resolved =
    report.patch_successfully_applied && report.tests_status.FAIL_TO_PASS.failure.length === 0 && report.tests_status.PASS_TO_PASS.failure.length === 0;
}
