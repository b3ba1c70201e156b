import type { Redis } from 'ioredis';
import type { Env } from '../config/env.ts';
import type { GitHubApp } from '../github/app-auth.ts';
import { releaseCi } from '../github/ci-release.ts';
import type { GitHubClient, IssueRef } from '../github/client.ts';
import { hasWriteAccess } from '../github/permissions.ts';
import { acknowledge, comment, politeRefusal, replyOnce, type Acknowledged } from '../github/replies.ts';
import { CONFIG_PATH, loadRepoConfig } from '../github/repo-config-loader.ts';
import type { StatusComments } from '../github/status-comment.ts';
import type { Logger } from '../observability/logger.ts';
import type { RunStore } from '../observability/run-store.ts';
import type { CancelBus } from '../store/cancel-bus.ts';
import { clearFinishing, isFinishing } from '../store/finishing-marks.ts';
import { forgetIssueEdits, recordIssueEdit, type IssueEdit } from '../store/issue-edits.ts';
import { isCiEvent, pinText, runJobId, type EventJob, type IssueEventJob, type PinnedText, type RunJob } from '../store/jobs.ts';
import { withRedisLock } from '../store/redis-lock.ts';
import { isLive, type JobState, type RunQueue } from '../store/run-queue.ts';
import { ciFixCommand, handleCiEvent } from './ci-triggers.ts';
import { cancelFollowups, requestFollowup, type FollowupDeps, type FollowupPullRef } from './followups.ts';
import { readPrRecord } from '../store/pull-records.ts';
import { keys } from '../store/keys.ts';
import { readWithheld } from '../store/withheld-changes.ts';
import { writeQueuedJobOutcome } from './outcome.ts';

export interface TriggerDeps {
  env: Env;
  github: GitHubApp;
  runs: RunQueue;
  redis: Redis;
  status: StatusComments;
  cancelBus: CancelBus;
  logger: Logger;
  /** Where the run record of a job removed while it waits is written. */
  runStore: RunStore;
}

export type Intent = { kind: 'trigger'; label: string } | { kind: 'cancel'; why: string } | { kind: 'publish' } | { kind: 'ignore' };

