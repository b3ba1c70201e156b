import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import type { Redis } from 'ioredis';
import type { ProbotOctokit } from 'probot';
import { ModelClient } from '../agent/model-client.ts';
import { prepareIssue } from '../agent/prompt.ts';
import { JsonlTrajectory } from '../agent/trajectory.ts';
import type { Env } from '../config/env.ts';
import { imageAllowed } from '../config/image-policy.ts';
import type { RepoConfig } from '../config/repo-config.ts';
import type { GitHubApp } from '../github/app-auth.ts';
import type { GitHubClient, IssueRef } from '../github/client.ts';
import { loadRepoConfig } from '../github/repo-config-loader.ts';
import { RepoTokens } from '../github/repo-tokens.ts';
import { quoteUntrusted, renderPullRequestBody } from '../github/pull-request-body.ts';
import { upsertPullRequest } from '../github/pull-request.ts';
import type { Logger } from '../observability/logger.ts';
import { SecretScanner } from '../observability/secrets.ts';
import { editsKey, runJobId, textDigest, type RunJob } from '../queue/jobs.ts';
import { withRedisLock } from '../queue/redis-lock.ts';
import { CancelledError, reasonText } from '../sandbox/errors.ts';
import { checkoutFromMirror, updateMirror } from '../workspace/mirror.ts';
import { prepareChange, type PreparedChange } from '../workspace/publish.ts';
import { UserError } from './failures.ts';
import { pushWithoutOverwriting, readPublished, recordPublished, type Published } from './publish-change.ts';
import type { RunStatus } from './run-status.ts';
import { runSandboxSession, type SandboxSessionResult, type SetupNetworkProvider } from './sandbox-session.ts';
import { checkPinnedText, parseEdits, StaleTriggerError, validateTrigger, type IssueText } from './validate-trigger.ts';

export { branchFor } from './publish-change.ts';

export interface RunJobDeps {
  env: Env;
  github: GitHubApp;
  docker: Docker;
  redis: Redis;
  logger: Logger;
  workerId: string;
  /** Where setup commands may connect (the egress proxy); null: no network for setup. */
  setupNetwork: SetupNetworkProvider | null;
  /** Extra container labels (job id, worker instance) so that orphans can be swept. */
  labels: Record<string, string>;
  /** When the whole job must be over (LILYPAD_JOB_MAX_MINUTES); the agent's budget fits inside it. */
  deadlineAt: number;
  /**
   * Whether this worker still holds the job, renewing its claim when it does. Asked right before
   * publishing: a worker whose claim lapsed (Redis paused or unreachable) must leave publishing to
   * the copy that took the job over.
   */
  holdsJob: () => Promise<boolean>;
}

export type RunJobOutcome =
  | { result: 'pull_request'; number: number; url: string; updated: boolean; incomplete: boolean; branch: string }
  | { result: 'no_change'; why: string }
  | { result: 'stale'; why: string }
  | { result: 'cancelled' };

const BUDGET_EXITS = new Set(['max_turns', 'max_context_len', 'max_tokens_per_turn', 'max_time', 'llm_query_error', 'tool_error']);
/** Time kept back from the agent for the tests on the change and publishing. */
const PUBLISH_RESERVE_S = 180;

/** One job's context, shared by its phases. */
interface JobContext {
  job: RunJob;
  deps: RunJobDeps;
  signal: AbortSignal;
  runId: string;
  status: RunStatus;
  log: Logger;
  ref: IssueRef;
  tokens: RepoTokens;
  scanner: () => SecretScanner;
  step: <T>(name: string, fn: () => Promise<T>) => Promise<T>;
}

/**
 * The job spine: one labelled issue becomes a draft pull request, or an honest account of why
 * not. Every side effect is idempotent (a retry or re-run updates its own branch, pull request and
 * status comment, never anyone else's commits), every final status goes through `status`, and the
 * sandbox, workspaces and tokens are released whatever happens.
 */
