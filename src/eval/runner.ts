import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { z } from 'zod';
import { runLocal } from '../pipeline/local-run.ts';
import type { EnvCache } from '../sandbox/env-cache/index.ts';
import type { RunSettings } from '../pipeline/run-context.ts';
import { removeLabelled } from '../sandbox/sandbox.ts';
import { removeSnapshots } from '../sandbox/snapshot.ts';
import { attemptCost, type EndpointSpec } from './endpoint.ts';
import { instanceFingerprint, type EvalInstance, type InstanceProblem } from './instance.ts';
import { emptyReport, judgePatch, type JudgeResult, type JudgeSandbox } from './judge.ts';
import { endpointMetrics, type EndpointMetrics } from './metrics.ts';
import { Progress } from './progress.ts';
import { RepoCache, type AppRepoAuth, type GitHubHost } from './repo-source.ts';
import { renderCostPlot, renderHtml, renderMarkdown, sweBenchRunReport, type ReportedAttempt, type RunSummary, type SweBenchRunReport } from './report.ts';
import {
  EvalStore,
  agentRecordSchema,
  attemptRecordSchema,
  goldRecordSchema,
  readJson,
  writeJson,
  writeText,
  type AgentRecord,
  type AttemptRecord,
  type GoldRecord,
} from './store.ts';

/** Containers of one eval run carry this label (with the run id), so that none can be left behind. */
export const LABEL_EVAL = 'dev.lilypad.eval';

/** The administrator's settings for every attempt (the same as the app's and `lilypad run`'s). */
export type EvalSettings = RunSettings;

export interface EvalRunOptions {
  instancesFile: string;
  instances: EvalInstance[];
  problems: InstanceProblem[];
  endpoints: EndpointSpec[];
  attempts: number;
  select: boolean;
  /** Whether the repositories' instructions for agents (AGENTS.md) go with the task, as in the app. */
  instructions?: boolean;
  /** A reproduction run before each attempt's fix (`reproduce: true` for every instance). */
  reproduce?: boolean;
  workers: number;
  outDir: string;
  resume: boolean;
  validate: boolean;
  settings: EvalSettings;
  gh: GitHubHost;
  /** The GitHub App's read access to private `owner/name` repositories (null: they are cloned anonymously). */
  appAuth?: AppRepoAuth | null | undefined;
  docker: Docker;
  /** Environments kept after setup, shared by the attempts on one repository (null or absent: off). */
  envCache?: EnvCache | null;
  /** LILYPAD_EXTRA_CA_CERTS as read at start. */
  extraCaPem?: string | null;
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
  stderr: NodeJS.WriteStream | { isTTY?: boolean; write(s: string): boolean };
}

export interface EvalRunOutcome {
  summary: RunSummary;
  /** 0: every item finished; 1: finished, but with invalid instances or errors; 130: interrupted. */
  exitCode: number;
}

interface WorkItem {
  instance: EvalInstance;
  endpoint: EndpointSpec;
  attempt: number;
}

const runMetaSchema = z.object({ run_id: z.string(), started_at: z.string() });
const trajectoryLineSchema = z.object({ model_ms: z.number() }).loose();

/**
 * `lilypad eval run`: (1) gold validation if asked, (2) every instance × endpoint × attempt through
 * the same agent path as `lilypad run`, judged in a fresh sandbox, (3) the reports, written from
 * what is on disk, so that a resumed or interrupted run reports exactly what is finished.
 */