/** What a webhook asks for, given the repository's trigger label. */
export function intentOf(evt: IssueEventJob, triggerLabel: string): Intent {
  const same = (l: string | undefined) => (l ?? '').toLowerCase() === triggerLabel.toLowerCase();
  switch (evt.kind) {
    case 'labeled':
      return same(evt.label) ? { kind: 'trigger', label: triggerLabel } : { kind: 'ignore' };
    case 'unlabeled':
      return same(evt.label) ? { kind: 'cancel', why: `the \`${triggerLabel}\` label was removed` } : { kind: 'ignore' };
    case 'closed':
      return { kind: 'cancel', why: 'the issue was closed' };
    case 'edited':
    case 'pr_comment':
    case 'review':
    case 'review_comment':
    case 'pr_closed':
    case 'pr_unlabeled':
      return { kind: 'ignore' };
    case 'comment': {
      const words = (evt.commentBody ?? '').trim().split(/\s+/);
      if (words[0]?.toLowerCase() !== '/lilypad') return { kind: 'ignore' };
      const sub = words[1]?.toLowerCase();
      if (sub === undefined || sub === 'run' || sub === 'start') return { kind: 'trigger', label: triggerLabel };
      if (sub === 'cancel' || sub === 'stop') return { kind: 'cancel', why: 'cancelled with `/lilypad cancel`' };
      if (sub === 'publish' && words.length === 2) return { kind: 'publish' };
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
  if (isCiEvent(evt)) return handleCiEvent(evt, deps);
  const ref: IssueRef = { owner: evt.owner, repo: evt.repo, issueNumber: evt.issueNumber };
  const installation = await deps.github.installation(evt.installationId);
  const octokit: GitHubClient = installation;
  const jobId = runJobId(evt.repoId, evt.issueNumber);

  // An issue closed needs no permission check: a job for a closed issue is stale anyway.
  if (evt.kind === 'closed') return cancel(evt, deps, octokit, ref, jobId, 'the issue was closed', false);
  if (evt.kind === 'edited') return recordEdit(evt, deps, octokit, jobId);
  if (PR_EVENTS.has(evt.kind)) return handlePullRequestEvent(evt, deps, octokit, ref);

  const loaded = await loadRepoConfig(installation, evt.owner, evt.repo);
  const triggerLabel = loaded.ok ? loaded.config.trigger_label : 'lilypad';
  const allowBots = loaded.ok ? loaded.config.allow_bots : [];
  const intent = intentOf(evt, triggerLabel);
  if (intent.kind === 'ignore') return 'ignored: not a Lilypad event';

  if (evt.sender.type === 'Bot' && !allowBots.includes(evt.sender.login)) return `ignored: bot ${evt.sender.login} is not in allow_bots`;

  if (!(await hasWriteAccess(octokit, evt.owner, evt.repo, evt.sender.login))) {
    await replyOnce(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, octokit, ref, `denied:${evt.sender.login}`, politeRefusal(evt.sender.login, triggerLabel));
    return `refused: ${evt.sender.login} lacks write access`;
  }

  const stale = await staleLabelEvent(evt, octokit, ref, triggerLabel);
  if (stale) return stale;

  if (intent.kind === 'cancel') return cancel(evt, deps, octokit, ref, jobId, intent.why, true);

  if (!loaded.ok) {
    const body =
      `**Lilypad** could not start: \`${loaded.source ?? CONFIG_PATH}\` is not valid.\n\n` +
      `${loaded.problems.map((p) => `- ${p}`).join('\n')}\n\nFix the file, then label the issue again or comment \`/lilypad\`.`;
    await comment(octokit, ref, body);
    return 'refused: invalid configuration';
  }
  if (intent.kind === 'publish') return publishCommand(evt, deps, octokit, ref, jobId, triggerLabel);
  return startJob(evt, deps, octokit, ref, jobId, intent.label);
}

/**
 * `/lilypad publish` on an issue whose last run kept its change (`publish: verified`, not verified):
 * a job that opens that change as a draft pull request, with no agent. Nothing kept: a reply says so.
 */
async function publishCommand(evt: IssueEventJob, deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef, jobId: string, label: string): Promise<string> {
  const kept = await readWithheld(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, evt.repoId, evt.issueNumber);
  if (!kept) {
    await acknowledge(octokit, ref, acknowledged(evt));
    await comment(octokit, ref, `@${evt.sender.login} there is no change kept on this issue to publish: \`/lilypad publish\` opens the change of a run that was not published because of \`publish: verified\` (kept 30 days). Label the issue or comment \`/lilypad\` for a new run.`);
    return 'refused: nothing kept to publish';
  }
  return startJob(evt, deps, octokit, ref, jobId, label, kept.runId);
}

async function startJob(evt: IssueEventJob, deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef, jobId: string, label: string, publishKept?: string): Promise<string> {
  return withIssueLock(deps, jobId, async () => {
    let state = await deps.runs.state(jobId);
    if (state === 'active' && (await isFinishing(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, jobId))) {
      // Its final status is written; the queue is about to mark it completed: this is a re-run.
      state = await waitUntilNotActive(deps.runs, jobId);
    }
    if (isLive(state)) {
      const what = state === 'active' ? 'is already working on this issue' : 'already has this issue in its queue';
      await acknowledge(octokit, ref, acknowledged(evt));
      await comment(octokit, ref, `@${evt.sender.login} Lilypad ${what}; see the status comment above. Remove the label or comment \`/lilypad cancel\` to stop it.`);
      return `duplicate: job ${jobId} is ${state}`;
    }
    // A finished job that cannot be removed would swallow this trigger after "Queued" is shown.
    if (state !== undefined && !(await deps.runs.remove(jobId))) throw new Error(`could not replace the finished job ${jobId}`);
    await deps.cancelBus.clear(jobId);
    await forgetIssueEdits(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, jobId);
    await clearFinishing(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, jobId);
    const pinned = evt.issueTitle !== undefined ? pinText(evt.issueTitle, evt.issueBody) : await currentText(octokit, ref);
    const data: RunJob = {
      kind: 'issue',
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
      ...(publishKept ? { publishKept } : {}),
    };
    // Say "queued" before the job exists, so a fast worker's "running" can never be overwritten.
    const position = (await deps.runs.waitingCount()) + 1;
    await deps.status.set(octokit, ref, { state: 'queued', position, ...(evt.note ? { note: evt.note } : {}) }, evt.sender.login);
    await deps.runs.add(jobId, data);
    await acknowledge(octokit, ref, acknowledged(evt));
    return `queued: ${jobId}`;
  });
}

async function cancel(evt: IssueEventJob, deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef, jobId: string, why: string, byUser: boolean): Promise<string> {
  return withIssueLock(deps, jobId, async () => {
    const state = await deps.runs.state(jobId);
    const job = await deps.runs.data(jobId);
    if (!job || !isLive(state)) {
      if (evt.kind === 'comment') await comment(octokit, ref, `@${evt.sender.login} there is no Lilypad job to cancel on this issue.`);
      return 'nothing to cancel';
    }
    const by = byUser ? evt.sender.login : undefined;
    if (state !== 'active') {
      // false: it became active meanwhile; cancel it where it runs
      if (await deps.runs.remove(jobId)) {
        await writeQueuedJobOutcome(deps, octokit, { id: jobId, data: job, attempt: 0 }, { result: 'cancelled', by, why });
        await acknowledge(octokit, ref, acknowledged(evt));
        return `removed queued job ${jobId}`;
      }
    }
    await deps.cancelBus.request({ jobId, by, why });
    await acknowledge(octokit, ref, acknowledged(evt));
    return `cancel requested for running job ${jobId}`;
  });
}

/**
 * `/lilypad ci` on a pull request: a writer releases the CI that Lilypad's commits hold. What they
 * read is what the branch held when they wrote the command: the comment's own creation time (from
 * GitHub, not the delivery) bounds the tip that may be released.
 */
async function ciCommand(evt: IssueEventJob, deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef, sha: string | undefined): Promise<string> {
  await acknowledge(octokit, ref, acknowledged(evt));
  const commandAt = evt.commentId
    ? (await octokit.request('GET /repos/{owner}/{repo}/issues/comments/{comment_id}', { owner: evt.owner, repo: evt.repo, comment_id: evt.commentId })).data.created_at
    : evt.receivedAt;
  const outcome = await releaseCi(octokit, {
    github: deps.github,
    redis: deps.redis,
    prefix: deps.env.LILYPAD_QUEUE_PREFIX,
    repoId: evt.repoId,
    installationId: evt.installationId,
    owner: evt.owner,
    repo: evt.repo,
    pullNumber: evt.issueNumber,
    requestedBy: evt.sender.login,
    commandAt,
    ...(sha ? { sha } : {}),
  });
  await comment(octokit, ref, `**Lilypad**: ${outcome}.`);
  return `ci: ${outcome}`;
}

/**
 * GitHub does not deliver webhooks in order, and workers handle them in parallel: a `labeled` or
 * `unlabeled` event is acted on only if the issue's labels still say so now. A removal handled
 * after the label was put back (or a label handled after it was taken off) is stale: the later
 * event decides.
 */
async function staleLabelEvent(evt: IssueEventJob, octokit: GitHubClient, ref: IssueRef, triggerLabel: string): Promise<string | undefined> {
  if (evt.kind !== 'labeled' && evt.kind !== 'unlabeled') return undefined;
  const { data } = await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}/labels', { owner: ref.owner, repo: ref.repo, issue_number: ref.issueNumber, per_page: 100 });
  const present = data.some((l) => l.name.toLowerCase() === triggerLabel.toLowerCase());
  if (evt.kind === 'labeled' && !present) return `ignored: stale labeled event, the \`${triggerLabel}\` label is no longer on the issue`;
  if (evt.kind === 'unlabeled' && present) return `ignored: stale unlabeled event, the \`${triggerLabel}\` label is on the issue again`;
  return undefined;
}

async function waitUntilNotActive(runs: RunQueue, jobId: string): Promise<JobState | undefined> {
  const until = Date.now() + 20_000;
  let state = await runs.state(jobId);
  while (state === 'active' && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 200));
    state = await runs.state(jobId);
  }
  return state;
}

