import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import type { Redis } from 'ioredis';
import type { ProbotOctokit } from 'probot';
import { ModelClient } from '../agent/model-client.ts';
import { prepareIssue } from '../agent/prompt.ts';
import { JsonlTrajectory } from '../agent/trajectory.ts';
import type { Env } from '../config/env.ts';
import type { RepoConfig } from '../config/repo-config.ts';
import { GitHubApp, type RepoToken } from '../github/app-auth.ts';
import type { GitHubClient, IssueRef } from '../github/client.ts';
import { loadRepoConfig } from '../github/repo-config-loader.ts';
import { hasWriteAccess } from '../github/permissions.ts';
import { quoteUntrusted, renderPullRequestBody } from '../github/pull-request-body.ts';
import { upsertPullRequest } from '../github/pull-request.ts';
import type { StatusComments, StatusState } from '../github/status-comment.ts';
import type { Logger } from '../observability/logger.ts';
import { SecretScanner } from '../observability/secrets.ts';
import type { RunJob } from '../queue/jobs.ts';
import { CancelledError, reasonText } from '../sandbox/errors.ts';
import { checkoutFromMirror, updateMirror, type Checkout } from '../workspace/mirror.ts';
import { prepareChange, pushBranch, type PreparedChange } from '../workspace/publish.ts';
import { UserError } from './failures.ts';
import { runSandboxSession, type SandboxSessionResult, type SetupNetworkProvider } from './sandbox-session.ts';

export interface RunJobDeps {
  env: Env;
  github: GitHubApp;
  docker: Docker;
  redis: Redis;
  status: StatusComments;
  logger: Logger;
  workerId: string;
  /** Where setup commands may connect (the egress proxy); null: no network for setup. */
  setupNetwork: SetupNetworkProvider | null;
  /** Extra container labels (job id, worker instance) so that orphans can be swept. */
  labels: Record<string, string>;
}

export type RunJobOutcome =
  | { result: 'pull_request'; number: number; url: string; updated: boolean; incomplete: boolean }
  | { result: 'no_change'; why: string }
  | { result: 'stale'; why: string }
  | { result: 'cancelled' };

export const branchFor = (issueNumber: number): string => `lilypad/issue-${issueNumber}`;

const BUDGET_EXITS = new Set(['max_turns', 'max_context_len', 'max_tokens_per_turn', 'max_time', 'llm_query_error', 'tool_error']);

/**
 * The job spine: one labelled issue becomes a draft pull request, or an honest account of why
 * not. Every side effect is idempotent (a retry or re-run updates the same branch, pull request
 * and status comment), and the sandbox, workspaces and token are released whatever happens.
 */