export async function runEval(opts: EvalRunOptions): Promise<EvalRunOutcome> {
  // Every running attempt listens on the one signal (sandbox, model client, judge).
  setMaxListeners(1000, opts.signal);
  const store = new EvalStore(opts.outDir);
  const meta = await prepareOutput(store, opts);
  const labels = { [LABEL_EVAL]: meta.run_id };
  const repos = new RepoCache(path.join(opts.outDir, '.repos'), opts.gh, opts.appAuth ?? null);
  try {
    // 1. Gold validation: the instances whose gold patch does not resolve them are not run.
    let validation: GoldRecord[] | null = null;
    let instances = opts.instances;
    if (opts.validate) {
      validation = await validateInstances(opts, store, repos, labels, meta.run_id);
      const valid = new Set(validation.filter((v) => v.valid).map((v) => v.instance_id));
      instances = instances.filter((i) => valid.has(i.instance_id));
    }

    // 2. The attempts.
    const items: WorkItem[] = [];
    for (let attempt = 0; attempt < opts.attempts; attempt++) {
      for (const instance of instances) for (const endpoint of opts.endpoints) items.push({ instance, endpoint, attempt });
    }
    if (items.length > 0 && !opts.signal.aborted) {
      const progress = new Progress(items.length, opts.stderr, 'eval');
      const todo: WorkItem[] = [];
      for (const item of items) {
        const done = await readJson(path.join(store.attemptDir(item.endpoint.name, item.attempt, item.instance.instance_id), 'attempt.json'), attemptRecordSchema);
        if (done && done.fingerprint === instanceFingerprint(item.instance) && !done.infra_error) progress.skip(1);
        else todo.push(item);
      }
      try {
        await pool(todo, opts.workers, opts.signal, (item) => runItem(item, opts, store, repos, labels, meta.run_id, progress));
      } finally {
        progress.stop();
      }
    }

    // 3. Reports from disk.
    const summary = await writeReports(opts, store, meta, instances, validation);
    const interrupted = opts.signal.aborted;
    const errors = summary.endpoints.reduce((n, m) => n + m.errors, 0);
    // An instance that could not be validated at all (its repository could not be fetched, …) is an error.
    const unvalidated = validation ? opts.instances.length - validation.length : 0;
    return { summary, exitCode: interrupted ? 130 : opts.problems.length > 0 || errors > 0 || unvalidated > 0 ? 1 : 0 };
  } finally {
    // Every sandbox removes itself; this catches one whose removal was cut short (an engine restart).
    try {
      await sweepContainers(opts.docker, meta.run_id);
    } finally {
      // The tokens minted to fetch private repositories are revoked.
      await repos.close();
    }
  }
}

async function waitForDocker(docker: Docker, signal: AbortSignal, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await docker.ping().then(() => true, () => false)) return true;
    if (signal.aborted || Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Removes the run's containers; while the Docker engine does not answer (a restart), tries again for up to 30 s. */
async function sweepContainers(docker: Docker, runId: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await removeLabelled(docker, LABEL_EVAL, runId);
      await removeSnapshots(docker, [`${LABEL_EVAL}=${runId}`]);
      const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL_EVAL}=${runId}`] } });
      if (left.length === 0) return;
    } catch {
      /* the engine is not answering: wait for it */
    }
    if (Date.now() > deadline) return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function prepareOutput(store: EvalStore, opts: EvalRunOptions): Promise<z.infer<typeof runMetaSchema>> {
  const metaFile = path.join(store.root, 'eval-run.json');
  const previous = await readJson(metaFile, runMetaSchema);
  if (store.hasResults() && !opts.resume) {
    throw new EvalSetupError(`${store.root} already holds results of an eval run; add --resume to continue it, or choose another --out`);
  }
  const meta = opts.resume && previous ? previous : { run_id: newEvalRunId(), started_at: new Date().toISOString() };
  await writeJson(metaFile, meta);
  return meta;
}

export class EvalSetupError extends Error {
  override name = 'UsageError';
}

export function newEvalRunId(): string {
  return `eval-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')}-${randomBytes(3).toString('hex')}`;
}

async function pool<T>(items: T[], workers: number, signal: AbortSignal, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(workers, items.length)) }, async () => {
    while (!signal.aborted && next < items.length) await fn(items[next++]!);
  });
  await Promise.all(lanes);
}

function judgeSandbox(opts: EvalRunOptions, instance: EvalInstance): JudgeSandbox {
  const s = opts.settings.sandbox;
  return {
    image: instance.image ?? s.defaultImage,
    workdir: s.workdir,
    user: s.user,
    allowRootImage: s.allowRootImage,
    memoryMb: s.memoryMb,
    cpus: s.cpus,
    pids: s.pids,
    diskMb: s.diskMb,
    maxLineBytes: s.maxLineBytes,
    testTimeoutSeconds: opts.settings.limits.testTimeoutSeconds,
  };
}