/** An edit of an issue whose job waits or runs: remember who made it and whether they may. */
async function recordEdit(evt: IssueEventJob, deps: TriggerDeps, octokit: GitHubClient, jobId: string): Promise<string> {
  if (!isLive(await deps.runs.state(jobId))) return 'ignored: no live job for the edited issue';
  const writer = evt.sender.type !== 'Bot' && (await hasWriteAccess(octokit, evt.owner, evt.repo, evt.sender.login));
  const entry: IssueEdit = { login: evt.sender.login, writer, at: evt.receivedAt };
  await recordIssueEdit(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, jobId, entry);
  return `recorded an edit by ${evt.sender.login} (${writer ? 'writer' : 'no write access'})`;
}

async function currentText(octokit: GitHubClient, ref: IssueRef): Promise<PinnedText> {
  const issue = (await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: ref.owner, repo: ref.repo, issue_number: ref.issueNumber })).data;
  return pinText(issue.title, issue.body);
}

function withIssueLock<T>(deps: TriggerDeps, jobId: string, fn: () => Promise<T>): Promise<T> {
  return withRedisLock(deps.redis, keys.triggerLock(deps.env.LILYPAD_QUEUE_PREFIX, jobId), { ttlMs: 30_000, waitMs: 10_000 }, fn);
}

