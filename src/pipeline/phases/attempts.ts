import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { ModelClient } from '../../agent/model-client.ts';
import { buildUserMessage, SYSTEM_PROMPT } from '../../agent/prompt.ts';
import { JsonlTrajectory } from '../../agent/trajectory.ts';
import { imageAllowed } from '../../config/image-policy.ts';
import type { RepoConfig } from '../../config/repo-config.ts';
import { UserError } from '../failures.ts';
import type { RunPlan } from '../effective-config.ts';
import type { InstructionsSummary } from '../instructions.ts';
import type { ReproTests } from '../evidence-runs.ts';
import type { Reproduction } from '../reproduce.ts';
import type { RunContext } from '../run-context.ts';
import { perTestChanges, setupNotes, testCacheNotes } from '../run-report.ts';
import { runSandboxSession, type SandboxSessionInput, type SandboxSessionResult } from '../sandbox-session.ts';
import { bestOfK, type AttemptSummary } from '../best-of-k.ts';
import type { Ranking } from '../../evidence/rank.ts';
import type { TestOutcome } from '../../test-results/test-outcome.ts';

/** Time kept back from the agent for the tests on the change and publishing. */
const PUBLISH_RESERVE_S = 180;

/** What the run works on: the task text, and the checkout it starts from. */
export interface RunTask {
  title: string;
  body: string;
  /** Said in the run's warnings (what input hygiene removed, what did not fit). */
  warning?: string | undefined;
}

export interface RunCheckout {
  dir: string;
  baseCommit: string;
  headAfterSetup?: SandboxSessionInput['headAfterSetup'];
}

export interface SandboxRun {
  /** The session whose patch is published (with best of k: the chosen attempt's). */
  session: SandboxSessionResult;
  model: string;
  image: string;
  startedAt: number;
  /** Best of k (k > 1): every attempt, and why the chosen one was chosen. */
  attempts?: { summaries: AttemptSummary[]; ranking: Ranking; patches: Array<Buffer | null> };
  /** The reproduction run before the fix attempts (`reproduce: true`), and the tests it left. */
  reproduction?: Reproduction | null | undefined;
}

export interface AttemptsInput {
  config: RepoConfig;
  task: RunTask;
  /** The repository's instructions the task carries (null: none read). */
  instructions: InstructionsSummary | null;
  checkout: RunCheckout;
  /** Named on every container of the run (`owner/repo#N`, or the local run's repository). */
  subject: string;
  /** Asked right before each attempt's agent starts (the app checks that the issue text still holds). */
  beforeAgent?: (() => Promise<void>) | undefined;
  /** Each setup command's outcome as it finishes (the failing one included); with best of k, attempt 1's. */
  onSetupOutcome?: ((outcome: TestOutcome) => void) | undefined;
  /** A single attempt's sampling seed; with best of k, attempt N has seed N. */
  seed?: number | undefined;
  plan: RunPlan;
  /** Tests a reproduction run wrote before the fix attempts: each attempt is judged by them too. */
  reproTests?: ReproTests | null | undefined;
}

/**
 * Phase 3, the sandbox: setup through the egress proxy, the network cut, tests on the untouched
 * code, the agent on the task, the patch (as data), tests on the change; with `attempts: k`, k of
 * them in parallel sandboxes and one chosen (best-of-k.ts). The same for every kind of run. Every
 * step and the outcome go to the run's record as they happen.
 */
export async function runAttempts(ctx: RunContext, input: AttemptsInput): Promise<SandboxRun> {
  const { settings } = ctx;
  const { config, task } = input;
  await mkdir(ctx.outDir, { recursive: true });
  const trajectory = new JsonlTrajectory(path.join(ctx.outDir, 'trajectory.jsonl'), ctx.scanner(), (r) => ctx.recorder.step(r));
  const startedAt = Date.now();
  try {
    const client = modelClient(ctx);
    const model = await ctx.step('model', () => client.resolveModel(settings.model.name, ctx.signal));
    const image = allowedImage(ctx, config);
    // The repository may ask for less than the administrator allows, never more.
    const maxSteps = Math.min(config.max_steps, settings.limits.maxSteps);
    const testTimeoutSeconds = Math.min(config.test_timeout_minutes * 60, settings.limits.testTimeoutSeconds);
    const budgets = {
      maxSteps,
      maxContextTokens: settings.limits.maxContextTokens,
      maxTokensPerTurn: settings.limits.maxTokensPerTurn,
      maxWallSeconds: agentWallSeconds(ctx, config, testTimeoutSeconds),
      bashTimeoutCapSeconds: settings.limits.bashTimeoutCapSeconds,
      stuck: { repeats: config.stuck_repeats, idleSteps: config.stuck_idle_steps },
    };
    ctx.recorder.task({ system: SYSTEM_PROMPT, user: buildUserMessage(task.title, task.body) });
    ctx.recorder.config({ repoConfig: config, sources: input.plan.sources, origin: input.plan.origin, instructions: input.instructions, model, image, budgets, testTimeoutSeconds });
    const k = Math.min(config.attempts, settings.limits.maxAttempts);
    const run: RunShape = { k, model, image, client, budgets, testTimeoutSeconds, lastStatusAt: 0 };
    // Every attempt holds one of the sandbox slots from its container to its removal.
    const session = (attempt: number, sink: JsonlTrajectory, signal: AbortSignal, steps?: number) =>
      ctx.sandboxSlots.use(signal, () => runSandboxSession(sessionInput(ctx, input, steps ? { ...run, budgets: { ...run.budgets, maxSteps: steps } } : run, attempt, sink, signal)), () => ctx.log.info({ attempt, slots: ctx.sandboxSlots.size }, 'waiting for a free sandbox slot'));
    const chosen = k > 1 ? await bestOfK(ctx, k, trajectory, session, maxSteps) : { session: await session(1, trajectory, ctx.signal) };
    if (task.warning) chosen.session.agent.warnings.push(task.warning);
    recordTests(ctx, chosen.session);
    return { ...chosen, model, image, startedAt };
  } finally {
    await trajectory.close();
  }
}

