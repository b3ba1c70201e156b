import type { Redis } from 'ioredis';
import type { GitHubClient, IssueRef } from '../github/client.ts';
import { replyOnce } from '../github/replies.ts';
import type { StatusWriter } from '../github/status-comment.ts';
import type { RunStore } from '../observability/run-store.ts';
import type { CancelBus } from '../store/cancel-bus.ts';
import {
  appendRequest,
  clearCurrentFollowup,
  countFollowupRun,
  currentFollowup,
  dropPendingRequests,
  firstPendingRequest,
  followupRunCount,
  forgetTakenRequests,
  lastFollowupSeq,
  setCurrentFollowup,
  withFollowupLock,
  type FollowupRequest,
} from '../store/followup-requests.ts';
import { followupJobId } from '../store/jobs.ts';
import { isLive, type RunQueue } from '../store/run-queue.ts';
import { writeQueuedJobOutcome } from './outcome.ts';

/**
 * Follow-up runs on Lilypad's pull requests, serialised per pull request: one runs at a time;
 * requests that arrive meanwhile wait in a list and are coalesced into the next run (not lost, not
 * run in parallel). A run takes every waiting request when it starts; when it ends, the next run is
 * queued if requests arrived meanwhile. What is kept in Redis, and how: store/followup-requests.ts.
 */
/** Which pull request (and installation) follow-up requests are for: enough to reach it on GitHub and in Redis. */
export interface FollowupPullRef {
  installationId: number;
  repoId: number;
  owner: string;
  repo: string;
  pullNumber: number;
  /** The issue the pull request was opened for. */
  issueNumber: number;
}

export interface FollowupDeps {
  redis: Redis;
  prefix: string;
  runs: RunQueue;
  status: StatusWriter;
  cancelBus: CancelBus;
  runStore: RunStore;
}

const prRef = (t: FollowupPullRef): IssueRef => ({ owner: t.owner, repo: t.repo, issueNumber: t.pullNumber });
const lock = <T>(deps: FollowupDeps, t: FollowupPullRef, fn: () => Promise<T>) => withFollowupLock(deps.redis, deps.prefix, t, fn);

/** Records a request; queues a run unless one is waiting or running (which then takes it). */
export async function requestFollowup(deps: FollowupDeps, client: GitHubClient, target: FollowupPullRef, req: FollowupRequest): Promise<string> {
  return lock(deps, target, () => appendAndQueue(deps, client, target, req));
}

/**
 * Lilypad's own requests (an automatic CI fix): made only while no follow-up runs or waits on the
 * pull request, decided under the same lock as every request, so nothing slips in between. Null:
 * one does, and nothing was recorded.
 */
export async function requestFollowupIfIdle(deps: FollowupDeps, client: GitHubClient, target: FollowupPullRef, req: FollowupRequest): Promise<string | null> {
  return lock(deps, target, async () => {
    const current = await currentFollowup(deps.redis, deps.prefix, target);
    if (current && isLive(await deps.runs.state(current))) return null;
    if (await firstPendingRequest(deps.redis, deps.prefix, target)) return null;
    return appendAndQueue(deps, client, target, req);
  });
}

async function appendAndQueue(deps: FollowupDeps, client: GitHubClient, target: FollowupPullRef, req: FollowupRequest): Promise<string> {
  await appendRequest(deps.redis, deps.prefix, target, req);
  const current = await currentFollowup(deps.redis, deps.prefix, target);
  const state = current ? await deps.runs.state(current) : undefined;
  if (current && isLive(state)) return `coalesced into follow-up ${current} (${state})`;
  const queued = await queueNext(deps, client, target, req);
  if (queued) return `queued: ${queued}`;
  await dropPendingRequests(deps.redis, deps.prefix, target);
  await clearCurrentFollowup(deps.redis, deps.prefix, target);
  return `refused: max_followups (${req.maxFollowups ?? DEFAULT_MAX_FOLLOWUPS}) reached`;
}

const DEFAULT_MAX_FOLLOWUPS = 10;

