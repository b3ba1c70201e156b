import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Env } from '../config/env.ts';
import type { Logger } from '../observability/logger.ts';
import type { CancelBus } from '../queue/cancel-bus.ts';
import { editsKey, finishingKey, pinText, runJobId, type EventJob, type IssueEdit, type PinnedText, type RunJob } from '../queue/jobs.ts';
import { withRedisLock } from '../queue/redis-lock.ts';
import type { GitHubApp } from './app-auth.ts';
import type { GitHubClient, IssueRef } from './client.ts';
import { releaseCi } from './ci-release.ts';
import { hasWriteAccess } from './permissions.ts';
import { CONFIG_PATH, loadRepoConfig } from './repo-config-loader.ts';
import type { StatusComments } from './status-comment.ts';

export interface TriggerDeps {
  env: Env;
  github: GitHubApp;
  runs: Queue<RunJob>;
  redis: Redis;
  status: StatusComments;
  cancelBus: CancelBus;
  logger: Logger;
}

export type Intent = { kind: 'trigger'; label: string } | { kind: 'cancel'; why: string } | { kind: 'ignore' };

const LIVE_STATES = new Set(['waiting', 'delayed', 'active', 'prioritized', 'waiting-children']);

/** What a webhook asks for, given the repository's trigger label. */
export function intentOf(evt: EventJob, triggerLabel: string): Intent {
  const same = (l: string | undefined) => (l ?? '').toLowerCase() === triggerLabel.toLowerCase();
  switch (evt.kind) {
    case 'labeled':
      return same(evt.label) ? { kind: 'trigger', label: triggerLabel } : { kind: 'ignore' };
    case 'unlabeled':
      return same(evt.label) ? { kind: 'cancel', why: `the \`${triggerLabel}\` label was removed` } : { kind: 'ignore' };
    case 'closed':
      return { kind: 'cancel', why: 'the issue was closed' };
    case 'edited':
    case 'ci':
      return { kind: 'ignore' };
    case 'comment': {
      const words = (evt.commentBody ?? '').trim().split(/\s+/);
      if (words[0]?.toLowerCase() !== '/lilypad') return { kind: 'ignore' };
      const sub = words[1]?.toLowerCase();
      if (sub === undefined || sub === 'run' || sub === 'start') return { kind: 'trigger', label: triggerLabel };
      if (sub === 'cancel' || sub === 'stop') return { kind: 'cancel', why: 'cancelled with `/lilypad cancel`' };
      return { kind: 'ignore' };
    }
  }
}

/**
 * Turns one webhook event into a decision: start a job, say it is already running, cancel,
 * refuse politely, report a bad configuration, or nothing. Runs in the worker, never in the
 * webhook request.
 */
export async function handleEvent(evt: EventJob, deps: TriggerDeps): Promise<string> {
  const ref: IssueRef = { owner: evt.owner, repo: evt.repo, issueNumber: evt.issueNumber };
  const installation = await deps.github.installation(evt.installationId);
  const octokit = installation as unknown as GitHubClient;
  const jobId = runJobId(evt.repoId, evt.issueNumber);

  // An issue closed needs no permission check: a job for a closed issue is stale anyway.
  if (evt.kind === 'closed') return cancel(evt, deps, octokit, ref, jobId, 'the issue was closed', false);
  if (evt.kind === 'edited') return recordEdit(evt, deps, octokit, jobId);

  const loaded = await loadRepoConfig(installation, evt.owner, evt.repo);
  const triggerLabel = loaded.ok ? loaded.config.trigger_label : 'lilypad';
  const allowBots = loaded.ok ? loaded.config.allow_bots : [];
  if (evt.kind === 'ci') {
    if (evt.sender.type === 'Bot' && !allowBots.includes(evt.sender.login)) return `ignored: bot ${evt.sender.login} is not in allow_bots`;
    return ciCommand(evt, deps, octokit, ref, triggerLabel);
  }
  const intent = intentOf(evt, triggerLabel);
  if (intent.kind === 'ignore') return 'ignored: not a Lilypad event';

  if (evt.sender.type === 'Bot' && !allowBots.includes(evt.sender.login)) return `ignored: bot ${evt.sender.login} is not in allow_bots`;

  if (!(await hasWriteAccess(octokit, evt.owner, evt.repo, evt.sender.login))) {
    await replyOnce(deps, octokit, ref, `denied:${evt.sender.login}`, politeRefusal(evt.sender.login, triggerLabel));
    return `refused: ${evt.sender.login} lacks write access`;
  }

  if (intent.kind === 'cancel') return cancel(evt, deps, octokit, ref, jobId, intent.why, true);

  if (!loaded.ok) {
    const body =
      `**Lilypad** could not start: \`${loaded.source ?? CONFIG_PATH}\` is not valid.\n\n` +
      `${loaded.problems.map((p) => `- ${p}`).join('\n')}\n\nFix the file, then label the issue again or comment \`/lilypad\`.`;
    await comment(octokit, ref, body);
    return 'refused: invalid configuration';
  }
  return startJob(evt, deps, octokit, ref, jobId, intent.label);
}

