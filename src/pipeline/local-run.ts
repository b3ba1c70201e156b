import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import pino from 'pino';
import type { AgentProgress, AgentRunResult, ExitReason } from '../agent/loop.ts';
import type { Logger } from '../observability/logger.ts';
import type { EnvCache } from '../sandbox/env-cache/index.ts';
import { SecretScanner } from '../observability/secrets.ts';
import { CancelledError } from '../shared/cancel.ts';
import { cloneLocalRepository, type LocalCheckout } from '../workspace/local-clone.ts';
import { groupLeftOut, type LeftOutGroup } from '../workspace/leftovers.ts';
import type { EffectiveConfig } from './effective-config.ts';
import { classifyFailure, failedOutcome } from './failures.ts';
import type { InstructionsSummary } from './instructions.ts';
import { localPlug, type LocalFacts, type LocalOverrides } from './kinds/local.ts';
import { writeOutcome, type RunOutcome } from './outcome.ts';
import type { AttemptSummary } from './best-of-k.ts';
import { phaseStepper, type RunContext, type RunRecord, type RunSettings } from './run-context.ts';
import type { SetupNetworkProvider } from './sandbox-session.ts';
import { SandboxSlots } from './sandbox-slots.ts';
import { REAL_STAGES, runSpine, type SpineStages } from './spine.ts';
import { evidenceSection, reproductionSection, setupSection, testsSection, type SetupSection, type TestsSection } from './run-report.ts';

export interface LocalRunOptions {
  runId?: string;
  /** The repository, as the user named it (result.json and the containers say it). */
  repo: string;
  title: string;
  body: string;
  overrides: LocalOverrides;
  /** The administrator's settings (the environment, with the command line's image applied). */
  settings: RunSettings;
  outDir: string;
  docker: Docker;
  /** How the code is obtained (default: a clone of `repo`'s HEAD). `lilypad eval` checks out an instance's base commit. */
  checkout?: () => Promise<LocalCheckout>;
  /** Where setup may connect (the egress proxy); absent or null: setup runs without any network. */
  setupNetwork?: SetupNetworkProvider | null;
  /** Sandboxes this run may hold at once (eval shares its workers' slots); default: one per attempt. */
  slots?: SandboxSlots;
  /** Names the repository among kept environments (default: `local:<the repository's path>`). */
  repoKey?: string;
  /** The repository's instructions for agents (AGENTS.md) go with the task unless this is false. */
  instructions?: boolean;
  /** Environments kept after setup (null or absent: off). */
  envCache?: EnvCache | null;
  /** LILYPAD_EXTRA_CA_CERTS as read at start (null or absent: none). */
  extraCaPem?: string | null;
  /** Extra container labels (`lilypad eval` marks its sandboxes with its run id). */
  labels?: Record<string, string>;
  signal?: AbortSignal;
  logger?: Logger;
  onPhase?: (phase: string) => void;
  onProgress?: (p: AgentProgress) => void;
  /** Tests replace the Docker and host-git phases. */
  stages?: SpineStages;
}

