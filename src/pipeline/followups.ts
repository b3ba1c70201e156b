import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { GitHubClient, IssueRef } from '../github/client.ts';
import { replyOnce } from '../github/replies.ts';
import type { StatusComments } from '../github/status-comment.ts';
import type { CancelBus } from '../queue/cancel-bus.ts';
import { followupJobId, type FollowupRunJob, type RunJob } from '../queue/jobs.ts';
import { withRedisLock } from '../queue/redis-lock.ts';
import { isLive, type RunQueue } from '../queue/run-queue.ts';
import { parseStoredList } from '../queue/stored-json.ts';
import { keys } from '../store/keys.ts';

/**
 * Follow-up runs on Lilypad's pull requests, serialised per pull request: one runs at a time;
 * requests that arrive meanwhile wait in a list and are coalesced into the next run (not lost, not
 * run in parallel). A run takes every waiting request when it starts; when it ends, the next run is
 * queued if requests arrived meanwhile.
 */
const followupRequestSchema = z.object({
  by: z.string(),
  /** The text after `/lilypad` (empty for a "changes requested" review without the command). */
  instructions: z.string(),
  trigger: z.enum(['comment', 'review', 'review_comment']),
  commentId: z.number().int().optional(),
  reviewId: z.number().int().optional(),
  deliveryId: z.string(),
  at: z.string(),
  /** The repository's `max_followups` when the request was made. */
  maxFollowups: z.number().int().min(0).optional(),
});
export type FollowupRequest = z.infer<typeof followupRequestSchema>;

export interface FollowupTarget {
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
  status: StatusComments;
  cancelBus: CancelBus;
}

const followupKeys = (prefix: string, repoId: number, pr: number) => {
  const base = keys.followups(prefix, repoId, pr);
  // runs: follow-up runs queued since the pull request was opened or last re-run from its issue.
  return { pending: `${base}:pending`, current: `${base}:current`, seq: `${base}:seq`, lock: `${base}:lock`, runs: `${base}:runs` };
};
const takenKey = keys.followupTaken;
const TTL_S = 30 * 24 * 3600;

const prRef = (t: FollowupTarget): IssueRef => ({ owner: t.owner, repo: t.repo, issueNumber: t.pullNumber });
const lock = <T>(deps: FollowupDeps, t: FollowupTarget, fn: () => Promise<T>) => withRedisLock(deps.redis, followupKeys(deps.prefix, t.repoId, t.pullNumber).lock, { ttlMs: 30_000, waitMs: 15_000 }, fn);

/** Records a request; queues a run unless one is waiting or running (which then takes it). */
export async function requestFollowup(deps: FollowupDeps, client: GitHubClient, target: FollowupTarget, req: FollowupRequest): Promise<string> {
  return lock(deps, target, async () => {
    const k = followupKeys(deps.prefix, target.repoId, target.pullNumber);
    await deps.redis.multi().rpush(k.pending, JSON.stringify(followupRequestSchema.parse(req))).expire(k.pending, TTL_S).exec();
    const current = await deps.redis.get(k.current);
    const state = current ? await deps.runs.state(current) : undefined;
    if (current && isLive(state)) return `coalesced into follow-up ${current} (${state})`;
    const queued = await queueNext(deps, client, target, req);
    if (queued) return `queued: ${queued}`;
    await deps.redis.del(k.pending, k.current);
    return `refused: max_followups (${req.maxFollowups ?? DEFAULT_MAX_FOLLOWUPS}) reached`;
  });
}

/** A full run from the issue published this pull request again: its follow-ups count from zero. */
export async function resetFollowupCount(redis: Redis, prefix: string, repoId: number, pullNumber: number): Promise<void> {
  await redis.del(followupKeys(prefix, repoId, pullNumber).runs);
}

const DEFAULT_MAX_FOLLOWUPS = 10;

/** After a follow-up run ends (however): the next one, if requests arrived meanwhile. */
export async function followupEnded(deps: FollowupDeps, client: GitHubClient, target: FollowupTarget, jobId: string): Promise<string | null> {
  return lock(deps, target, async () => {
    const k = followupKeys(deps.prefix, target.repoId, target.pullNumber);
    await deps.redis.del(takenKey(deps.prefix, jobId));
    if ((await deps.redis.get(k.current)) !== jobId) return null;
    const next = parseRequests(await deps.redis.lrange(k.pending, 0, 0))[0];
    const queued = next ? await queueNext(deps, client, target, next) : null;
    if (!queued) await deps.redis.del(k.current, ...(next ? [k.pending] : []));
    return queued;
  });
}

