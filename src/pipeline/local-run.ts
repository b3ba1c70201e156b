import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { runAgent, type AgentBudgets, type AgentProgress, type AgentRunResult, type ExitReason } from '../agent/loop.ts';
import { ModelClient } from '../agent/model-client.ts';
import { sanitizeIssueText } from '../agent/prompt.ts';
import { JsonlTrajectory } from '../agent/trajectory.ts';
import type { Logger } from '../observability/logger.ts';
import { SecretScanner } from '../observability/secrets.ts';
import { CancelledError } from '../sandbox/errors.ts';
import { Sandbox } from '../sandbox/sandbox.ts';
import { cloneLocalRepository } from '../workspace/local-clone.ts';
import { extractPatch } from '../workspace/patch.ts';
import { runTestCommand, snapshotWorktree, type TestOutcome } from './test-command.ts';

export interface LocalRunOptions {
  repo: string;
  title: string;
  body: string;
  testCommand?: string | undefined;
  outDir: string;
  image: string;
  workdir: string;
  sandboxUser?: string | undefined;
  memoryMb: number;
  cpus: number;
  pids: number;
  baseURL: string;
  apiKey?: string | undefined;
  model?: string | undefined;
  modelTimeoutMs: number;
  modelRetries: number;
  retryBaseMs?: number;
  testTimeoutSeconds: number;
  budgets: AgentBudgets;
  runId?: string;
  signal?: AbortSignal;
  docker: Docker;
  onPhase?: (phase: string) => void;
  onProgress?: (p: AgentProgress) => void;
  logger?: Logger;
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
  tests: { command: string; before: TestOutcome | null; after: TestOutcome | null } | null;
  patch: { files: string[]; bytes: number; empty: boolean };
  warnings: string[];
  error?: string;
  out_dir: string;
}

/**
 * `lilypad run`: one issue, one local repository, one sandbox. The same phases a GitHub job runs,
 * minus GitHub: clone -> sandbox -> tests before -> agent -> patch -> tests after -> files.
 */
export async function runLocal(opts: LocalRunOptions): Promise<LocalRunResult> {
  const runId = opts.runId ?? `run-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')}-${randomBytes(3).toString('hex')}`;
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
    tests: opts.testCommand ? { command: opts.testCommand, before: null, after: null } : null,
    patch: { files: [], bytes: 0, empty: true },
    warnings,
    out_dir: opts.outDir,
  };
  const trajectory = new JsonlTrajectory(path.join(opts.outDir, 'trajectory.jsonl'), scanner);
  const started = Date.now();
  let sandbox: Sandbox | undefined;
  let checkout: Awaited<ReturnType<typeof cloneLocalRepository>> | undefined;
  let patchBytes: Buffer = Buffer.alloc(0);
  try {
    const title = sanitizeIssueText(opts.title);
    const body = sanitizeIssueText(opts.body);
    const removed = title.removedComments + body.removedComments;
    const invisible = title.removedInvisible + body.removedInvisible;
    if (removed + invisible > 0) {
      warnings.push(`removed ${removed} HTML comment(s) and ${invisible} invisible character(s) from the issue text before the model saw it`);
    }

    const client = new ModelClient({
      baseURL: opts.baseURL,
      apiKey: opts.apiKey,
      timeoutMs: opts.modelTimeoutMs,
      maxRetries: opts.modelRetries,
      ...(opts.retryBaseMs !== undefined ? { retryBaseMs: opts.retryBaseMs } : {}),
    });
    const model = await phase('model', () => client.resolveModel(opts.model, opts.signal));
    result.model = model;

    checkout = await phase('clone', () => cloneLocalRepository(opts.repo));
    result.base_commit = checkout.baseCommit;
    if (checkout.sourceDirty) warnings.push('the repository has uncommitted changes; the run used its last commit (HEAD) only');

    const created = await phase('sandbox', async () => {
      const sb = await Sandbox.create(
        opts.docker,
        {
          image: opts.image,
          workdir: opts.workdir,
          user: opts.sandboxUser,
          memoryMb: opts.memoryMb,
          cpus: opts.cpus,
          pids: opts.pids,
          network: 'none',
          runId,
          workerId: os.hostname(),
        },
        opts.signal,
      );
      sandbox = sb;
      await sb.copyIn(checkout!.dir);
      return sb;
    });
    const stopWatching = created.destroyOnAbort(opts.signal);
    try {
      if (opts.testCommand) {
        const restore = await snapshotWorktree(created);
        result.tests!.before = await phase('tests_before', () => runTestCommand(created, opts.testCommand!, opts.testTimeoutSeconds));
        await restore();
      }
      const agent = await phase('agent', () =>
        runAgent({
          title: title.text,
          body: body.text,
          model,
          client,
          tools: created,
          budgets: opts.budgets,
          trajectory,
          signal: opts.signal,
          ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
        }),
      );
      result.exit_reason = agent.exitReason;
      result.steps = agent.steps;
      result.final_answer = scanner.redact(agent.finalAnswer);
      result.tokens = agent.usage;
      result.context_tokens = agent.contextTokens;
      result.model_retries = agent.retries;
      warnings.push(...agent.warnings);
      if (agent.error) result.error = agent.error;
      if (agent.exitReason === 'cancelled') throw new CancelledError();

      const patch = await phase('patch', () => extractPatch(created, checkout!.baseCommit));
      patchBytes = patch.diff;
      result.patch = { files: patch.files, bytes: patch.diff.length, empty: patch.diff.length === 0 };
      if (opts.testCommand) {
        result.tests!.after = await phase('tests_after', () => runTestCommand(created, opts.testCommand!, opts.testTimeoutSeconds));
      }
    } finally {
      stopWatching();
    }
  } catch (err) {
    if (err instanceof CancelledError || opts.signal?.aborted) {
      result.exit_reason = 'cancelled';
      result.error = 'the run was cancelled';
    } else {
      const message = (err as Error).message;
      result.error = result.error ? `${result.error}; ${message}` : message;
    }
  } finally {
    await sandbox?.destroy();
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