export interface LocalRunResult {
  run_id: string;
  repo: string;
  base_commit: string | null;
  /** How the run ended: `patch` (patch.diff holds the change), `no_change`, `cancelled` or `failed`. */
  outcome: RunOutcome['result'];
  model: string | null;
  base_url: string;
  image: string;
  workdir: string;
  exit_reason: ExitReason | 'error';
  steps: number;
  final_answer: string;
  tokens: AgentRunResult['usage'] | null;
  context_tokens: number;
  model_retries: number;
  durations_ms: Record<string, number>;
  /** The repository's configuration as the run used it, and where each value came from. */
  config: { file: string | null; sources: EffectiveConfig['sources'] } | null;
  /** Setup: where it came from, each command as it ran (a failing one ends the list), the kept environment. */
  setup: SetupSection | null;
  /** The tests: where they came from, before and after, and what changed per test. */
  tests: TestsSection | null;
  /** What shows the change fixes the issue: verdict, reproduction, fixed, broken and weakened tests (src/evidence/). */
  evidence: Record<string, unknown> | null;
  /** The repository's instructions for agents that went with the task (null: none read, or turned off). */
  instructions: InstructionsSummary | null;
  /** `reproduce: true`: the run that wrote a test before the fix, what it cost, and whether its test was kept. */
  reproduction: Record<string, unknown> | null;
  /** Best of k (k > 1): every attempt, and why the chosen one won. */
  attempts: { rows: AttemptSummary[]; summary: string } | null;
  /**
   * `dropped`: changed files the app would not publish (under .github/, exclude_paths), with why;
   * `left_out`: build leftovers and setup output, by rule. Neither is in patch.diff.
   */
  patch: { files: string[]; bytes: number; empty: boolean; dropped: Array<{ path: string; reason: string }>; left_out: LeftOutGroup[] };
  warnings: string[];
  error?: string;
  /** With outcome `failed`: the repository's or the run's to fix (`user`: configuration, setup, a secret in the change), or Lilypad's (`infrastructure`). */
  error_kind?: 'user' | 'infrastructure';
  /** With outcome `failed`: what to do about it, in the words of the app's status comment. */
  todo?: string;
  out_dir: string;
}

/** A run id that sorts by time: run-20261130T012345-a1b2c3. */
export function newRunId(): string {
  return `run-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')}-${randomBytes(3).toString('hex')}`;
}

/**
 * `lilypad run` (and each instance of `lilypad eval`): the spine, with the task given, a fresh clone
 * of the repository at one commit, and the change written to disk. patch.diff, trajectory.jsonl and
 * result.json are always written, whatever happens.
 */
export async function runLocal(opts: LocalRunOptions): Promise<LocalRunResult> {
  const started = Date.now();
  const runId = opts.runId ?? newRunId();
  await mkdir(opts.outDir, { recursive: true });
  const facts: LocalFacts = { baseCommit: null, effective: null, setup: [], run: null, published: null, files: [], dropped: [], warnings: [], plan: null, instructions: null };
  const durations: Record<string, number> = {};
  const ctx = localContext(opts, runId, durations);
  const plug = localPlug(
    { title: opts.title, body: opts.body, checkout: opts.checkout ?? (() => cloneLocalRepository(opts.repo)), overrides: opts.overrides, subject: path.resolve(opts.repo), repoKey: opts.repoKey ?? `local:${path.resolve(opts.repo)}`, instructions: opts.instructions ?? true },
    facts,
  );
  const stages = opts.stages ?? REAL_STAGES;
  // The sandbox run is kept for result.json whatever happens after it (a refused secret, say).
  const keepRun: SpineStages = {
    ...stages,
    attempts: async (c, input) => {
      facts.instructions = input.instructions;
      return (facts.run = await stages.attempts(c, input));
    },
  };
  let outcome: RunOutcome;
  try {
    outcome = await runSpine(ctx, plug, keepRun);
  } catch (err) {
    outcome = localFailure(err, opts.signal);
    await writeFile(path.join(opts.outDir, 'patch.diff'), Buffer.alloc(0));
  }
  durations['total'] = Date.now() - started;
  const result = localResult(opts, runId, outcome, facts, durations);
  await writeOutcome({ recorder: ctx.recorder, result: () => writeFile(path.join(opts.outDir, 'result.json'), `${JSON.stringify(ctx.scanner().redactDeep(result), null, 2)}\n`) }, 'local', outcome, started);
  ctx.log.info({ runId, outcome: outcome.result, exitReason: result.exit_reason, steps: result.steps, patchBytes: result.patch.bytes, error: result.error, ...(outcome.result === 'failed' ? { cause: outcome.error } : {}) }, 'run finished');
  return result;
}

