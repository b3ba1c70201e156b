import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import type { AgentBudgets, AgentProgress, AgentRunResult, ExitReason } from '../agent/loop.ts';
import { ModelClient } from '../agent/model-client.ts';
import { prepareIssue } from '../agent/prompt.ts';
import { JsonlTrajectory } from '../agent/trajectory.ts';
import type { Logger } from '../observability/logger.ts';
import { SecretScanner } from '../observability/secrets.ts';
import { CancelledError } from '../shared/cancel.ts';
import { groupLeftOut, type LeftOutGroup } from '../workspace/leftovers.ts';
import { cloneLocalRepository, type LocalCheckout } from '../workspace/local-clone.ts';
import { runSandboxSession, SetupError, type SetupNetworkProvider } from './sandbox-session.ts';
import type { TestOutcome } from '../test-results/test-outcome.ts';

export interface LocalRunOptions {
  repo: string;
  title: string;
  body: string;
  testCommand?: string | undefined;
  outDir: string;
  image: string;
  workdir: string;
  sandboxUser?: string | undefined;
  allowRootImage?: boolean | undefined;
  diskMb?: number | undefined;
  maxLineBytes?: number | undefined;
  memoryMb: number;
  cpus: number;
  pids: number;
  baseURL: string;
  apiKey?: string | undefined;
  model?: string | undefined;
  modelTimeoutMs: number;
  modelRetries: number;
  maxResponseBytes?: number | undefined;
  retryBaseMs?: number;
  testTimeoutSeconds: number;
  budgets: AgentBudgets;
  runId?: string;
  signal?: AbortSignal;
  docker: Docker;
  onPhase?: (phase: string) => void;
  onProgress?: (p: AgentProgress) => void;
  logger?: Logger;
  /** How the code is obtained (default: a clone of `repo`'s HEAD). `lilypad eval` checks out an instance's base commit. */
  checkout?: () => Promise<LocalCheckout>;
  /** Commands run in the sandbox, in order, before the tests and the agent (default: none). */
  setup?: string[];
  /** Where setup may connect (the egress proxy); absent or null: setup runs without any network. */
  setupNetwork?: SetupNetworkProvider | null;
  /** Per setup command (default: testTimeoutSeconds). */
  setupTimeoutSeconds?: number;
  /** Extra container labels (`lilypad eval` marks its sandboxes with its run id). */
  labels?: Record<string, string>;
}

export interface LocalRunResult {
  run_id: string;
  repo: string;
  base_commit: string | null;
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
  /** The setup commands as they ran (a failing one ends the list and the run). */
  setup: { network: 'egress proxy' | 'none'; commands: TestOutcome[] } | null;
  tests: { command: string; before: TestOutcome | null; after: TestOutcome | null } | null;
  /** `left_out`: changed files that are not in patch.diff (build leftovers, setup output), by rule, with why. */
  patch: { files: string[]; bytes: number; empty: boolean; left_out: LeftOutGroup[] };
  warnings: string[];
  error?: string;
  out_dir: string;
}

/** A run id that sorts by time: run-20261130T012345-a1b2c3. */
export function newRunId(): string {
  return `run-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')}-${randomBytes(3).toString('hex')}`;
}

/**
 * `lilypad run`: one issue, one local repository, one sandbox. The same phases a GitHub job runs,
 * minus GitHub: clone -> sandbox -> tests before -> agent -> patch -> tests after -> files.
 */