/** One attempt: the agent (unless an earlier run finished it), then judging; never throws. */
async function runItem(
  item: WorkItem,
  opts: EvalRunOptions,
  store: EvalStore,
  repos: RepoCache,
  labels: Record<string, string>,
  runId: string,
  progress: Progress,
  retry = true,
): Promise<void> {
  const { instance, endpoint, attempt } = item;
  const dir = store.attemptDir(endpoint.name, attempt, instance.instance_id);
  const key = `${endpoint.name}#${attempt + 1}/${instance.instance_id}`;
  const fingerprint = instanceFingerprint(instance);
  progress.start(key, key);
  try {
    let agent = await readJson(path.join(dir, 'agent.json'), agentRecordSchema);
    if (!agent || agent.fingerprint !== fingerprint || agent.infra_error || !existsSync(path.join(dir, 'patch.diff'))) {
      await rm(dir, { recursive: true, force: true });
      agent = await runAgentAttempt(item, opts, dir, repos, labels, runId);
      if (!agent) return; // cancelled: nothing recorded, the next --resume runs it
      await writeJson(path.join(dir, 'agent.json'), agent);
    }
    const patch = agent.infra_error ? null : await readFile(path.join(dir, 'patch.diff'), 'utf8');
    let judged: JudgeResult;
    let judgeInfra = false;
    if (agent.infra_error) {
      judged = { report: emptyReport(null), command: null, output: '', exitCode: null, timedOut: false, durationMs: 0 };
    } else {
      try {
        judged = await judgePatch({
          instance,
          patch,
          repos,
          docker: opts.docker,
          sandbox: judgeSandbox(opts, instance),
          runId: `${runId}-judge-${endpoint.name}-${attempt + 1}-${instance.instance_id}`,
          labels,
          signal: opts.signal,
        });
      } catch (err) {
        if (opts.signal.aborted) return;
        judgeInfra = true;
        judged = { report: emptyReport(patch), error: `judging failed: ${(err as Error).message}`, command: null, output: '', exitCode: null, timedOut: false, durationMs: 0 };
      }
    }
    const record: AttemptRecord = {
      ...agent,
      infra_error: agent.infra_error || judgeInfra,
      resolved: judged.report.resolved,
      judge_ms: judged.durationMs,
      ...(judged.error ? { judge_error: judged.error } : {}),
      ...(judged.applyError ? { apply_error: judged.applyError } : {}),
      test_command: judged.command,
      cost: attemptCost(endpoint.cost, { promptTokens: agent.prompt_tokens, completionTokens: agent.completion_tokens, modelSeconds: agent.model_seconds }),
    };
    await writeJson(path.join(dir, 'report.json'), { [instance.instance_id]: judged.report });
    await writeText(path.join(dir, 'test_output.txt'), judged.output);
    await writeJson(path.join(dir, 'attempt.json'), record);
    // An engine restart would fail every remaining attempt in a second: wait for it to answer
    // again, and run this attempt once more.
    if (record.infra_error && !(await waitForDocker(opts.docker, opts.signal, 0))) {
      progress.note(`${key}: the Docker engine does not answer; waiting up to 60 s for it`);
      if (retry && (await waitForDocker(opts.docker, opts.signal, 60_000))) return runItem(item, opts, store, repos, labels, runId, progress, false);
    }
    progress.finish(key, `${key}: ${describeOutcome(record, judged)}`, record.resolved);
  } catch (err) {
    if (opts.signal.aborted) return;
    progress.note(`${key}: could not be run: ${(err as Error).message}`);
  }
}

function describeOutcome(r: AttemptRecord, j: JudgeResult): string {
  if (r.infra_error) return `error (${r.error ?? r.judge_error ?? r.exit_reason})`;
  if (r.judge_error) return `error (${r.judge_error})`;
  if (!j.report.patch_exists) return `no patch (agent: ${r.exit_reason})`;
  if (!j.report.patch_successfully_applied) return 'patch does not apply';
  if (r.resolved) return 'resolved';
  const t = j.report.tests_status;
  return `not resolved (FAIL_TO_PASS ${t.FAIL_TO_PASS.success.length}/${t.FAIL_TO_PASS.success.length + t.FAIL_TO_PASS.failure.length}, PASS_TO_PASS ${t.PASS_TO_PASS.success.length}/${t.PASS_TO_PASS.success.length + t.PASS_TO_PASS.failure.length})`;
}