const PR_EVENTS = new Set<IssueEventJob['kind']>(['pr_comment', 'review', 'review_comment', 'pr_closed', 'pr_unlabeled']);

/** What a 👀 acknowledges for this event: the comment, the line comment, or the review. */
function acknowledged(evt: IssueEventJob): Acknowledged | null {
  if ((evt.kind === 'comment' || evt.kind === 'pr_comment') && evt.commentId) return { kind: 'comment', id: evt.commentId };
  if (evt.kind === 'review_comment' && evt.commentId) return { kind: 'review_comment', id: evt.commentId };
  if (evt.kind === 'review' && evt.reviewNodeId) return { kind: 'review', nodeId: evt.reviewNodeId };
  return null;
}

/** `/lilypad` and its words: `ci`, `fix-ci` (and instructions), `cancel` (or `stop`), or instructions (possibly none). */
export function parseCommand(
  text: string | undefined,
): { kind: 'ci'; sha?: string } | { kind: 'fix-ci'; instructions: string } | { kind: 'cancel' } | { kind: 'revise'; instructions: string } | null {
  const m = /^\s*\/lilypad\b([\s\S]*)$/i.exec(text ?? '');
  if (!m) return null;
  const rest = (m[1] ?? '').trim();
  const word = rest.split(/\s+/)[0]?.toLowerCase();
  const words = rest.split(/\s+/);
  if (word === 'ci' && words.length === 1) return { kind: 'ci' };
  // `/lilypad ci <sha>`: release exactly that commit (7 to 40 hex digits).
  if (word === 'ci' && words.length === 2 && /^[0-9a-f]{7,40}$/i.test(words[1]!)) return { kind: 'ci', sha: words[1]!.toLowerCase() };
  if (word === 'fix-ci') return { kind: 'fix-ci', instructions: rest.replace(/^fix-ci\b\s*/i, '') };
  if ((word === 'cancel' || word === 'stop') && rest.split(/\s+/).length <= 3) return { kind: 'cancel' };
  return { kind: 'revise', instructions: rest.replace(/^(run|start)\b\s*/i, '') };
}

/**
 * Events on a pull request. Only Lilypad's own pull requests (ones it opened and keeps a record
 * of) are revised; `/lilypad ci` keeps working on any Lilypad branch, as before.
 */