export async function runIssueJob(job: RunJob, deps: RunJobDeps, signal: AbortSignal, runId: string, status: RunStatus, tokens: RepoTokens): Promise<RunJobOutcome> {
  const log = deps.logger.child({ runId, issue: `${job.owner}/${job.repo}#${job.issueNumber}` });
  const cleanups: Array<() => Promise<unknown>> = [];
  const baseScanner = new SecretScanner([deps.env.OPENAI_API_KEY, deps.env.WEBHOOK_SECRET, deps.github.opts.privateKey]);
  // Every token minted for the job is a secret to refuse and redact, including later ones.
  const scanner = () => baseScanner.withValues(tokens.secretValues());
  const ctx: JobContext = {
    job,
    deps,
    signal,
    runId,
    status,
    log,
    ref: { owner: job.owner, repo: job.repo, issueNumber: job.issueNumber },
    tokens,
    scanner,
    step: async (name, fn) => {
      if (signal.aborted) throw new CancelledError(reasonText(signal.reason));
      const t = Date.now();
      try {
        return await fn();
      } finally {
        log.info({ phase: name, ms: Date.now() - t }, `phase ${name}`);
      }
    },
  };
  try {
    // 0. Another copy of this job may already have published for this trigger (see publish()).
    const already = await readPublished(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, runJobId(job.repoId, job.issueNumber), job.deliveryId);
    if (already) return await reportPublished(ctx, already);
    // 1. The trigger must still hold: issue open, label present, permission, text as pinned.
    const installation = await deps.github.installation(job.installationId);
    const text = await ctx.step('validate', () => validateTrigger(installation as unknown as GitHubClient, job, () => recordedEdits(ctx)));
    const config = await ctx.step('config', () => loadConfigOrFail(installation, ctx.ref));
    await status.phase({ state: 'running', step: 0, phase: 'preparing the sandbox' });

    // 2. Clone on the host through the mirror cache (tokens only ever as HTTP headers).
    const repoInfo = (await (await tokens.rest()).request('GET /repos/{owner}/{repo}', { owner: job.owner, repo: job.repo })).data;
    // Several workers may share one data dir: the mirror is locked across processes.
    const lock = <T>(key: string, fn: () => Promise<T>) => withRedisLock(deps.redis, `${deps.env.LILYPAD_QUEUE_PREFIX}:mirror:${key}`, { ttlMs: 15 * 60_000, waitMs: 15 * 60_000 }, fn);
    const mirrorDir = await ctx.step('mirror', async () => updateMirror(deps.env.LILYPAD_DATA_DIR, job.repoId, repoInfo.clone_url, await tokens.gitAuthHeader(), { lock }));
    const checkout = await ctx.step('checkout', () => checkoutFromMirror(mirrorDir, repoInfo.default_branch));
    cleanups.push(() => checkout.dispose());

    // 3. Sandbox: setup through the proxy, cut, tests before, agent, patch, tests after.
    const started = Date.now();
    const { session, model, image } = await runInSandbox(ctx, config, text, checkout);
    const agent = session.agent;
    if (agent.exitReason === 'cancelled') throw new CancelledError();

    // 4. The diff leaves the container as data; filter, scan, commit as the app, push, PR.
    const patch = session.patch?.diff ?? Buffer.alloc(0);
    if (patch.length === 0) {
      const why =
        agent.exitReason === 'agent'
          ? `the agent finished without changing any file. Its last words: ${quoteLine(quoteUntrusted(scanner().redact(agent.finalAnswer)))}`
          : `the run ended (\`${agent.exitReason}\`${agent.error ? `: ${agent.error}` : ''}) before a change could be taken from the sandbox.`;
      await status.finish({ state: 'no_change', why });
      return { result: 'no_change', why };
    }
    const change = await ctx.step('apply', () => applyChange(ctx, config, text, mirrorDir, checkout.baseCommit, patch, repoInfo.html_url));
    cleanups.push(() => change.dispose());
    if (!change.hasChanges) {
      const why = `every file the agent changed is left out of pull requests: ${change.dropped.map((d) => `\`${d.path}\` (${d.reason})`).join('; ')}.`;
      await status.finish({ state: 'no_change', why });
      return { result: 'no_change', why };
    }
    const incomplete = BUDGET_EXITS.has(agent.exitReason);
    const warnings = [...agent.warnings];
    const body = renderPullRequestBody({
      issueNumber: job.issueNumber,
      issueTitle: text.title,
      summary: scanner().redact(agent.finalAnswer),
      files: change.files,
      dropped: change.dropped,
      tests: session.tests,
      run: {
        model,
        steps: agent.steps,
        promptTokens: agent.usage.prompt_tokens,
        completionTokens: agent.usage.completion_tokens,
        seconds: (Date.now() - started) / 1000,
        exitReason: agent.exitReason,
        image,
        runId,
      },
      incomplete,
      warnings,
      ciHeld: config.ci === 'hold',
    });
    const title = `${incomplete ? '[incomplete] ' : ''}Lilypad: ${text.title}`.slice(0, 250);
    await refuseSecrets(scanner(), patch, [body, title]);
    return await publish(ctx, config, change, { title, body, baseBranch: repoInfo.default_branch, cloneUrl: repoInfo.clone_url, incomplete, exitReason: agent.exitReason });
  } catch (err) {
    // The trigger stopped holding (at the start, or right before the agent): say so, not "failed".
    if (!(err instanceof StaleTriggerError)) throw err;
    await status.finish({ state: 'cancelled', why: err.message });
    return { result: 'stale', why: err.message };
  } finally {
    // Release everything, newest first, whatever happened.
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => log.warn({ err: (err as Error).message }, 'cleanup failed'));
  }
}

async function runInSandbox(
  ctx: JobContext,
  config: RepoConfig,
  text: IssueText,
  checkout: { dir: string; baseCommit: string },
): Promise<{ session: SandboxSessionResult; model: string; image: string }> {
  const { deps, job, status } = ctx;
  const outDir = path.join(deps.env.LILYPAD_DATA_DIR, 'runs', ctx.runId);
  await mkdir(outDir, { recursive: true });
  const trajectory = new JsonlTrajectory(path.join(outDir, 'trajectory.jsonl'), ctx.scanner());
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
    const prepared = prepareIssue(text.title, text.body);
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
    let lastStatusAt = 0;
    const session = await runSandboxSession({
      docker: deps.docker,
      checkoutDir: checkout.dir,
      baseCommit: checkout.baseCommit,
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
      runId: ctx.runId,
      workerId: deps.workerId,
      labels: { ...deps.labels, 'dev.lilypad.issue': `${job.owner}/${job.repo}#${job.issueNumber}` },
      setup: config.setup,
      setupNetwork: deps.setupNetwork,
      setupTimeoutSeconds: Math.min(config.setup_timeout_minutes * 60, deps.env.LILYPAD_SETUP_TIMEOUT_SECONDS),
      testCommand: config.test,
      testTimeoutSeconds,
      issue: prepared,
      model,
      client,
      budgets: {
        maxSteps,
        maxContextTokens: deps.env.LILYPAD_MAX_CONTEXT_TOKENS,
        maxTokensPerTurn: deps.env.LILYPAD_MAX_TOKENS_PER_TURN,
        maxWallSeconds: agentWallSeconds(ctx, config, testTimeoutSeconds),
        bashTimeoutCapSeconds: deps.env.LILYPAD_BASH_TIMEOUT_CAP_SECONDS,
      },
      trajectory,
      signal: ctx.signal,
      phase: async (name, fn) => {
        if (name === 'tests_before' || name === 'tests_after') await status.phase({ state: 'testing', which: name === 'tests_before' ? 'before' : 'after' });
        if (name === 'agent') {
          await recheckPinnedText(ctx);
          await status.phase({ state: 'running', step: 0, phase: 'the agent is starting' });
        }
        return ctx.step(name, fn);
      },
      onProgress: (p) => {
        if (Date.now() - lastStatusAt < deps.env.LILYPAD_STATUS_INTERVAL_MS) return;
        lastStatusAt = Date.now();
        status.progress({ state: 'running', step: p.step, phase: `agent step ${p.step} of at most ${maxSteps}` });
      },
    });
    if (prepared.warning) session.agent.warnings.push(prepared.warning);
    return { session, model, image };
  } finally {
    await trajectory.close();
  }
}