/** What every attempt of one run shares. */
interface RunShape {
  k: number;
  model: string;
  image: string;
  client: ModelClient;
  budgets: SandboxSessionInput['budgets'];
  testTimeoutSeconds: number;
  /** When an agent step was last written to the progress (attempt 1 only). */
  lastStatusAt: number;
}

/** One attempt's sandbox session. Attempt 1 reports to the progress and the run record as it goes. */
function sessionInput(ctx: RunContext, input: AttemptsInput, run: RunShape, attempt: number, sink: JsonlTrajectory, signal: AbortSignal): SandboxSessionInput {
  const { settings } = ctx;
  const { config, task, plan } = input;
  return {
    docker: ctx.docker,
    checkoutDir: input.checkout.dir,
    baseCommit: input.checkout.baseCommit,
    headAfterSetup: input.checkout.headAfterSetup,
    sandbox: { ...settings.sandbox, image: run.image },
    runId: run.k > 1 ? `${ctx.runId}-a${attempt}` : ctx.runId,
    workerId: ctx.workerId,
    labels: { ...ctx.labels, 'dev.lilypad.issue': input.subject },
    setup: config.setup,
    setupInferred: plan.setupInferred,
    envPath: plan.envPath,
    keep: ctx.envCache ? { cache: plan.envRepo ? ctx.envCache.forRepo(plan.envRepo) : ctx.envCache, repoId: plan.repoKey, keyFiles: plan.keyFiles } : null,
    setupNetwork: ctx.setupNetwork,
    extraCaPem: ctx.extraCaPem,
    reproTests: input.reproTests,
    excludePaths: config.exclude_paths,
    setupTimeoutSeconds: Math.min(config.setup_timeout_minutes * 60, settings.limits.setupTimeoutSeconds),
    onSetupOutcome: attempt === 1 ? input.onSetupOutcome : undefined,
    testCommand: config.test,
    testRunner: plan.testRunner,
    ecosystem: plan.ecosystem,
    testTimeoutSeconds: run.testTimeoutSeconds,
    issue: { title: task.title, body: task.body },
    model: run.model,
    client: run.client,
    budgets: run.budgets,
    trajectory: sink,
    signal,
    seed: run.k > 1 ? attempt : input.seed,
    phase: async (name, fn) => {
      // Every attempt's agent starts only on a task that still holds; one that does not ends them all.
      if (name === 'agent') await input.beforeAgent?.();
      if (attempt > 1) return fn();
      if (name === 'tests_before' || name === 'tests_after') await ctx.progress.phase({ kind: 'testing', which: name === 'tests_before' ? 'before' : 'after' });
      if (name === 'agent') await ctx.progress.phase({ kind: 'agent', attempts: run.k });
      return ctx.step(name, fn);
    },
    onProgress: (p) => {
      if (attempt > 1 || Date.now() - run.lastStatusAt < settings.limits.statusIntervalMs) return;
      run.lastStatusAt = Date.now();
      ctx.progress.agentStep(p, run.budgets.maxSteps, run.k);
    },
  };
}

function modelClient(ctx: RunContext): ModelClient {
  const m = ctx.settings.model;
  return new ModelClient({ baseURL: m.baseURL, apiKey: m.apiKey, timeoutMs: m.timeoutMs, maxRetries: m.retries, retryBaseMs: m.retryBaseMs, maxResponseBytes: m.maxResponseBytes, settingNames: m.settingNames });
}

function allowedImage(ctx: RunContext, config: RepoConfig): string {
  const s = ctx.settings.sandbox;
  const image = config.image ?? s.defaultImage;
  if (imageAllowed(image, s.defaultImage, s.allowedImages)) return image;
  throw new UserError(
    `the sandbox image \`${image}\` named in \`.github/lilypad.yml\` is not allowed on this Lilypad installation.`,
    `use the default image (remove \`image:\`) or one that matches LILYPAD_ALLOWED_IMAGES (${s.allowedImages || 'empty: the default image only'}); ask the administrator to allow another.`,
  );
}

function recordTests(ctx: RunContext, session: SandboxSessionResult): void {
  const tests = session.tests;
  const changes = perTestChanges(tests?.verdicts ?? null);
  ctx.recorder.tests('before', tests?.before ?? null);
  ctx.recorder.tests('after', tests?.after ? { ...tests.after, ...(changes ? { changes: { ...changes, fixed: changes.fixed.slice(0, 200), broken: changes.broken.slice(0, 200) } } : {}) } : null, tests?.afterNotRun);
  for (const note of [...setupNotes(session.setup), ...testCacheNotes(tests)]) ctx.recorder.warning(note);
  for (const w of session.agent.warnings) ctx.recorder.warning(w);
}

/** The agent's wall clock: the configured budget, cut so that the whole run ends by its deadline. */
function agentWallSeconds(ctx: RunContext, config: RepoConfig, testTimeoutSeconds: number): number {
  const configured = Math.min(config.max_minutes * 60, ctx.settings.limits.maxWallSeconds);
  const left = Math.floor((ctx.deadlineAt - Date.now()) / 1000) - testTimeoutSeconds - PUBLISH_RESERVE_S;
  return Math.min(configured, Math.max(30, left));
}