/**
 * The requests this run works on: taken from the waiting list once, and kept under the job's id so
 * that a retry of the same job (an infrastructure failure) works on the same ones.
 */
export async function takeRequests(redis: Redis, prefix: string, job: FollowupRunJob, jobId: string): Promise<FollowupRequest[]> {
  const k = followupKeys(prefix, job.repoId, job.pullNumber);
  const taken = (await redis.eval(TAKE, 2, k.pending, takenKey(prefix, jobId), TTL_S)) as string[];
  return parseRequests(taken);
}

/** Moves the waiting list onto the job's own list in one step (nothing is lost between the two). */
const TAKE = `
local waiting = redis.call('lrange', KEYS[1], 0, -1)
if #waiting > 0 then
  redis.call('rpush', KEYS[2], unpack(waiting))
  redis.call('del', KEYS[1])
  redis.call('expire', KEYS[2], ARGV[1])
end
return redis.call('lrange', KEYS[2], 0, -1)`;

/** `/lilypad cancel`, a closed pull request, or the label removed: drop waiting requests, stop the run. */
export async function cancelFollowups(deps: FollowupDeps, client: GitHubClient, target: FollowupTarget, by: string | undefined, why: string): Promise<string> {
  return lock(deps, target, async () => {
    const k = followupKeys(deps.prefix, target.repoId, target.pullNumber);
    const dropped = await deps.redis.llen(k.pending);
    await deps.redis.del(k.pending);
    const current = await deps.redis.get(k.current);
    const state = current ? await deps.runs.state(current) : undefined;
    if (!current || !isLive(state)) return dropped > 0 ? `dropped ${dropped} waiting request(s)` : 'nothing to cancel';
    if (state !== 'active') {
      const data = await deps.runs.data(current);
      if (await deps.runs.remove(current)) {
        await deps.redis.del(k.current);
        if (data?.kind === 'followup' && data.statusSlot) await deps.status.set(client, prRef(target), { state: 'cancelled', by, why }, data.triggeredBy, data.statusSlot);
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
async function queueNext(deps: FollowupDeps, client: GitHubClient, target: FollowupTarget, first: FollowupRequest): Promise<string | null> {
  const k = followupKeys(deps.prefix, target.repoId, target.pullNumber);
  const max = first.maxFollowups ?? DEFAULT_MAX_FOLLOWUPS;
  const done = Number((await deps.redis.get(k.runs)) ?? 0);
  if (done >= max) {
    const epoch = (await deps.redis.get(k.seq)) ?? '0';
    const body =
      `**Lilypad** has revised this pull request ${done} time${done === 1 ? '' : 's'} since its last full run, the most this repository allows ` +
      `(\`max_followups: ${max}\` in \`.github/lilypad.yml\`), so it did not start another run for @${first.by}. ` +
      `To go on: push the changes yourselves, raise \`max_followups\`, or label issue #${target.issueNumber} again (remove and add the label) for a fresh run, which starts the count again.`;
    await replyOnce(deps.redis, deps.prefix, client, prRef(target), `followup-cap:${epoch}`, body);
    return null;
  }
  await deps.redis.multi().incr(k.runs).expire(k.runs, 365 * 24 * 3600).exec();
  const seq = await deps.redis.incr(k.seq);
  await deps.redis.expire(k.seq, 365 * 24 * 3600);
  const jobId = followupJobId(target.repoId, target.pullNumber, seq);
  const slot = `followup-${seq}`;
  // "Queued" first, so that a fast worker's "running" can never be overwritten by it.
  await deps.status.set(client, prRef(target), { state: 'queued', position: (await deps.runs.waitingCount()) + 1 }, first.by, slot);
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
  await deps.redis.set(k.current, jobId, 'EX', TTL_S);
  return jobId;
}

function parseRequests(lines: string[]): FollowupRequest[] {
  return parseStoredList(followupRequestSchema, lines);
}