/** The agent's wall clock: the configured budget, cut so that the whole job ends by its deadline. */
function agentWallSeconds(ctx: JobContext, config: RepoConfig, testTimeoutSeconds: number): number {
  const configured = Math.min(config.max_minutes * 60, ctx.deps.env.LILYPAD_MAX_WALL_SECONDS);
  const left = Math.floor((ctx.deps.deadlineAt - Date.now()) / 1000) - testTimeoutSeconds - PUBLISH_RESERVE_S;
  return Math.max(30, Math.min(configured, left));
}

/** Setup and the tests can take a while: the issue text is checked again right before the agent. */
async function recheckPinnedText(ctx: JobContext): Promise<void> {
  if (!ctx.job.pinned) return;
  const issue = (await (await ctx.tokens.rest()).request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: ctx.job.owner, repo: ctx.job.repo, issue_number: ctx.job.issueNumber })).data;
  await checkPinnedText(ctx.job, textDigest(issue.title, issue.body), () => recordedEdits(ctx));
}

async function recordedEdits(ctx: JobContext) {
  const key = editsKey(ctx.deps.env.LILYPAD_QUEUE_PREFIX, runJobId(ctx.job.repoId, ctx.job.issueNumber));
  return parseEdits(await ctx.deps.redis.lrange(key, 0, -1));
}