/** The agent phase exactly as `lilypad run` runs it; the model sees only the problem statement. */
async function runAgentAttempt(item: WorkItem, opts: EvalRunOptions, dir: string, repos: RepoCache, labels: Record<string, string>, runId: string): Promise<AgentRecord | null> {
  const { instance, endpoint, attempt } = item;
  const s = opts.settings;
  const text = instance.problem_statement;
  const nl = text.indexOf('\n');
  const result = await runLocal({
    runId: `${runId}-${endpoint.name}-${attempt + 1}-${instance.instance_id}`,
    repo: instance.repo,
    title: nl < 0 ? text : text.slice(0, nl),
    body: nl < 0 ? '' : text.slice(nl + 1),
    // The instance says how to test (and set up); the repository's .github/lilypad.yml applies as
    // in the app. With k attempts, attempt N samples with seed N, as the app's best of k does.
    overrides: { setup: instance.setup, test: instance.test_command, ...(opts.attempts > 1 ? { seed: attempt + 1 } : {}), ...(opts.reproduce ? { reproduce: true } : {}) },
    settings: {
      ...s,
      sandbox: { ...s.sandbox, defaultImage: instance.image ?? s.sandbox.defaultImage },
      model: {
        ...s.model,
        baseURL: endpoint.baseURL,
        apiKey: endpoint.apiKeyEnv ? opts.env[endpoint.apiKeyEnv] : s.model.apiKey,
        name: endpoint.model,
        settingNames: {
          baseURL: `the URL of --endpoint ${endpoint.name}`,
          model: `model= in --endpoint ${endpoint.name}`,
          apiKey: endpoint.apiKeyEnv ? `${endpoint.apiKeyEnv} (api_key_env of --endpoint ${endpoint.name})` : `api_key_env= in --endpoint ${endpoint.name}`,
        },
      },
    },
    outDir: dir,
    repoKey: `eval:${instance.repo}`,
    instructions: opts.instructions ?? true,
    envCache: opts.envCache ?? null,
    extraCaPem: opts.extraCaPem ?? null,
    signal: opts.signal,
    docker: opts.docker,
    checkout: () => repos.checkout(instance.repo, instance.base_commit),
    labels,
  });
  if (result.exit_reason === 'cancelled' || opts.signal.aborted) return null;
  let modelMs = 0;
  const trajectory = await readFile(path.join(dir, 'trajectory.jsonl'), 'utf8').catch(() => '');
  for (const line of trajectory.split('\n')) {
    if (!line.trim()) continue;
    const parsed = trajectoryLineSchema.safeParse(JSON.parse(line));
    if (parsed.success) modelMs += parsed.data.model_ms;
  }
  const after = result.tests?.after ?? null;
  return {
    fingerprint: instanceFingerprint(instance),
    instance_id: instance.instance_id,
    endpoint: endpoint.name,
    attempt,
    model: result.model,
    exit_reason: result.exit_reason,
    ...(result.error ? { error: result.error } : {}),
    // What the attempt cost includes its reproduction run, when there was one.
    prompt_tokens: (result.tokens?.prompt_tokens ?? 0) + reproTokens(result, 'prompt_tokens'),
    completion_tokens: (result.tokens?.completion_tokens ?? 0) + reproTokens(result, 'completion_tokens'),
    reproduction_kept: result.reproduction ? result.reproduction['kept'] === true : null,
    model_seconds: modelMs / 1000,
    agent_ms: result.durations_ms['total'] ?? 0,
    steps: result.steps,
    tests_after_passed: after ? after.outcome === 'passed' : null,
    evidence: evidenceOfResult(result.evidence),
    patch_bytes: result.patch.bytes,
    // Lilypad could not run it (the clone, Docker, the model server): not the model's doing. A
    // change the app would refuse (a secret in it) is the model's: judged as the empty patch shipped.
    infra_error: result.exit_reason === 'llm_query_error' || result.exit_reason === 'tool_error' || (result.outcome === 'failed' && result.error_kind !== 'user'),
  };
}

function reproTokens(result: { reproduction: Record<string, unknown> | null }, which: 'prompt_tokens' | 'completion_tokens'): number {
  const tokens = result.reproduction?.['tokens'] as Record<string, number> | undefined;
  return tokens?.[which] ?? 0;
}

/** The evidence result.json holds, as an eval record keeps it (verdict and counts). */
function evidenceOfResult(e: Record<string, unknown> | null): AgentRecord['evidence'] {
  const verdict = e?.['verdict'];
  if (verdict !== 'verified' && verdict !== 'unverified' && verdict !== 'failing') return null;
  const count = (k: string) => (Array.isArray(e?.[k]) ? (e[k] as unknown[]).length : 0);
  return { verdict, broken: count('broken'), weakened: count('weakened') };
}

/**
 * --validate: the gold patch must resolve the instance, and without any patch every FAIL_TO_PASS
 * test must fail and every PASS_TO_PASS test pass (else the instance cannot tell a fix from none).
 */