export async function runIssueJob(job: RunJob, deps: RunJobDeps, signal: AbortSignal, runId: string): Promise<RunJobOutcome> {
  const ref: IssueRef = { owner: job.owner, repo: job.repo, issueNumber: job.issueNumber };
  const log = deps.logger.child({ runId, issue: `${job.owner}/${job.repo}#${job.issueNumber}` });
  const installation = await deps.github.installation(job.installationId);
  // Status edits are best effort and strictly ordered: a slow progress edit can never land after
  // the final one, and a failed edit never fails (or re-runs) the job.
  let statusChain: Promise<void> = Promise.resolve();
  let progressPending = false;
  const setStatus = (state: StatusState): Promise<void> => {
    statusChain = statusChain
      .then(() => deps.status.set(installation as unknown as GitHubClient, ref, state, job.triggeredBy))
      .catch((err: unknown) => log.warn({ err: (err as Error).message, state: state.state }, 'status update failed'));
    return statusChain;
  };
  const cleanups: Array<() => Promise<unknown>> = [];
  const step = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    if (signal.aborted) throw new CancelledError(reasonText(signal.reason));
    const t = Date.now();
    try {
      return await fn();
    } finally {
      log.info({ phase: name, ms: Date.now() - t }, `phase ${name}`);
    }
  };

  try {
    // 1. The trigger must still hold: issue open, label present, permission.
    const issue = await step('validate', () => validateTrigger(installation, job));
    if (typeof issue === 'string') {
      await setStatus({ state: 'cancelled', why: issue });
      return { result: 'stale', why: issue };
    }
    const config = await step('config', () => loadConfigOrFail(installation, ref));

    // 2. A token for this one repository; it only ever leaves memory as an HTTP header.
    const token = await step('token', () => deps.github.mintRepoToken(job.installationId, job.repo));
    cleanups.push(() => token.revoke());
    const client = token.rest();
    const scanner = new SecretScanner([token.secretValue(), deps.env.OPENAI_API_KEY, deps.env.WEBHOOK_SECRET, deps.github.opts.privateKey]);
    await setStatus({ state: 'running', step: 0, phase: 'preparing the sandbox' });

    // 3. Clone on the host through the mirror cache.
    const repoInfo = (await client.request('GET /repos/{owner}/{repo}', { owner: job.owner, repo: job.repo })).data;
    const baseBranch = repoInfo.default_branch;
    const mirrorDir = await step('mirror', () => updateMirror(deps.env.LILYPAD_DATA_DIR, repoInfo.clone_url, token.gitAuthHeader()));
    const checkout: Checkout = await step('checkout', () => checkoutFromMirror(mirrorDir, baseBranch));
    cleanups.push(() => checkout.dispose());

    // 4. Sandbox: setup with network, cut, tests before, agent, patch, tests after.
    const outDir = path.join(deps.env.LILYPAD_DATA_DIR, 'runs', runId);
    await mkdir(outDir, { recursive: true });
    const trajectory = new JsonlTrajectory(path.join(outDir, 'trajectory.jsonl'), scanner);
    cleanups.push(() => trajectory.close());
    const client4model = new ModelClient({
      baseURL: deps.env.OPENAI_BASE_URL,
      apiKey: deps.env.OPENAI_API_KEY,
      timeoutMs: deps.env.LILYPAD_MODEL_TIMEOUT_SECONDS * 1000,
      maxRetries: deps.env.LILYPAD_MODEL_RETRIES,
      retryBaseMs: deps.env.LILYPAD_MODEL_RETRY_BASE_MS,
    });
    const model = await step('model', () => client4model.resolveModel(deps.env.LILYPAD_MODEL, signal));
    const prepared = prepareIssue(issue.title, issue.body);
    const image = config.image ?? deps.env.LILYPAD_SANDBOX_IMAGE;
    if (!imageAllowed(image, deps.env.LILYPAD_SANDBOX_IMAGE, deps.env.LILYPAD_ALLOWED_IMAGES)) {
      throw new UserError(
        `the sandbox image \`${image}\` named in \`.github/lilypad.yml\` is not allowed on this Lilypad installation.`,
        `use the default image (remove \`image:\`) or one that matches LILYPAD_ALLOWED_IMAGES (${deps.env.LILYPAD_ALLOWED_IMAGES}); ask the administrator to allow another.`,
      );
    }
    // The repository may ask for less than the administrator allows, never more.
    const maxSteps = Math.min(config.max_steps, deps.env.LILYPAD_MAX_STEPS);
    const started = Date.now();
    let lastStatusAt = 0;
    const statusEveryMs = deps.env.LILYPAD_STATUS_INTERVAL_MS;
    const phaseStatus = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
      if (name === 'tests_before' || name === 'tests_after') await setStatus({ state: 'testing', which: name === 'tests_before' ? 'before' : 'after' });
      if (name === 'agent') await setStatus({ state: 'running', step: 0, phase: 'the agent is starting' });
      return step(name, fn);
    };
    const session: SandboxSessionResult = await runSandboxSession({
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
      runId,
      workerId: deps.workerId,
      labels: { ...deps.labels, 'dev.lilypad.issue': `${job.owner}/${job.repo}#${job.issueNumber}` },
      setup: config.setup,
      setupNetwork: deps.setupNetwork,
      setupTimeoutSeconds: Math.min(config.setup_timeout_minutes * 60, deps.env.LILYPAD_SETUP_TIMEOUT_SECONDS),
      testCommand: config.test,
      testTimeoutSeconds: Math.min(config.test_timeout_minutes * 60, deps.env.LILYPAD_TEST_TIMEOUT_SECONDS),
      issue: prepared,
      model,
      client: client4model,
      budgets: {
        maxSteps,
        maxContextTokens: deps.env.LILYPAD_MAX_CONTEXT_TOKENS,
        maxTokensPerTurn: deps.env.LILYPAD_MAX_TOKENS_PER_TURN,
        maxWallSeconds: Math.min(config.max_minutes * 60, deps.env.LILYPAD_MAX_WALL_SECONDS),
        bashTimeoutCapSeconds: deps.env.LILYPAD_BASH_TIMEOUT_CAP_SECONDS,
      },
      trajectory,
      signal,
      phase: phaseStatus,
      onProgress: (p) => {
        if (Date.now() - lastStatusAt < statusEveryMs) return;
        lastStatusAt = Date.now();
        if (progressPending) return;
        progressPending = true;
        void setStatus({ state: 'running', step: p.step, phase: `agent step ${p.step} of at most ${maxSteps}` }).finally(() => (progressPending = false));
      },
    });
    const agent = session.agent;
    if (agent.exitReason === 'cancelled') throw new CancelledError();
    const warnings = [...agent.warnings];
    if (prepared.warning) warnings.push(prepared.warning);

    // 5. The diff leaves the container as data; filter, scan, commit as the app.
    const patch = session.patch?.diff ?? Buffer.alloc(0);
    if (patch.length === 0) {
      const why =
        agent.exitReason === 'agent'
          ? `the agent finished without changing any file. Its last words: ${quoteLine(quoteUntrusted(scanner.redact(agent.finalAnswer)))}`
          : `the run ended (\`${agent.exitReason}\`${agent.error ? `: ${agent.error}` : ''}) before the agent changed any file.`;
      await setStatus({ state: 'no_change', why });
      return { result: 'no_change', why };
    }
    const identity = await deps.github.appIdentity();
    const host = new URL(repoInfo.html_url).host;
    const author = {
      name: `${identity.slug}[bot]`,
      email: `${identity.botUserId ?? identity.id}+${identity.slug}[bot]@users.noreply.${host}`,
    };
    const change: PreparedChange = await step('apply', () =>
      prepareChange({
        mirrorDir,
        baseCommit: checkout.baseCommit,
        patch,
        excludePaths: config.exclude_paths,
        message: `${issue.title.slice(0, 120)}\n\nDrafted by Lilypad for #${job.issueNumber}; needs human review.`,
        author,
      }),
    );
    cleanups.push(() => change.dispose());
    if (!change.hasChanges) {
      const why = `every file the agent changed is left out of pull requests: ${change.dropped.map((d) => `\`${d.path}\` (${d.reason})`).join('; ')}.`;
      await setStatus({ state: 'no_change', why });
      return { result: 'no_change', why };
    }
    const incomplete = BUDGET_EXITS.has(agent.exitReason);
    const body = renderPullRequestBody({
      issueNumber: job.issueNumber,
      issueTitle: issue.title,
      summary: scanner.redact(agent.finalAnswer),
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
    });
    const title = `${incomplete ? '[incomplete] ' : ''}Lilypad: ${issue.title}`.slice(0, 250);
    await refuseSecrets(scanner, patch, [body, title]);

    // 6. Push the branch and open (or update) the draft pull request. From the push on, a cancel
    //    no longer interrupts: a pushed branch without its pull request would be half-published.
    if (signal.aborted) throw new CancelledError(reasonText(signal.reason));
    const branch = branchFor(job.issueNumber);
    await step('push', () => pushBranch(change.dir, repoInfo.clone_url, branch, token.gitAuthHeader()));
    const pr = await upsertPullRequest(client, {
      owner: job.owner,
      repo: job.repo,
      branch,
      base: baseBranch,
      title,
      body,
      draft: config.draft,
      labels: config.labels,
      reviewers: config.reviewers ?? [job.triggeredBy],
    });
    for (const w of pr.warnings) log.warn({ warning: w }, 'pull request');
    await setStatus({ state: 'done', prUrl: pr.url, prNumber: pr.number, incomplete, updated: pr.updated, exitReason: agent.exitReason, draft: config.draft });
    return { result: 'pull_request', number: pr.number, url: pr.url, updated: pr.updated, incomplete };
  } finally {
    // 8. Release everything, newest first, whatever happened.
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => log.warn({ err: (err as Error).message }, 'cleanup failed'));
  }
}

interface IssueText {
  title: string;
  body: string;
}

/** Returns the issue text, or why the trigger no longer holds. */
async function validateTrigger(octokit: ProbotOctokit, job: RunJob): Promise<IssueText | string> {
  const issue = (await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: job.owner, repo: job.repo, issue_number: job.issueNumber })).data;
  if (issue.state !== 'open') return 'the issue was closed before the job started.';
  if (job.trigger === 'label') {
    const labels = issue.labels.map((l) => (typeof l === 'string' ? l : l.name ?? ''));
    if (!labels.some((l) => l.toLowerCase() === job.label.toLowerCase())) return `the \`${job.label}\` label was removed before the job started.`;
  }
  if (!(await hasWriteAccess(octokit as unknown as GitHubClient, job.owner, job.repo, job.triggeredBy))) {
    return `@${job.triggeredBy} no longer has write access to this repository.`;
  }
  return { title: issue.title, body: issue.body ?? '' };
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

/** The default image is always allowed; others must match one of the comma-separated patterns. */
export function imageAllowed(image: string, defaultImage: string, patterns: string): boolean {
  if (image === defaultImage) return true;
  return patterns
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
    .some((p) => new RegExp(`^${p.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`).test(image));
}

function quoteLine(text: string): string {
  const one = text.replace(/\s+/g, ' ').trim().slice(0, 300);
  return one ? `“${one}”` : '(none)';
}

export type { RepoToken };