async function applyChange(ctx: JobContext, config: RepoConfig, text: IssueText, mirrorDir: string, baseCommit: string, patch: Buffer, htmlUrl: string): Promise<PreparedChange> {
  // CI systems skip a push whose head commit says [skip ci]: nothing runs the agent's code with
  // the repository's secrets until a writer releases it.
  const hold = config.ci === 'hold' ? '\n\n[skip ci]' : '';
  return prepareChange({
    mirrorDir,
    baseCommit,
    patch,
    excludePaths: config.exclude_paths,
    message: `${text.title.slice(0, 120)}\n\nDrafted by Lilypad for #${ctx.job.issueNumber}; needs human review.${hold}`,
    author: await ctx.deps.github.commitAuthor(htmlUrl),
  });
}

/**
 * Pushes without overwriting anyone (lease against what Lilypad last pushed; a branch someone else
 * pushed to is left alone and the next free name used), then opens or updates the draft pull
 * request, each with a token minted right before. From the push on, a cancel no longer
 * interrupts: a pushed branch without its pull request would be half-published.
 */
async function publish(
  ctx: JobContext,
  config: RepoConfig,
  change: PreparedChange,
  pr: { title: string; body: string; baseBranch: string; cloneUrl: string; incomplete: boolean; exitReason: string },
): Promise<RunJobOutcome> {
  const { job, deps } = ctx;
  const prefix = deps.env.LILYPAD_QUEUE_PREFIX;
  const jobId = runJobId(job.repoId, job.issueNumber);
  // One publisher per trigger: the lock serialises the copies of this job that reach this point,
  // the record tells a later copy what the first one published, and the claim check keeps a worker
  // whose job was handed over (its lock lapsed) from publishing at all.
  return withRedisLock(deps.redis, `${prefix}:publish:${jobId}`, { ttlMs: 10 * 60_000, waitMs: 10 * 60_000 }, async () => {
    const already = await readPublished(deps.redis, prefix, jobId, job.deliveryId);
    if (already) return reportPublished(ctx, already);
    if (ctx.signal.aborted) throw new CancelledError(reasonText(ctx.signal.reason));
    if (!(await deps.holdsJob())) throw new CancelledError('this worker no longer holds the job; another worker took it over');
    const pushed = await ctx.step('push', () =>
      pushWithoutOverwriting(change.dir, change.headSha!, {
        redis: deps.redis,
        prefix,
        repoId: job.repoId,
        issueNumber: job.issueNumber,
        cloneUrl: pr.cloneUrl,
        authHeader: () => ctx.tokens.gitAuthHeader(),
      }),
    );
    const opened = await ctx.step('pull_request', async () =>
      upsertPullRequest(await ctx.tokens.rest(), {
        owner: job.owner,
        repo: job.repo,
        branch: pushed.branch,
        base: pr.baseBranch,
        title: pr.title,
        body: pr.body,
        draft: config.draft,
        labels: config.labels,
        reviewers: config.reviewers ?? [job.triggeredBy],
      }),
    );
    for (const w of opened.warnings) ctx.log.warn({ warning: w }, 'pull request');
    const published: Published = {
      deliveryId: job.deliveryId,
      number: opened.number,
      url: opened.url,
      branch: pushed.branch,
      updated: opened.updated,
      incomplete: pr.incomplete,
      exitReason: pr.exitReason,
      draft: config.draft,
      ...(pushed.skipped.length > 0 ? { note: `Someone else pushed to \`${pushed.skipped.join('`, `')}\`, so Lilypad left it as it is and used \`${pushed.branch}\`.` } : {}),
    };
    await recordPublished(deps.redis, prefix, jobId, published);
    return reportPublished(ctx, published);
  });
}

