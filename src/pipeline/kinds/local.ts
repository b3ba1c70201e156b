import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { prepareIssue } from '../../agent/prompt.ts';
import { directoryReader } from '../../inference/index.ts';
import { changeDiff } from '../../workspace/publish.ts';
import type { LocalCheckout } from '../../workspace/local-clone.ts';
import { commitMessage } from '../phases/change.ts';
import { effectiveConfig, runPlanOf, type ConfigOverrides, type EffectiveConfig, type RunPlan } from '../effective-config.ts';
import type { RunOutcome } from '../outcome.ts';
import type { InstructionsSummary } from '../instructions.ts';
import type { SandboxRun } from '../phases/attempts.ts';
import { BUDGET_EXITS, type FinishedWork, type PreparedRun, type RunPlug } from '../spine.ts';
import type { TestOutcome } from '../../test-results/test-outcome.ts';

/** What `lilypad run` and `lilypad eval` say over the repository's own `.github/lilypad.yml`. */
export interface LocalOverrides extends ConfigOverrides {
  attempts?: number | undefined;
  maxSteps?: number | undefined;
  /** The agent's wall clock in seconds. */
  maxSeconds?: number | undefined;
  /** The sampling seed of a single attempt (eval's attempt N of k samples as the app's attempt N does). */
  seed?: number | undefined;
  /** A reproduction run first, whatever the repository's configuration says (eval measures both). */
  reproduce?: boolean | undefined;
}

export interface LocalTask {
  title: string;
  body: string;
  /** How the code is obtained: a clone of the user's repository's HEAD, or eval's checkout of an instance's base commit. */
  checkout: () => Promise<LocalCheckout>;
  overrides: LocalOverrides;
  /** Shown on the run's containers. */
  subject: string;
  /** Names the repository among kept environments. */
  repoKey: string;
  /** Whether the repository's instructions for agents (AGENTS.md) go with the task (eval measures both). */
  instructions: boolean;
}

export interface LocalPrepared extends PreparedRun {
  effective: EffectiveConfig;
  sourceDirty: boolean;
}

/** What a local run learns as it goes, for its result.json. */
export interface LocalFacts {
  baseCommit: string | null;
  effective: EffectiveConfig | null;
  setup: TestOutcome[];
  run: SandboxRun | null;
  /** What was published (the filtered change), as written to patch.diff. */
  published: Buffer | null;
  plan: RunPlan | null;
  instructions: InstructionsSummary | null;
  /** The files the published change touches. */
  files: string[];
  dropped: Array<{ path: string; reason: string }>;
  warnings: string[];
}

/**
 * `lilypad run` and `lilypad eval`: the task is given, the checkout is a fresh clone at one commit,
 * the repository's `.github/lilypad.yml` applies as it would in the app (under the overrides), and
 * the change goes to disk: patch.diff holds exactly what the app would publish.
 */
export function localPlug(task: LocalTask, facts: LocalFacts): RunPlug<LocalPrepared> {
  return {
    async prepare(ctx) {
      const checkout = await ctx.step('clone', task.checkout);
      ctx.cleanups.push(() => checkout.dispose());
      facts.baseCommit = checkout.baseCommit;
      if (checkout.sourceDirty) facts.warnings.push('the repository has uncommitted changes; the run used its last commit (HEAD) only');
      const effective = await effectiveConfig(directoryReader(checkout.dir), task.overrides);
      facts.effective = effective;
      facts.plan = runPlanOf(effective, task.repoKey);
      const config = applyOverrides(effective.config, task.overrides);
      const issue = prepareIssue(task.title, task.body);
      return {
        config,
        effective,
        plan: facts.plan,
        sourceDirty: checkout.sourceDirty,
        task: issue,
        checkout: { dir: checkout.dir, baseCommit: checkout.baseCommit },
        source: checkout.dir,
        instructionsAt: task.instructions ? { gitDir: checkout.dir, commit: checkout.baseCommit } : null,
        subject: task.subject,
        commit: { message: commitMessage(issue.title, 'Drafted by Lilypad', false), author: { name: 'Lilypad', email: 'lilypad@localhost' } },
        onSetupOutcome: (o) => facts.setup.push(o),
        seed: task.overrides.seed,
      };
    },
    async publish(ctx, _prepared, work: FinishedWork): Promise<RunOutcome> {
      facts.dropped = work.change.dropped;
      facts.files = work.change.files.map((f) => f.path);
      const diff = await changeDiff(work.change);
      facts.published = diff;
      await writeFile(path.join(ctx.outDir, 'patch.diff'), diff);
      const exitReason = work.run.session.agent.exitReason;
      return { result: 'patch', exitReason, incomplete: BUDGET_EXITS.has(exitReason), diff };
    },
    async nothingToPublish(ctx) {
      await writeFile(path.join(ctx.outDir, 'patch.diff'), Buffer.alloc(0));
    },
  };
}

/** The command line is the administrator of a local run: it may raise the limits the file sets. */
function applyOverrides(config: EffectiveConfig['config'], o: LocalOverrides): EffectiveConfig['config'] {
  return {
    ...config,
    ...(o.attempts !== undefined ? { attempts: o.attempts } : {}),
    ...(o.maxSteps !== undefined ? { max_steps: o.maxSteps } : {}),
    ...(o.maxSeconds !== undefined ? { max_minutes: Math.max(1, Math.ceil(o.maxSeconds / 60)) } : {}),
    ...(o.reproduce !== undefined ? { reproduce: o.reproduce } : {}),
  };
}