/** After a follow-up run ends (however): the next one, if requests arrived meanwhile. */
export async function followupEnded(deps: FollowupDeps, client: GitHubClient, target: FollowupPullRef, jobId: string): Promise<string | null> {
  return lock(deps, target, async () => {
    await forgetTakenRequests(deps.redis, deps.prefix, jobId);
    if ((await currentFollowup(deps.redis, deps.prefix, target)) !== jobId) return null;
    const next = await firstPendingRequest(deps.redis, deps.prefix, target);
    const queued = next ? await queueNext(deps, client, target, next) : null;
    if (!queued) {
      await clearCurrentFollowup(deps.redis, deps.prefix, target);
      // Requests refused by max_followups are not kept for a later run.
      if (next) await dropPendingRequests(deps.redis, deps.prefix, target);
    }
    return queued;
  });
}

/** `/lilypad cancel`, a closed pull request, or the label removed: drop waiting requests, stop the run. */
export async function cancelFollowups(deps: FollowupDeps, client: GitHubClient, target: FollowupPullRef, by: string | undefined, why: string): Promise<string> {
  return lock(deps, target, async () => {
    const dropped = await dropPendingRequests(deps.redis, deps.prefix, target);
    const current = await currentFollowup(deps.redis, deps.prefix, target);
    const state = current ? await deps.runs.state(current) : undefined;
    if (!current || !isLive(state)) return dropped > 0 ? `dropped ${dropped} waiting request(s)` : 'nothing to cancel';
    if (state !== 'active') {
      const data = await deps.runs.data(current);
      if (await deps.runs.remove(current)) {
        await clearCurrentFollowup(deps.redis, deps.prefix, target);
        if (data?.kind === 'followup') await writeQueuedJobOutcome(deps, client, { id: current, data, attempt: 0 }, { result: 'cancelled', by, why });
        return `removed waiting follow-up ${current}`;
      }
    }
    await deps.cancelBus.request({ jobId: current, by, why });
    return `cancel requested for follow-up ${current}`;
  });
}

/**
 * Queues the next follow-up run, or, when the pull request has had `max_followups` of them since
 * its last full run, says so once (an allowed review bot that requests changes on every push
 * would otherwise loop for ever) and returns null.
 */
async function queueNext(deps: FollowupDeps, client: GitHubClient, target: FollowupPullRef, first: FollowupRequest): Promise<string | null> {
  const max = first.maxFollowups ?? DEFAULT_MAX_FOLLOWUPS;
  const done = await followupRunCount(deps.redis, deps.prefix, target);
  if (done >= max) {
    const epoch = await lastFollowupSeq(deps.redis, deps.prefix, target);
    const body =
      `**Lilypad** has revised this pull request ${done} time${done === 1 ? '' : 's'} since its last full run, the most this repository allows ` +
      `(\`max_followups: ${max}\` in \`.github/lilypad.yml\`), so it did not start another run for @${first.by}. ` +
      `To go on: push the changes yourselves, raise \`max_followups\`, or label issue #${target.issueNumber} again (remove and add the label) for a fresh run, which starts the count again.`;
    await replyOnce(deps.redis, deps.prefix, client, prRef(target), `followup-cap:${epoch}`, body);
    return null;
  }
  const seq = await countFollowupRun(deps.redis, deps.prefix, target);
  const jobId = followupJobId(target.repoId, target.pullNumber, seq);
  const slot = `followup-${seq}`;
  // "Queued" first, so that a fast worker's "running" can never be overwritten by it.
  const note = first.ci?.auto ? 'Started by Lilypad itself: CI fails on this pull request (`ci_fix: auto`).' : undefined;
  await deps.status.set(client, prRef(target), { state: 'queued', position: (await deps.runs.waitingCount()) + 1, ...(note ? { note } : {}) }, first.by, slot);
  await deps.runs.add(jobId, {
    kind: 'followup',
    installationId: target.installationId,
    repoId: target.repoId,
    owner: target.owner,
    repo: target.repo,
    issueNumber: target.issueNumber,
    pullNumber: target.pullNumber,
    statusSlot: slot,
    triggeredBy: first.by,
    trigger: first.trigger,
    label: '',
    deliveryId: first.deliveryId,
    queuedAt: new Date().toISOString(),
  });
  await setCurrentFollowup(deps.redis, deps.prefix, target, jobId);
  return jobId;
}

