import type { RepoConfig } from '../config/repo-config.ts';
import { quoteUntrusted } from '../github/pull-request-body.ts';
import { CancelledError } from '../shared/cancel.ts';
import type { PreparedChange } from '../workspace/publish.ts';
import type { RunPlan } from './effective-config.ts';
import type { RunOutcome } from './outcome.ts';
import { refuseSecrets, takeChange, type ChangeInput } from './phases/change.ts';
import { runAttempts, type AttemptsInput, type RunCheckout, type RunTask, type SandboxRun } from './phases/attempts.ts';
import { withInstructions } from './instructions.ts';
import { reproduceIssue, withReproduction } from './reproduce.ts';
import { releaseRun, type RunContext } from './run-context.ts';
import { StaleTriggerError } from './validate-trigger.ts';

/** What a run works on, as its kind prepared it (phases 1 and 2: validate, workspace). */
export interface PreparedRun {
  config: RepoConfig;
  task: RunTask;
  checkout: RunCheckout;
  /** A git repository holding the base commit; the change is applied to a fresh clone of it. */
  source: string;
  /** How setup and tests are treated (where they came from, the kept environment's key files, the runner). */
  plan: RunPlan;
  /** Names the run on its containers (`owner/repo#N`, a local repository's path, an eval instance). */
  subject: string;
  /** The commit the change becomes. */
  commit: ChangeInput['commit'];
  /** Asked right before each attempt's agent starts; throws StaleTriggerError when the task no longer holds. */
  beforeAgent?: (() => Promise<void>) | undefined;
  onSetupOutcome?: AttemptsInput['onSetupOutcome'];
  /** The sampling seed of a single attempt (best of k gives attempt N the seed N). */
  seed?: number | undefined;
  /** Where the repository's instructions for agents are read: a git repository and the base commit (null: not read). */
  instructionsAt: { gitDir: string; commit: string } | null;
}

/** The work done, handed to the publisher: the sandbox run, the agent's patch and the filtered change. */
export interface FinishedWork {
  run: SandboxRun;
  patch: Buffer;
  change: PreparedChange;
}

/**
 * What differs between an issue job, a follow-up, `lilypad run` and `lilypad eval`: where the task
 * and the checkout come from, and where the change goes (a pull request, a commit on top of one,
 * files on disk, an eval prediction). Everything else is the spine's, the same for all four.
 */
export interface RunPlug<P extends PreparedRun = PreparedRun> {
  /** An earlier copy of this run already published for its trigger (the app's publish record). */
  alreadyDone?(ctx: RunContext): Promise<RunOutcome | null>;
  /** A run with no agent: it publishes a change an earlier run kept (`/lilypad publish`); null: a normal run. */
  publishKept?(ctx: RunContext, stages: SpineStages): Promise<RunOutcome | null>;
  prepare(ctx: RunContext): Promise<P>;
  publish(ctx: RunContext, prepared: P, work: FinishedWork): Promise<RunOutcome>;
  /** Told when a run ends without a change to publish (a local run still writes its files). */
  nothingToPublish?(ctx: RunContext, prepared: P, run: SandboxRun): Promise<void>;
}

/** The two phases that need Docker and host git; tests replace them with fakes. */
export interface SpineStages {
  attempts(ctx: RunContext, input: AttemptsInput): Promise<SandboxRun>;
  change(ctx: RunContext, input: ChangeInput): Promise<PreparedChange>;
}

export const REAL_STAGES: SpineStages = { attempts: runAttempts, change: takeChange };

/** Exit reasons that mean the agent did not finish: its change is published as incomplete. */
export const BUDGET_EXITS: ReadonlySet<string> = new Set(['max_turns', 'max_context_len', 'max_tokens_per_turn', 'max_time', 'llm_query_error', 'tool_error', 'stuck']);