export async function runLocal(opts: LocalRunOptions): Promise<LocalRunResult> {
  const runId = opts.runId ?? newRunId();
  const scanner = new SecretScanner([opts.apiKey]);
  const durations: Record<string, number> = {};
  const warnings: string[] = [];
  const phase = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    opts.onPhase?.(name);
    const t = Date.now();
    try {
      return await fn();
    } finally {
      durations[name] = Date.now() - t;
      opts.logger?.info({ runId, phase: name, ms: durations[name] }, `phase ${name} done`);
    }
  };
  await mkdir(opts.outDir, { recursive: true });
  const result: LocalRunResult = {
    run_id: runId,
    repo: path.resolve(opts.repo),
    base_commit: null,
    model: null,
    base_url: opts.baseURL,
    image: opts.image,
    workdir: opts.workdir,
    exit_reason: 'error',
    steps: 0,
    final_answer: '',
    tokens: null,
    context_tokens: 0,
    model_retries: 0,
    durations_ms: durations,
    setup: opts.setup && opts.setup.length > 0 ? { network: opts.setupNetwork ? 'egress proxy' : 'none', commands: [] } : null,
    tests: opts.testCommand ? { command: opts.testCommand, before: null, after: null } : null,
    patch: { files: [], bytes: 0, empty: true, left_out: [] },
    warnings,
    out_dir: opts.outDir,
  };
  const trajectory = new JsonlTrajectory(path.join(opts.outDir, 'trajectory.jsonl'), scanner);
  const started = Date.now();
  let checkout: Awaited<ReturnType<typeof cloneLocalRepository>> | undefined;
  let patchBytes: Buffer = Buffer.alloc(0);
  try {
    const issue = prepareIssue(opts.title, opts.body);
    if (issue.warning) warnings.push(issue.warning);

    const client = new ModelClient({
      baseURL: opts.baseURL,
      apiKey: opts.apiKey,
      timeoutMs: opts.modelTimeoutMs,
      maxRetries: opts.modelRetries,
      ...(opts.maxResponseBytes !== undefined ? { maxResponseBytes: opts.maxResponseBytes } : {}),
      ...(opts.retryBaseMs !== undefined ? { retryBaseMs: opts.retryBaseMs } : {}),
    });
    const model = await phase('model', () => client.resolveModel(opts.model, opts.signal));
    result.model = model;

    checkout = await phase('clone', () => (opts.checkout ? opts.checkout() : cloneLocalRepository(opts.repo)));
    result.base_commit = checkout.baseCommit;
    if (checkout.sourceDirty) warnings.push('the repository has uncommitted changes; the run used its last commit (HEAD) only');

    const session = await runSandboxSession({
      docker: opts.docker,
      checkoutDir: checkout.dir,
      baseCommit: checkout.baseCommit,
      sandbox: {
        image: opts.image,
        workdir: opts.workdir,
        user: opts.sandboxUser,
        allowRootImage: opts.allowRootImage,
        memoryMb: opts.memoryMb,
        cpus: opts.cpus,
        pids: opts.pids,
        diskMb: opts.diskMb,
        maxLineBytes: opts.maxLineBytes,
      },
      runId,
      workerId: os.hostname(),
      ...(opts.labels ? { labels: opts.labels } : {}),
      setup: opts.setup ?? [],
      setupNetwork: opts.setupNetwork ?? null,
      setupTimeoutSeconds: opts.setupTimeoutSeconds ?? opts.testTimeoutSeconds,
      onSetupOutcome: (o) => result.setup?.commands.push(o),
      testCommand: opts.testCommand,
      testTimeoutSeconds: opts.testTimeoutSeconds,
      issue: { title: issue.title, body: issue.body },
      model,
      client,
      budgets: opts.budgets,
      trajectory,
      signal: opts.signal,
      phase,
      onProgress: opts.onProgress,
    });
    const agent = session.agent;
    result.exit_reason = agent.exitReason;
    result.steps = agent.steps;
    result.final_answer = scanner.redact(agent.finalAnswer);
    result.tokens = agent.usage;
    result.context_tokens = agent.contextTokens;
    result.model_retries = agent.retries;
    warnings.push(...agent.warnings);
    if (agent.error) result.error = agent.error;
    if (result.tests && session.tests) {
      result.tests.before = session.tests.before;
      result.tests.after = session.tests.after;
    }
    if (agent.exitReason === 'cancelled') throw new CancelledError();
    if (session.patch) {
      patchBytes = session.patch.diff;
      result.patch = { files: session.patch.files, bytes: patchBytes.length, empty: patchBytes.length === 0, left_out: groupLeftOut(session.patch.leftOut, 20) };
    }
  } catch (err) {
    if (err instanceof CancelledError || opts.signal?.aborted) {
      result.exit_reason = 'cancelled';
      result.error = 'the run was cancelled';
    } else if (err instanceof SetupError) {
      // As in the app: a failing setup command is the user's to fix, and nothing after it ran.
      const tail = err.outcome.outputTail.trim().split('\n').slice(-10).join('\n');
      result.error = `${err.message}, so the run stopped before the tests and the agent${tail ? `; its output ended with:\n${tail}` : ' (it printed nothing)'}`;
    } else {
      const message = (err as Error).message;
      result.error = result.error ? `${result.error}; ${message}` : message;
    }
  } finally {
    await checkout?.dispose();
    durations['total'] = Date.now() - started;
    await trajectory.close();
    const findings = scanner.findings(patchBytes.toString('latin1'));
    if (findings.length > 0) warnings.push(`the patch contains ${findings.join(', ')}; review before sharing it`);
    await writeFile(path.join(opts.outDir, 'patch.diff'), patchBytes);
    await writeFile(path.join(opts.outDir, 'result.json'), `${JSON.stringify(scanner.redactDeep(result), null, 2)}\n`);
    opts.logger?.info(
      { runId, exitReason: result.exit_reason, steps: result.steps, patchBytes: result.patch.bytes, warnings: warnings.length, error: result.error },
      'run finished',
    );
  }
  return result;
}