function localContext(opts: LocalRunOptions, runId: string, durations: Record<string, number>): RunContext {
  const signal = opts.signal ?? new AbortController().signal;
  const log = opts.logger ?? pino({ level: 'silent' });
  const scanner = new SecretScanner([opts.settings.model.apiKey]);
  const recorder = nullRecorder();
  const stepper = phaseStepper(signal, recorder, log, (name, seconds) => (durations[name] = Math.round(seconds * 1000)));
  return {
    runId,
    settings: opts.settings,
    docker: opts.docker,
    setupNetwork: opts.setupNetwork ?? null,
    sandboxSlots: opts.slots ?? new SandboxSlots(Math.max(1, Math.min(opts.overrides.attempts ?? 1, opts.settings.limits.maxAttempts))),
    envCache: opts.envCache ?? null,
    extraCaPem: opts.extraCaPem ?? null,
    workerId: os.hostname(),
    labels: opts.labels ?? {},
    outDir: opts.outDir,
    // A local run has no job deadline: the agent's budget (max_minutes, LILYPAD_MAX_WALL_SECONDS) bounds it.
    deadlineAt: Number.MAX_SAFE_INTEGER,
    signal,
    log,
    scanner: () => scanner,
    recorder,
    progress: {
      phase: async () => undefined,
      agentStep: (p) => opts.onProgress?.(p),
    },
    step: (name, fn) => {
      opts.onPhase?.(name);
      return stepper(name, fn);
    },
    cleanups: [],
  };
}

/** A local run keeps its record in its own files (result.json, trajectory.jsonl), not in Redis. */
function nullRecorder(): RunRecord {
  return { task: () => undefined, config: () => undefined, phase: () => undefined, step: () => undefined, tests: () => undefined, warning: () => undefined, finish: async () => undefined };
}

/** The same judge as a queued job's (failures.ts): a local run is never retried. */
function localFailure(err: unknown, signal: AbortSignal | undefined): RunOutcome {
  if (err instanceof CancelledError || signal?.aborted) return { result: 'cancelled', why: 'the run was cancelled' };
  return failedOutcome(err, classifyFailure(err), false);
}

function localResult(opts: LocalRunOptions, runId: string, outcome: RunOutcome, facts: LocalFacts, durations: Record<string, number>): LocalRunResult {
  const session = facts.run?.session ?? null;
  const agent = session?.agent ?? null;
  const config = facts.effective?.config;
  const published = facts.published ?? Buffer.alloc(0);
  const warnings = [...facts.warnings, ...(agent?.warnings ?? [])];
  // A failure reads as the app's status comment says it (the judge's words); the raw error is logged.
  const error = outcome.result === 'failed' ? outcome.what : outcome.result === 'cancelled' ? 'the run was cancelled' : agent?.error;
  const attempts = facts.run?.attempts;
  return {
    run_id: runId,
    repo: path.resolve(opts.repo),
    base_commit: facts.baseCommit,
    outcome: outcome.result,
    model: facts.run?.model ?? null,
    base_url: opts.settings.model.baseURL,
    image: facts.run?.image ?? config?.image ?? opts.settings.sandbox.defaultImage,
    workdir: opts.settings.sandbox.workdir,
    exit_reason: outcome.result === 'cancelled' ? 'cancelled' : (agent?.exitReason ?? 'error'),
    steps: agent?.steps ?? 0,
    final_answer: agent?.finalAnswer ?? '',
    tokens: agent?.usage ?? null,
    context_tokens: agent?.contextTokens ?? 0,
    model_retries: agent?.retries ?? 0,
    durations_ms: durations,
    config: facts.effective ? { file: facts.effective.file, sources: facts.effective.sources } : null,
    setup: facts.effective ? setupSection(facts.effective, session, !!opts.setupNetwork, facts.setup) : null,
    tests: facts.effective ? testsSection(facts.effective, session, facts.plan?.testRunner ?? null) : null,
    evidence: evidenceSection(session),
    instructions: facts.instructions,
    reproduction: reproductionSection(facts.run),
    attempts: attempts ? { rows: attempts.summaries, summary: attempts.ranking.summary } : null,
    patch: {
      files: facts.files,
      bytes: published.length,
      empty: published.length === 0,
      dropped: facts.dropped,
      left_out: groupLeftOut(session?.patch?.leftOut ?? [], 20),
    },
    warnings,
    ...(error ? { error } : {}),
    ...(outcome.result === 'failed' ? { error_kind: outcome.fault, ...(outcome.todo ? { todo: outcome.todo } : {}) } : {}),
    out_dir: opts.outDir,
  };
}

