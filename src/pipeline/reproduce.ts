import path from 'node:path';
import { failureOnBase, failureReasons } from '../evidence/base-failures.ts';
import { splitPatch } from '../evidence/split-patch.ts';
import type { ReproTests } from './evidence-runs.ts';
import { withReproTests } from './published-patch.ts';
import type { AttemptsInput, SandboxRun } from './phases/attempts.ts';
import type { RunContext } from './run-context.ts';

/**
 * What the reproduction run is asked, appended to the issue: the only place where the task's
 * wording differs from the issue (issue 17 #2). Everything else about the run is Leaf's.
 */
export const REPRODUCE_REQUEST = [
  '---',
  '',
  'Do not fix this issue yet. Write a test that reproduces it: a new test, in the repository\'s own test style and place, that fails because of the problem described above and will pass once it is fixed. Change no other file. Run the test to see it fail, then stop.',
].join('\n');

export interface Reproduction {
  /** The reproduction run (its agent, patch and evidence). */
  run: SandboxRun;
  /** The tests kept for the fix attempts and the pull request; null: none could be kept (see `why`). */
  kept: ReproTests | null;
  why: string;
}

/**
 * `reproduce: true`: before the fix attempts, one run is asked to write a test that fails because
 * of the issue, and not to fix it. Its test files are kept only if a test in them fails on the base
 * code for a reason that can show the issue (an assertion, a wrong value or type; not a syntax,
 * import or name error: evidence/base-failures.ts). The fix attempts are then judged by them too.
 */
export async function reproduceIssue(ctx: RunContext, attempts: (ctx: RunContext, input: AttemptsInput) => Promise<SandboxRun>, input: AttemptsInput): Promise<Reproduction> {
  const reproCtx: RunContext = {
    ...ctx,
    runId: `${ctx.runId}-repro`,
    outDir: path.join(ctx.outDir, 'reproduce'),
    // Its steps are kept in its own trajectory file; the run's record keeps the fix attempts'.
    recorder: {
      task: () => undefined,
      config: () => undefined,
      step: () => undefined,
      tests: () => undefined,
      phase: (name, ms) => ctx.recorder.phase(`reproduce_${name}`, ms),
      warning: (text) => ctx.recorder.warning(text),
      finish: async () => undefined,
    },
  };
  const task = { ...input.task, body: input.task.body ? `${input.task.body}\n\n${REPRODUCE_REQUEST}` : REPRODUCE_REQUEST };
  const run = await ctx.step('reproduce', () => attempts(reproCtx, { ...input, task, config: { ...input.config, attempts: 1 }, seed: undefined, reproTests: null }));
  return { run, ...keptTests(run) };
}

function keptTests(run: SandboxRun): { kept: ReproTests | null; why: string } {
  const patch = run.session.patch?.diff;
  if (!patch || patch.length === 0) return { kept: null, why: 'the reproduction run wrote no file' };
  const split = splitPatch(patch);
  if (split.testFiles.length === 0) return { kept: null, why: 'the reproduction run wrote no test file' };
  const onBase = run.session.evidence?.changeTestsOnBase;
  if (!onBase) return { kept: null, why: 'its tests could not be run on the base code' };
  if (!onBase.run.parsed) return { kept: null, why: `its tests' results could not be read (${onBase.run.reason})` };
  const { format, results } = onBase.run;
  const reasons = failureReasons(format, onBase.output ?? '');
  const failing = results.filter((r) => r.outcome === 'failed' || r.outcome === 'error');
  const counted = failing.filter((r) => failureOnBase(r.id, r.outcome, format, reasons).counts).map((r) => r.id);
  if (counted.length === 0) {
    const why = failing.length === 0 ? 'its tests pass on the base code, so they do not show the issue' : 'its tests fail on the base code only with a syntax, import or name error, not for the reason the issue gives';
    return { kept: null, why };
  }
  return { kept: { patch: split.tests, files: split.testFiles, ids: counted }, why: `${counted.length} test(s) fail on the base code as the issue describes` };
}

/** The published change with the reproduction's test files added, unless the change wrote those files itself. */
export function withReproduction(patch: Buffer, reproduction: Reproduction | null | undefined): Buffer {
  return withReproTests(patch, reproduction?.kept ?? null);
}