async function handlePullRequestEvent(evt: IssueEventJob, deps: TriggerDeps, octokit: GitHubClient, ref: IssueRef): Promise<string> {
  const prefix = deps.env.LILYPAD_QUEUE_PREFIX;
  const record = await readPrRecord(deps.redis, prefix, evt.repoId, evt.issueNumber);
  const target: FollowupPullRef | null = record
    ? { installationId: evt.installationId, repoId: evt.repoId, owner: evt.owner, repo: evt.repo, pullNumber: evt.issueNumber, issueNumber: record.issueNumber }
    : null;
  const fdeps: FollowupDeps = { redis: deps.redis, prefix, runs: deps.runs, status: deps.status, cancelBus: deps.cancelBus, runStore: deps.runStore };
  // Closing needs no permission check: a follow-up for a closed pull request is stale anyway.
  if (evt.kind === 'pr_closed') return target ? cancelFollowups(fdeps, octokit, target, undefined, 'the pull request was closed') : 'ignored: not a Lilypad pull request';

  const loaded = await loadRepoConfig(await deps.github.installation(evt.installationId), evt.owner, evt.repo);
  const triggerLabel = loaded.ok ? loaded.config.trigger_label : 'lilypad';
  const allowBots = loaded.ok ? loaded.config.allow_bots : [];
  const command = parseCommand(evt.commentBody);
  const wantsRevision =
    command?.kind === 'revise' ||
    (evt.kind === 'review' && evt.reviewState === 'changes_requested' && command === null && (!loaded.ok || loaded.config.review_trigger === 'changes_requested'));
  const intent: 'ci' | 'fix-ci' | 'cancel' | 'revise' | null =
    evt.kind === 'pr_unlabeled'
      ? (evt.label ?? '').toLowerCase() === triggerLabel.toLowerCase()
        ? 'cancel'
        : null
      : command?.kind === 'ci' || command?.kind === 'fix-ci' || command?.kind === 'cancel'
        ? command.kind
        : wantsRevision
          ? 'revise'
          : null;
  if (!intent) return 'ignored: not a Lilypad command';
  if (intent !== 'ci' && !target) return 'ignored: not a Lilypad pull request';

  if (evt.sender.type === 'Bot' && !allowBots.includes(evt.sender.login)) return `ignored: bot ${evt.sender.login} is not in allow_bots`;
  if (!(await hasWriteAccess(octokit, evt.owner, evt.repo, evt.sender.login))) {
    // A changes-requested review from a non-writer is ordinary review: no reply needed.
    if (command) await replyOnce(deps.redis, prefix, octokit, ref, `denied:${evt.sender.login}`, politeRefusal(evt.sender.login, triggerLabel));
    return `refused: ${evt.sender.login} lacks write access`;
  }
  if (intent === 'ci') return ciCommand(evt, deps, octokit, ref, command?.kind === 'ci' ? command.sha : undefined);
  if (intent === 'cancel') {
    await acknowledge(octokit, ref, acknowledged(evt));
    return cancelFollowups(fdeps, octokit, target!, evt.sender.login, evt.kind === 'pr_unlabeled' ? `the \`${triggerLabel}\` label was removed` : 'cancelled with `/lilypad cancel`');
  }
  if (!loaded.ok) {
    await comment(octokit, ref, `**Lilypad** could not start: \`${loaded.source ?? CONFIG_PATH}\` is not valid.\n\n${loaded.problems.map((p) => `- ${p}`).join('\n')}\n\nFix the file, then comment \`/lilypad\` again.`);
    return 'refused: invalid configuration';
  }
  await acknowledge(octokit, ref, acknowledged(evt));
  if (command?.kind === 'fix-ci') return ciFixCommand(evt, deps, octokit, target!, command.instructions, loaded.config);
  return requestFollowup(fdeps, octokit, target!, {
    by: evt.sender.login,
    instructions: command?.kind === 'revise' ? command.instructions : '',
    trigger: evt.kind === 'review' ? 'review' : evt.kind === 'review_comment' ? 'review_comment' : 'comment',
    ...(evt.commentId !== undefined ? { commentId: evt.commentId } : {}),
    ...(evt.reviewId !== undefined ? { reviewId: evt.reviewId } : {}),
    deliveryId: evt.deliveryId,
    at: evt.receivedAt,
    maxFollowups: loaded.config.max_followups,
  });
}