/** The final status and outcome for what this trigger published (by this copy of the job or an earlier one). */
async function reportPublished(ctx: JobContext, p: Published): Promise<RunJobOutcome> {
  await ctx.status.finish({
    state: 'done',
    prUrl: p.url,
    prNumber: p.number,
    incomplete: p.incomplete,
    updated: p.updated,
    exitReason: p.exitReason,
    draft: p.draft,
    ...(p.note ? { note: p.note } : {}),
  });
  return { result: 'pull_request', number: p.number, url: p.url, updated: p.updated, incomplete: p.incomplete, branch: p.branch };
}

async function loadConfigOrFail(octokit: ProbotOctokit, ref: IssueRef): Promise<RepoConfig> {
  const res = await loadRepoConfig(octokit, ref.owner, ref.repo);
  if (!res.ok) {
    throw new UserError(
      `\`${res.source ?? '.github/lilypad.yml'}\` is not valid:\n${res.problems.map((p) => `- ${p}`).join('\n')}`,
      'fix the file, then label the issue again or comment `/lilypad`.',
    );
  }
  return res.config;
}

async function refuseSecrets(scanner: SecretScanner, patch: Buffer, texts: string[]): Promise<void> {
  const added = patch
    .toString('utf8')
    .split('\n')
    .filter((l) => l.startsWith('+') && !l.startsWith('+++'))
    .join('\n');
  const findings = [...scanner.findings(added), ...texts.flatMap((t) => scanner.findings(t))];
  if (findings.length > 0) {
    throw new UserError(
      `the change or its description contains what looks like a secret (${[...new Set(findings)].join(', ')}), so nothing was published.`,
      'look at the run on the worker (its trajectory is kept under LILYPAD_DATA_DIR/runs) and make sure no secret is in the repository or the issue, then run Lilypad again.',
    );
  }
}

function quoteLine(text: string): string {
  const one = text.replace(/\s+/g, ' ').trim().slice(0, 300);
  return one ? `“${one}”` : '(none)';
}
