import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { parseableCommand, parseTestRun, type ParsedRun, type TestRunner } from '../test-results/index.ts';
import type { PerTestSummary, TestCounts, TestOutcome } from '../test-results/test-outcome.ts';
import { SANDBOX_GIT } from '../workspace/patch.ts';

/** What people read of a run's output. */
const TAIL_BYTES = 16 * 1024;
/** What the per-test parsers read: the end of the output, enough for thousands of tests' lines. */
const PARSE_BYTES = 8 * 1024 * 1024;
let runCounter = 0;

/** A test run read per test: the outcome, and every test's verdict where the output says it. */
export interface TestRun {
  outcome: TestOutcome;
  parsed: ParsedRun;
  /** The end of the output the parsers read (why a test failed is in it). */
  output: string;
}

/**
 * Runs the repository's tests with what makes the runner's output readable per test
 * (parseableCommand: pytest -rA, go test -json, ...), and reads every test's verdict. A runner whose
 * output cannot be read is judged by its exit code, and says so.
 */
export async function runTests(sandbox: Sandbox, command: string, runner: TestRunner | null, timeoutSeconds: number): Promise<TestRun> {
  const full = await runTestCommand(sandbox, parseableCommand(runner, command), timeoutSeconds, { keepBytes: PARSE_BYTES });
  const parsed = full.outcome === 'error' ? ({ parsed: false, reason: 'the test command could not run' } as const) : parseTestRun(runner, full.outputTail);
  const outcome: TestOutcome = { ...full, command, outputTail: full.outputTail.slice(-TAIL_BYTES), perTest: summarise(parsed) };
  return { outcome, parsed, output: full.outputTail };
}

function summarise(run: ParsedRun): PerTestSummary {
  if (!run.parsed) return { parsed: false, reason: run.reason };
  const n = { passed: 0, failed: 0, skipped: 0, error: 0 };
  for (const r of run.results) n[r.outcome]++;
  return { parsed: true, format: run.format, ...n };
}

/** Runs a command of the repository's in the sandbox (never shown to the model); keeps the end of its output. */
export async function runTestCommand(
  sandbox: Sandbox,
  command: string,
  timeoutSeconds: number,
  opts: { env?: Record<string, string>; what?: string; keepBytes?: number } = {},
): Promise<TestOutcome> {
  const started = Date.now();
  const keep = opts.keepBytes ?? TAIL_BYTES;
  try {
    // A tail is what matters for test output: run through a wrapper that keeps only the end.
    const res = await sandbox.exec(['/bin/bash', '-c', `( ${'/bin/bash -lc "$0"'} ) 2>&1 | tail -c ${keep}; exit \${PIPESTATUS[0]}`, command], {
      cwd: sandbox.options.workdir,
      timeoutSeconds,
      keepBytes: keep * 2,
      // Python checks cached bytecode by source mtime (whole seconds) and size: an edit within the
      // same second that keeps the size would run stale code. A fresh cache per run rules that out
      // and keeps __pycache__ out of the working tree.
      env: { ...opts.env, PYTHONPYCACHEPREFIX: `/tmp/lilypad-pycache-${process.pid}-${++runCounter}` },
      what: opts.what ?? 'the test command',
    });
    const output = res.stdout.toString('utf8');
    return {
      command,
      outcome: res.timedOut ? 'timed_out' : res.exitCode === 0 ? 'passed' : 'failed',
      exitCode: res.timedOut ? null : res.exitCode,
      durationMs: Date.now() - started,
      counts: parseTestCounts(output),
      outputTail: output,
    };
  } catch (err) {
    // The sandbox is gone (a deadline, a killed toolbox, the disk cap): that ends the run, with why.
    if (sandbox.failure || err instanceof SandboxError) throw err;
    return { command, outcome: 'error', exitCode: null, durationMs: Date.now() - started, counts: null, outputTail: (err as Error).message };
  }
}

/** Best-effort counts from the summary lines of common runners (pytest, jest, node:test, mocha, go). */
export function parseTestCounts(output: string): TestCounts | null {
  const counts: TestCounts = {};
  const lines = output.split('\n').slice(-60).join('\n');
  const grab = (re: RegExp): number | undefined => {
    let last: number | undefined;
    for (const m of lines.matchAll(re)) last = Number(m[1]);
    return last;
  };
  const passed = grab(/(\d+) (?:passed|passing)\b/g) ?? grab(/^# pass (\d+)/gm) ?? grab(/^ℹ pass (\d+)/gm);
  const failed = grab(/(\d+) (?:failed|failing)\b/g) ?? grab(/^# fail (\d+)/gm) ?? grab(/^ℹ fail (\d+)/gm);
  const skipped = grab(/(\d+) (?:skipped|pending)\b/g) ?? grab(/^# skip (\d+)/gm) ?? grab(/^ℹ skipped (\d+)/gm);
  const errors = grab(/(\d+) errors?\b/g);
  if (passed !== undefined) counts.passed = passed;
  if (failed !== undefined) counts.failed = failed;
  if (skipped !== undefined) counts.skipped = skipped;
  if (errors !== undefined) counts.errors = errors;
  return Object.keys(counts).length > 0 ? counts : null;
}

/**
 * Puts the working tree back the way it was before a test run, so files a test run created (caches,
 * reports) never end up in the patch. Files that were already changed or untracked stay as they are.
 */
export async function snapshotWorktree(sandbox: Sandbox): Promise<() => Promise<void>> {
  const list = [...SANDBOX_GIT, 'ls-files', '-z', '-m', '-d', '-o', '--exclude-standard'];
  const before = await sandbox.exec(list, { cwd: sandbox.options.workdir, timeoutSeconds: 120 });
  const known = new Set(before.stdout.toString('utf8').split('\0').filter(Boolean));
  return async () => {
    const after = await sandbox.exec(list, { cwd: sandbox.options.workdir, timeoutSeconds: 120 });
    const changed = [...new Set(after.stdout.toString('utf8').split('\0').filter(Boolean))].filter((p) => !known.has(p));
    if (changed.length === 0) return;
    const script =
      'for p in "$@"; do if git cat-file -e "HEAD:$p" 2>/dev/null; then git -c core.hooksPath=/dev/null checkout -q HEAD -- "$p"; else rm -rf -- "$p"; fi; done';
    await sandbox.exec(['/bin/bash', '-c', script, 'restore', ...changed], { cwd: sandbox.options.workdir, timeoutSeconds: 120 });
  };
}