/**
 * The one spine of every run:
 *   0.   a change an earlier run kept, published without an agent (`/lilypad publish`), if asked
 *   1-2. prepare   the trigger still holds, the configuration, the task and the checkout (the kind's)
 *   3.   sandbox   setup, tests before, the agent (one attempt or best of k), the patch, tests after
 *   4.   change    the patch applied to a fresh clone, filtered, scanned for secrets
 *   5.   publish   a pull request, a commit on one, files on disk, a prediction (the kind's)
 * and the outcome, which the caller writes (outcome.ts). Whatever happens, what the run holds is
 * released. A trigger that stopped holding ends the run as stale; other failures are thrown, for
 * the caller's verdict (failures.ts).
 */
export async function runSpine<P extends PreparedRun>(ctx: RunContext, plug: RunPlug<P>, stages: SpineStages = REAL_STAGES): Promise<RunOutcome> {
  try {
    const done = await plug.alreadyDone?.(ctx);
    if (done) return done;
    const kept = await plug.publishKept?.(ctx, stages);
    if (kept) return kept;
    const prepared = await plug.prepare(ctx);
    const { task, instructions } = prepared.instructionsAt ? await withInstructions(ctx, prepared.task, prepared.instructionsAt, prepared.config.instructions) : { task: prepared.task, instructions: null };
    const input: AttemptsInput = { config: prepared.config, task, instructions, checkout: prepared.checkout, subject: prepared.subject, beforeAgent: prepared.beforeAgent, onSetupOutcome: prepared.onSetupOutcome, seed: prepared.seed, plan: prepared.plan };
    // `reproduce: true`: a test that shows the issue first; the fix attempts are judged by it too.
    const reproduction = prepared.config.reproduce ? await reproduceIssue(ctx, stages.attempts, input) : null;
    const run = await stages.attempts(ctx, { ...input, reproTests: reproduction?.kept ?? null });
    run.reproduction = reproduction;
    const agent = run.session.agent;
    if (agent.exitReason === 'cancelled') throw new CancelledError();
    const patch = withReproduction(run.session.patch?.diff ?? Buffer.alloc(0), reproduction);
    if (patch.length === 0) return await nothing(ctx, plug, prepared, run, { result: 'no_change', why: noPatchWhy(ctx, run), exitReason: agent.exitReason });
    const change = await stages.change(ctx, { source: prepared.source, baseCommit: prepared.checkout.baseCommit, patch, excludePaths: prepared.config.exclude_paths, commit: prepared.commit });
    if (!change.hasChanges) {
      const why = `every file the agent changed is left out of pull requests: ${change.dropped.map((d) => `\`${d.path}\` (${d.reason})`).join('; ')}.`;
      return await nothing(ctx, plug, prepared, run, { result: 'no_change', why, exitReason: agent.exitReason, diff: patch });
    }
    refuseSecrets(ctx.scanner(), patch, []);
    return await plug.publish(ctx, prepared, { run, patch, change });
  } catch (err) {
    if (err instanceof StaleTriggerError) return { result: 'stale', why: err.message };
    throw err;
  } finally {
    await releaseRun(ctx);
  }
}

async function nothing<P extends PreparedRun>(ctx: RunContext, plug: RunPlug<P>, prepared: P, run: SandboxRun, outcome: RunOutcome): Promise<RunOutcome> {
  await plug.nothingToPublish?.(ctx, prepared, run);
  return outcome;
}

/** Why a run left no patch, in words for the person who asked. */
export function noPatchWhy(ctx: RunContext, run: SandboxRun): string {
  const agent = run.session.agent;
  return agent.exitReason === 'agent'
    ? `the agent finished without changing any file. Its last words: ${quoteLine(quoteUntrusted(ctx.scanner().redact(agent.finalAnswer)))}`
    : `the run ended (\`${agent.exitReason}\`${agent.error ? `: ${agent.error}` : ''}) before a change could be taken from the sandbox.`;
}

function quoteLine(text: string): string {
  const one = text.replace(/\s+/g, ' ').trim().slice(0, 300);
  return one ? `“${one}”` : '(none)';
}