async function startJob(evt: EventJob, deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef, jobId: string, label: string): Promise<string> {
  return withIssueLock(deps, jobId, async () => {
    const existing = await deps.runs.getJob(jobId);
    let state = existing ? await existing.getState() : undefined;
    if (existing && state === 'active' && (await deps.redis.exists(finishingKey(deps.env.LILYPAD_QUEUE_PREFIX, jobId)))) {
      // Its final status is written; BullMQ is about to mark it completed: this is a re-run.
      state = await waitUntilNotActive(existing);
    }
    if (existing && state && LIVE_STATES.has(state)) {
      const what = state === 'active' ? 'is already working on this issue' : 'already has this issue in its queue';
      await react(octokit, ref, evt);
      await comment(octokit, ref, `@${evt.sender.login} Lilypad ${what}; see the status comment above. Remove the label or comment \`/lilypad cancel\` to stop it.`);
      return `duplicate: job ${jobId} is ${state}`;
    }
    if (existing) {
      // A finished job that cannot be removed would swallow this trigger after "Queued" is shown.
      await existing.remove().catch((err: unknown) => {
        throw new Error(`could not replace the finished job ${jobId}: ${(err as Error).message}`);
      });
    }
    await deps.cancelBus.clear(jobId);
    await deps.redis.del(editsKey(deps.env.LILYPAD_QUEUE_PREFIX, jobId), finishingKey(deps.env.LILYPAD_QUEUE_PREFIX, jobId));
    const pinned = evt.issueTitle !== undefined ? pinText(evt.issueTitle, evt.issueBody) : await currentText(octokit, ref);
    const data: RunJob = {
      installationId: evt.installationId,
      repoId: evt.repoId,
      owner: evt.owner,
      repo: evt.repo,
      issueNumber: evt.issueNumber,
      triggeredBy: evt.sender.login,
      trigger: evt.kind === 'comment' ? 'comment' : 'label',
      label,
      deliveryId: evt.deliveryId,
      queuedAt: new Date().toISOString(),
      pinned,
    };
    // Say "queued" before the job exists, so a fast worker's "running" can never be overwritten.
    const position = (await deps.runs.getWaitingCount()) + 1;
    await deps.status.set(octokit, ref, { state: 'queued', position, ...(evt.note ? { note: evt.note } : {}) }, evt.sender.login);
    await deps.runs.add('run', data, {
      jobId,
      attempts: deps.env.LILYPAD_JOB_ATTEMPTS,
      backoff: { type: 'exponential', delay: deps.env.LILYPAD_JOB_RETRY_DELAY_MS },
      removeOnComplete: { age: 7 * 24 * 3600 },
      removeOnFail: { age: 30 * 24 * 3600 },
    });
    await react(octokit, ref, evt);
    return `queued: ${jobId}`;
  });
}

async function cancel(evt: EventJob, deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef, jobId: string, why: string, byUser: boolean): Promise<string> {
  return withIssueLock(deps, jobId, async () => {
    const job: Job<RunJob> | undefined = await deps.runs.getJob(jobId);
    const state = job ? await job.getState() : undefined;
    if (!job || !state || !LIVE_STATES.has(state)) {
      if (evt.kind === 'comment') await comment(octokit, ref, `@${evt.sender.login} there is no Lilypad job to cancel on this issue.`);
      return 'nothing to cancel';
    }
    const by = byUser ? evt.sender.login : undefined;
    if (state !== 'active') {
      const removed = await job.remove().then(
        () => true,
        () => false, // it became active meanwhile: cancel it where it runs
      );
      if (removed) {
        await deps.status.set(octokit, ref, { state: 'cancelled', by, why }, job.data.triggeredBy);
        await react(octokit, ref, evt);
        return `removed queued job ${jobId}`;
      }
    }
    await deps.cancelBus.request({ jobId, by, why });
    await react(octokit, ref, evt);
    return `cancel requested for running job ${jobId}`;
  });
}

