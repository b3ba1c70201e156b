import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ModelClient } from '../../agent/model-client.ts';
import { buildUserMessage, SYSTEM_PROMPT } from '../../agent/prompt.ts';
import { JsonlTrajectory } from '../../agent/trajectory.ts';
import { imageAllowed } from '../../config/image-policy.ts';
import type { RepoConfig } from '../../config/repo-config.ts';
import { UserError } from '../failures.ts';
import type { JobContext } from '../job-context.ts';
import { runSandboxSession, type SandboxSessionInput, type SandboxSessionResult } from '../sandbox-session.ts';
import { selectAttempt, type Candidate, type Selection } from '../select-attempt.ts';
import { testWord } from '../../github/revisions.ts';
import { CancelledError, reasonText } from '../../shared/cancel.ts';
import { StaleTriggerError } from '../validate-trigger.ts';
import { recheckPinnedText } from './validate.ts';

/** Time kept back from the agent for the tests on the change and publishing. */
const PUBLISH_RESERVE_S = 180;

export interface SandboxRun {
  /** The session whose patch is published (with best of k: the chosen attempt's). */
  session: SandboxSessionResult;
  model: string;
  image: string;
  startedAt: number;
  /** Best of k (k > 1): every attempt, and why the chosen one was chosen. */
  attempts?: { summaries: AttemptSummary[]; selection: Selection };
}

export interface AttemptSummary {
  /** 1-based. */
  attempt: number;
  exitReason: string;
  testsAfter: string;
  steps: number;
  tokens: number;
  changedFiles: number;
  chosen: boolean;
  note: string;
}

/**
 * Phase 3, sandbox: setup through the egress proxy, the network cut, tests on the untouched code,
 * the agent on `task`, the patch (as data), tests on the change. Every step and the outcome go to
 * the run's record for the run pages as they happen.
 */