async function validateInstances(opts: EvalRunOptions, store: EvalStore, repos: RepoCache, labels: Record<string, string>, runId: string): Promise<GoldRecord[]> {
  const results = new Map<string, GoldRecord>();
  const progress = new Progress(opts.instances.length, opts.stderr, 'validate');
  const todo: EvalInstance[] = [];
  for (const inst of opts.instances) {
    const fp = `${instanceFingerprint(inst)}:${inst.patch.length}`;
    const done = await readJson(path.join(store.goldDir(inst.instance_id), 'attempt.json'), goldRecordSchema);
    if (done && done.fingerprint === fp) {
      results.set(inst.instance_id, done);
      progress.skip(1);
    } else todo.push(inst);
  }
  try {
    await pool(todo, opts.workers, opts.signal, async (inst) => {
      const dir = store.goldDir(inst.instance_id);
      progress.start(inst.instance_id, inst.instance_id);
      const problems: string[] = [];
      const common = { instance: inst, repos, docker: opts.docker, sandbox: judgeSandbox(opts, inst), labels, signal: opts.signal };
      try {
        const gold = await judgePatch({ ...common, patch: inst.patch || null, runId: `${runId}-gold-${inst.instance_id}` });
        const none = await judgePatch({ ...common, patch: null, runWithoutPatch: true, runId: `${runId}-base-${inst.instance_id}` });
        if (!inst.patch.trim()) problems.push('the instance has no gold patch');
        else if (!gold.report.patch_successfully_applied) problems.push(`the gold patch does not apply: ${gold.applyError ?? ''}`.trim());
        if (gold.error) problems.push(gold.error);
        if (gold.unreadOutput) problems.push(`with the gold patch, ${gold.unreadOutput}`);
        const t = gold.report.tests_status;
        if (t.FAIL_TO_PASS.failure.length) problems.push(`with the gold patch, FAIL_TO_PASS tests fail: ${t.FAIL_TO_PASS.failure.join(', ')}`);
        if (t.PASS_TO_PASS.failure.length) problems.push(`with the gold patch, PASS_TO_PASS tests fail: ${t.PASS_TO_PASS.failure.join(', ')}`);
        if (none.error) problems.push(`without a patch: ${none.error}`);
        const b = none.report.tests_status;
        if (b.FAIL_TO_PASS.success.length) problems.push(`without any patch, FAIL_TO_PASS tests already pass: ${b.FAIL_TO_PASS.success.join(', ')}`);
        if (b.PASS_TO_PASS.failure.length) problems.push(`without any patch, PASS_TO_PASS tests fail: ${b.PASS_TO_PASS.failure.join(', ')}`);
        const record: GoldRecord = {
          fingerprint: `${instanceFingerprint(inst)}:${inst.patch.length}`,
          instance_id: inst.instance_id,
          valid: problems.length === 0,
          problems,
          gold: gold.report,
          without_patch: none.report,
        };
        await writeJson(path.join(dir, 'report.json'), { [inst.instance_id]: gold.report });
        await writeText(path.join(dir, 'test_output.txt'), gold.output);
        await writeText(path.join(dir, 'test_output_without_patch.txt'), none.output);
        await writeJson(path.join(dir, 'attempt.json'), record);
        results.set(inst.instance_id, record);
        progress.finish(inst.instance_id, `${inst.instance_id}: ${record.valid ? 'valid' : `invalid: ${problems.join('; ')}`}`, record.valid);
      } catch (err) {
        if (opts.signal.aborted) return;
        progress.note(`${inst.instance_id}: could not be validated: ${(err as Error).message}`);
      }
    });
  } finally {
    progress.stop();
  }
  return opts.instances.flatMap((i) => results.get(i.instance_id) ?? []);
}

export function modelNameOrPath(endpoint: string, attempt: number, k: number): string {
  return k === 1 ? endpoint : `${endpoint}/attempt-${attempt + 1}`;
}