/** `/lilypad ci` on a pull request: a writer releases the CI that Lilypad's commits hold. */
async function ciCommand(evt: EventJob, deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef, label: string): Promise<string> {
  if (!(await hasWriteAccess(octokit, evt.owner, evt.repo, evt.sender.login))) {
    await replyOnce(deps, octokit, ref, `denied-ci:${evt.sender.login}`, politeRefusal(evt.sender.login, label));
    return `refused: ${evt.sender.login} lacks write access`;
  }
  await react(octokit, ref, { ...evt, kind: 'comment' });
  const outcome = await releaseCi(octokit, { github: deps.github, installationId: evt.installationId, owner: evt.owner, repo: evt.repo, pullNumber: evt.issueNumber, requestedBy: evt.sender.login });
  await comment(octokit, ref, `**Lilypad**: ${outcome}.`);
  return `ci: ${outcome}`;
}

async function waitUntilNotActive(job: Job<RunJob>): Promise<Awaited<ReturnType<Job<RunJob>["getState"]>>> {
  const until = Date.now() + 20_000;
  let state = await job.getState();
  while (state === 'active' && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 200));
    state = await job.getState();
  }
  return state;
}

/** An edit of an issue whose job waits or runs: remember who made it and whether they may. */
async function recordEdit(evt: EventJob, deps: TriggerDeps, octokit: GitHubClient, jobId: string): Promise<string> {
  const job = await deps.runs.getJob(jobId);
  const state = job ? await job.getState() : undefined;
  if (!state || !LIVE_STATES.has(state)) return 'ignored: no live job for the edited issue';
  const writer = evt.sender.type !== 'Bot' && (await hasWriteAccess(octokit, evt.owner, evt.repo, evt.sender.login));
  const entry: IssueEdit = { login: evt.sender.login, writer, at: evt.receivedAt };
  await deps.redis.multi().rpush(editsKey(deps.env.LILYPAD_QUEUE_PREFIX, jobId), JSON.stringify(entry)).expire(editsKey(deps.env.LILYPAD_QUEUE_PREFIX, jobId), 30 * 24 * 3600).exec();
  return `recorded an edit by ${evt.sender.login} (${writer ? 'writer' : 'no write access'})`;
}

async function currentText(octokit: GitHubClient, ref: IssueRef): Promise<PinnedText> {
  const issue = (await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: ref.owner, repo: ref.repo, issue_number: ref.issueNumber })).data;
  return pinText(issue.title, issue.body);
}

function withIssueLock<T>(deps: TriggerDeps, jobId: string, fn: () => Promise<T>): Promise<T> {
  return withRedisLock(deps.redis, `${deps.env.LILYPAD_QUEUE_PREFIX}:lock:${jobId}`, { ttlMs: 30_000, waitMs: 10_000 }, fn);
}

async function comment(octokit: GitHubClient, ref: IssueRef, body: string): Promise<void> {
  await octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', { owner: ref.owner, repo: ref.repo, issue_number: ref.issueNumber, body });
}

/** Acknowledges a `/lilypad` comment with 👀 (best effort). */
async function react(octokit: GitHubClient, ref: IssueRef, evt: EventJob): Promise<void> {
  if (evt.kind !== 'comment' || !evt.commentId) return;
  await octokit
    .request('POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions', { owner: ref.owner, repo: ref.repo, comment_id: evt.commentId, content: 'eyes' })
    .catch(() => undefined);
}

/** One reply per person and issue, however often they try. */
async function replyOnce(deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef, what: string, body: string): Promise<void> {
  const key = `${deps.env.LILYPAD_QUEUE_PREFIX}:replied:${ref.owner}/${ref.repo}#${ref.issueNumber}:${what}`.toLowerCase();
  if ((await deps.redis.set(key, '1', 'EX', 90 * 24 * 3600, 'NX')) !== 'OK') return;
  await comment(octokit, ref, body);
}

export function politeRefusal(login: string, label: string): string {
  return (
    `Thanks, @${login}! Lilypad can only be started or stopped by people with write, maintain or admin access to this repository. ` +
    `A maintainer can start it by adding the \`${label}\` label or commenting \`/lilypad\`.`
  );
}