export async function runInSandbox(ctx: JobContext, config: RepoConfig, task: { title: string; body: string; warning?: string | undefined }, checkout: { dir: string; baseCommit: string; headAfterSetup?: SandboxSessionInput['headAfterSetup'] }): Promise<SandboxRun> {
  const { deps, job, status } = ctx;
  const recorder = deps.recorder;
  const outDir = path.join(deps.env.LILYPAD_DATA_DIR, 'runs', ctx.runId);
  await mkdir(outDir, { recursive: true });
  const trajectory = new JsonlTrajectory(path.join(outDir, 'trajectory.jsonl'), ctx.scanner(), (r) => recorder.step(r));
  const startedAt = Date.now();
  try {
    const client = new ModelClient({
      baseURL: deps.env.OPENAI_BASE_URL,
      apiKey: deps.env.OPENAI_API_KEY,
      timeoutMs: deps.env.LILYPAD_MODEL_TIMEOUT_SECONDS * 1000,
      maxRetries: deps.env.LILYPAD_MODEL_RETRIES,
      retryBaseMs: deps.env.LILYPAD_MODEL_RETRY_BASE_MS,
      maxResponseBytes: deps.env.LILYPAD_MODEL_MAX_RESPONSE_MB * 1024 * 1024,
    });
    const model = await ctx.step('model', () => client.resolveModel(deps.env.LILYPAD_MODEL, ctx.signal));
    const image = config.image ?? deps.env.LILYPAD_SANDBOX_IMAGE;
    if (!imageAllowed(image, deps.env.LILYPAD_SANDBOX_IMAGE, deps.env.LILYPAD_ALLOWED_IMAGES)) {
      throw new UserError(
        `the sandbox image \`${image}\` named in \`.github/lilypad.yml\` is not allowed on this Lilypad installation.`,
        `use the default image (remove \`image:\`) or one that matches LILYPAD_ALLOWED_IMAGES (${deps.env.LILYPAD_ALLOWED_IMAGES || 'empty: the default image only'}); ask the administrator to allow another.`,
      );
    }
    // The repository may ask for less than the administrator allows, never more.
    const maxSteps = Math.min(config.max_steps, deps.env.LILYPAD_MAX_STEPS);
    const testTimeoutSeconds = Math.min(config.test_timeout_minutes * 60, deps.env.LILYPAD_TEST_TIMEOUT_SECONDS);
    const budgets = {
      maxSteps,
      maxContextTokens: deps.env.LILYPAD_MAX_CONTEXT_TOKENS,
      maxTokensPerTurn: deps.env.LILYPAD_MAX_TOKENS_PER_TURN,
      maxWallSeconds: agentWallSeconds(ctx, config, testTimeoutSeconds),
      bashTimeoutCapSeconds: deps.env.LILYPAD_BASH_TIMEOUT_CAP_SECONDS,
    };
    recorder.task({ system: SYSTEM_PROMPT, user: buildUserMessage(task.title, task.body) });
    recorder.config({ repoConfig: config, model, image, budgets, testTimeoutSeconds });
    let lastStatusAt = 0;
    const attempts = Math.min(config.attempts, deps.env.LILYPAD_MAX_ATTEMPTS);
    // One attempt reports to the status and the run page as it goes; with best of k, the first.
    // Every attempt holds one of the worker's sandbox slots from its container to its removal.
    const session = (attempt: number, sink: JsonlTrajectory, signal: AbortSignal) =>
      deps.sandboxSlots.use(signal, () => runSandboxSession({
        docker: deps.docker,
        checkoutDir: checkout.dir,
        baseCommit: checkout.baseCommit,
        headAfterSetup: checkout.headAfterSetup,
        sandbox: {
          image,
          workdir: deps.env.LILYPAD_SANDBOX_WORKDIR,
          user: deps.env.LILYPAD_SANDBOX_USER,
          allowRootImage: deps.env.LILYPAD_ALLOW_ROOT_IMAGES,
          memoryMb: deps.env.LILYPAD_SANDBOX_MEMORY_MB,
          cpus: deps.env.LILYPAD_SANDBOX_CPUS,
          pids: deps.env.LILYPAD_SANDBOX_PIDS,
          diskMb: deps.env.LILYPAD_SANDBOX_DISK_MB,
          maxLineBytes: deps.env.LILYPAD_TOOLBOX_MAX_LINE_MB * 1024 * 1024,
        },
        runId: attempts > 1 ? `${ctx.runId}-a${attempt}` : ctx.runId,
        workerId: deps.workerId,
        labels: { ...deps.labels, 'dev.lilypad.issue': `${job.owner}/${job.repo}#${job.issueNumber}` },
        setup: config.setup,
        setupNetwork: deps.setupNetwork,
        setupTimeoutSeconds: Math.min(config.setup_timeout_minutes * 60, deps.env.LILYPAD_SETUP_TIMEOUT_SECONDS),
        testCommand: config.test,
        testTimeoutSeconds,
        issue: { title: task.title, body: task.body },
        model,
        client,
        budgets,
        trajectory: sink,
        signal,
        ...(attempts > 1 ? { seed: attempt } : {}),
        phase: async (name, fn) => {
          // Every attempt's agent starts only on the text as pinned; a stale text ends all of them (bestOfK).
          if (attempt > 1) {
            if (name === 'agent') await recheckPinnedText(ctx);
            return fn();
          }
          if (name === 'tests_before' || name === 'tests_after') await status.phase({ state: 'testing', which: name === 'tests_before' ? 'before' : 'after' });
          if (name === 'agent') {
            await recheckPinnedText(ctx);
            await status.phase({ state: 'running', step: 0, phase: attempts > 1 ? `the agent is starting (${attempts} attempts in parallel)` : 'the agent is starting' });
          }
          return ctx.step(name, fn);
        },
        onProgress: (p) => {
          if (attempt > 1 || Date.now() - lastStatusAt < deps.env.LILYPAD_STATUS_INTERVAL_MS) return;
          lastStatusAt = Date.now();
          status.progress({ state: 'running', step: p.step, phase: `agent step ${p.step} of at most ${maxSteps}${attempts > 1 ? ` (attempt 1 of ${attempts})` : ''}` });
        },
      }), () => ctx.log.info({ attempt, slots: deps.sandboxSlots.size }, 'waiting for a free sandbox slot on this worker'));
    if (attempts > 1) {
      const best = await bestOfK(ctx, attempts, outDir, trajectory, session);
      if (task.warning) best.session.agent.warnings.push(task.warning);
      recordOutcome(ctx, best.session);
      return { ...best, model, image, startedAt };
    }
    const one = await session(1, trajectory, ctx.signal);
    if (task.warning) one.agent.warnings.push(task.warning);
    recordOutcome(ctx, one);
    return { session: one, model, image, startedAt };
  } finally {
    await trajectory.close();
  }
}

function recordOutcome(ctx: JobContext, session: SandboxSessionResult): void {
  const recorder = ctx.deps.recorder;
  recorder.tests('before', session.tests?.before ?? null);
  recorder.tests('after', session.tests?.after ?? null);
  for (const w of session.agent.warnings) recorder.warning(w);
}

/**
 * Best of k: k attempts from the same checkout, each in its own sandbox with its own sampling
 * seed, in parallel; the tests, then agreement among the attempts, then the smaller diff choose
 * (src/pipeline/select-attempt.ts, the same rule `lilypad eval --select` measures). Every attempt's patch is
 * kept with the run (LILYPAD_DATA_DIR/runs/<id>/attempt-N.diff), and every trajectory.
 */
