import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { TestCounts, TestOutcome } from '../test-results/test-outcome.ts';
import { SANDBOX_GIT } from '../workspace/patch.ts';

const TAIL_BYTES = 16 * 1024;
let runCounter = 0;

/** Runs the repository's test command in the sandbox (never shown to the model). */
export async function runTestCommand(
  sandbox: Sandbox,
  command: string,
  timeoutSeconds: number,
  opts: { env?: Record<string, string>; what?: string } = {},
): Promise<TestOutcome> {
  const started = Date.now();
  try {
    // A tail is what matters for test output: run through a wrapper that keeps only the end.
    const res = await sandbox.exec(['/bin/bash', '-c', `( ${'/bin/bash -lc "$0"'} ) 2>&1 | tail -c ${TAIL_BYTES}; exit \${PIPESTATUS[0]}`, command], {
      cwd: sandbox.options.workdir,
      timeoutSeconds,
      keepBytes: TAIL_BYTES * 2,
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