async function writeReports(
  opts: EvalRunOptions,
  store: EvalStore,
  meta: z.infer<typeof runMetaSchema>,
  instances: EvalInstance[],
  validation: GoldRecord[] | null,
): Promise<RunSummary> {
  const ids = instances.map((i) => i.instance_id);
  const predictions: string[] = [];
  const models: Record<string, SweBenchRunReport> = {};
  const metrics: EndpointMetrics[] = [];
  const outcomes: RunSummary['outcomes'] = [];
  let complete = !opts.signal.aborted;
  for (const endpoint of opts.endpoints) {
    const records: AttemptRecord[] = [];
    const patches = new Map<string, string | null>();
    const perAttempt = Array.from({ length: opts.attempts }, () => new Map<string, ReportedAttempt>());
    for (const inst of instances) {
      for (let a = 0; a < opts.attempts; a++) {
        const dir = store.attemptDir(endpoint.name, a, inst.instance_id);
        const rec = await readJson(path.join(dir, 'attempt.json'), attemptRecordSchema);
        if (!rec || rec.fingerprint !== instanceFingerprint(inst)) {
          complete = false;
          continue;
        }
        // Prices may differ from the run that made the record: cost is always the current formula.
        rec.cost = attemptCost(endpoint.cost, { promptTokens: rec.prompt_tokens, completionTokens: rec.completion_tokens, modelSeconds: rec.model_seconds });
        records.push(rec);
        const patch = rec.infra_error ? null : await readFile(path.join(dir, 'patch.diff'), 'utf8').catch(() => null);
        patches.set(`${inst.instance_id}#${a}`, patch);
        perAttempt[a]!.set(inst.instance_id, { record: rec, patchExists: patch !== null && patch.trim() !== '' });
        if (!rec.infra_error) {
          predictions.push(JSON.stringify({ instance_id: inst.instance_id, model_name_or_path: modelNameOrPath(endpoint.name, a, opts.attempts), model_patch: patch ?? '' }));
        }
      }
    }
    perAttempt.forEach((m, a) => (models[modelNameOrPath(endpoint.name, a, opts.attempts)] = sweBenchRunReport(ids, m)));
    const m = endpointMetrics({ endpoint: endpoint.name, cost: endpoint.cost, instanceIds: ids, k: opts.attempts, records, patches, select: opts.select });
    metrics.push(m);
    if (opts.select && m.selections) {
      const selected = new Map<string, ReportedAttempt>();
      for (const [id, sel] of Object.entries(m.selections)) {
        if (sel.winner === null) {
          const first = records.find((r) => r.instance_id === id && !r.infra_error);
          if (first) selected.set(id, { record: { ...first, resolved: false }, patchExists: false });
          continue;
        }
        const rec = records.find((r) => r.instance_id === id && r.attempt === sel.winner)!;
        selected.set(id, { record: rec, patchExists: true });
        predictions.push(JSON.stringify({ instance_id: id, model_name_or_path: `${endpoint.name}/selected`, model_patch: patches.get(`${id}#${sel.winner}`) ?? '' }));
      }
      models[`${endpoint.name}/selected`] = sweBenchRunReport(ids, selected);
    }
    for (const inst of instances) {
      const rs = records.filter((r) => r.instance_id === inst.instance_id).sort((a, b) => a.attempt - b.attempt);
      outcomes.push({
        instance_id: inst.instance_id,
        endpoint: endpoint.name,
        resolved: rs.filter((r) => !r.infra_error).map((r) => r.resolved),
        selected: m.selections?.[inst.instance_id]?.winner ?? null,
        errors: rs.filter((r) => r.infra_error || r.judge_error).length,
      });
    }
  }
  const summary: RunSummary = {
    run_id: meta.run_id,
    instances_file: opts.instancesFile,
    started_at: meta.started_at,
    finished_at: new Date().toISOString(),
    complete,
    interrupted: opts.signal.aborted,
    attempts: opts.attempts,
    select: opts.select,
    workers: opts.workers,
    endpoints: metrics,
    instance_problems: opts.problems,
    validation,
    outcomes,
  };
  const svg = renderCostPlot(metrics, opts.select);
  await writeText(path.join(store.root, 'predictions.jsonl'), predictions.length ? `${predictions.join('\n')}\n` : '');
  await writeJson(path.join(store.root, 'run-report.json'), { ...summary, schema_version: 2, models });
  // One report per model_name_or_path in the shape and under the name SWE-bench's harness writes
  // (`<model with / as __>.<run_id>.json`, counts and *_ids lists at the top level), for tools built on it.
  for (const [model, report] of Object.entries(models)) {
    await writeJson(path.join(store.root, `${model.replace(/\//g, '__')}.${meta.run_id}.json`), report);
  }
  await writeText(path.join(store.root, 'report-cost.svg'), svg);
  await writeText(path.join(store.root, 'report.md'), renderMarkdown(summary, 'report-cost.svg'));
  await writeText(path.join(store.root, 'report.html'), renderHtml(summary, svg));
  return summary;
}