async function bestOfK(
  ctx: JobContext,
  k: number,
  outDir: string,
  first: JsonlTrajectory,
  session: (attempt: number, sink: JsonlTrajectory, signal: AbortSignal) => Promise<SandboxSessionResult>,
): Promise<{ session: SandboxSessionResult; attempts: { summaries: AttemptSummary[]; selection: Selection } }> {
  const sinks = [first, ...Array.from({ length: k - 1 }, (_, i) => new JsonlTrajectory(path.join(outDir, `trajectory-attempt-${i + 2}.jsonl`), ctx.scanner()))];
  // A stale trigger or a cancel in one attempt ends them all: no sibling's patch may be published
  // on a text nobody approved, or after someone asked to stop.
  const all = new AbortController();
  const onCancel = () => all.abort(ctx.signal.reason);
  if (ctx.signal.aborted) onCancel();
  else ctx.signal.addEventListener('abort', onCancel, { once: true });
  let fatal: unknown = null;
  const attempt = (sink: JsonlTrajectory, i: number) =>
    session(i + 1, sink, all.signal).then(
      (result) => {
        if (result.agent.exitReason === 'cancelled' && !all.signal.aborted) {
          fatal ??= new CancelledError('an attempt was cancelled');
          all.abort(fatal);
        }
        return result;
      },
      (err: unknown) => {
        if (err instanceof StaleTriggerError || err instanceof CancelledError) {
          fatal ??= err;
          if (!all.signal.aborted) all.abort(err);
        }
        throw err;
      },
    );
  try {
    const settled = await Promise.allSettled(sinks.map(attempt));
    if (fatal instanceof StaleTriggerError) throw fatal;
    if (ctx.signal.aborted) throw new CancelledError(reasonText(ctx.signal.reason));
    if (fatal) throw fatal;
    const done = settled.flatMap((r, i) => (r.status === 'fulfilled' ? [{ i, result: r.value }] : []));
    if (done.length === 0) throw (settled[0] as PromiseRejectedResult).reason;
    const candidates: Candidate[] = settled.map((r, i) => {
      if (r.status === 'rejected') return { index: i, patch: null, testsPassed: null };
      const after = r.value.tests?.after;
      return { index: i, patch: r.value.patch?.diff.toString('utf8') ?? null, testsPassed: after ? after.outcome === 'passed' : null };
    });
    const selection = selectAttempt(candidates);
    const winner = selection.winner ?? done[0]!.i;
    for (const c of candidates) if (c.patch) await writeFile(path.join(outDir, `attempt-${c.index + 1}.diff`), c.patch);
    const summaries: AttemptSummary[] = settled.map((r, i) => {
      const verdict = selection.attempts.find((a) => a.index === i);
      if (r.status === 'rejected') return { attempt: i + 1, exitReason: 'error', testsAfter: 'not run', steps: 0, tokens: 0, changedFiles: 0, chosen: false, note: `failed: ${(r.reason as Error).message}`.slice(0, 200) };
      const a = r.value.agent;
      return {
        attempt: i + 1,
        exitReason: a.exitReason,
        testsAfter: testWord(r.value.tests?.after),
        steps: a.steps,
        tokens: a.usage.prompt_tokens + a.usage.completion_tokens,
        changedFiles: (r.value.patch?.diff.toString('utf8').match(/^diff --git /gm) ?? []).length,
        chosen: i === winner,
        note: verdict?.note ?? '',
      };
    });
    ctx.deps.recorder.warning(`best of ${k}: attempt ${winner + 1} chosen; ${selection.summary}`);
    ctx.log.info({ winner: winner + 1, decidedBy: selection.decidedBy, k }, 'best of k');
    return { session: (settled[winner] as PromiseFulfilledResult<SandboxSessionResult>).value, attempts: { summaries, selection } };
  } finally {
    ctx.signal.removeEventListener('abort', onCancel);
    for (const sink of sinks.slice(1)) await sink.close();
  }
}

/** The agent's wall clock: the configured budget, cut so that the whole job ends by its deadline. */
function agentWallSeconds(ctx: JobContext, config: RepoConfig, testTimeoutSeconds: number): number {
  const configured = Math.min(config.max_minutes * 60, ctx.deps.env.LILYPAD_MAX_WALL_SECONDS);
  const left = Math.floor((ctx.deps.deadlineAt - Date.now()) / 1000) - testTimeoutSeconds - PUBLISH_RESERVE_S;
  return Math.max(30, Math.min(configured, left));
}
