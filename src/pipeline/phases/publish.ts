import type { RepoConfig } from '../../config/repo-config.ts';
import { upsertPullRequest } from '../../github/pull-request.ts';
import { runJobId } from '../../store/jobs.ts';
import { withRedisLock } from '../../store/redis-lock.ts';
import { pushBranch, type PreparedChange } from '../../workspace/publish.ts';
import { assertStillOwned, type JobContext } from '../job-context.ts';
import { pushWithoutOverwriting } from '../publish-change.ts';
import { readPublished, recordPublished, type Published } from '../../store/published.ts';
import { forgetPush, recordHeadPush } from '../../store/push-records.ts';
import { keys } from '../../store/keys.ts';

/**
 * Phase 5, publish, for the app. Issue jobs push without overwriting anyone and open or update the
 * draft pull request; follow-ups push one commit on top of the pull request's head, never forced.
 * Tokens are minted right before each use.
 */
export interface PullRequestDraft {
  title: string;
  /** `lilypad:verified` or `lilypad:unverified`, by the change's evidence; null: no tests ran. */
  evidenceLabel: string | null;
  body: string;
  baseBranch: string;
  cloneUrl: string;
  incomplete: boolean;
  exitReason: string;
}

/**
 * An issue job's publication, one publisher per trigger: the lock serialises the copies of this
 * job that reach this point, the record tells a later copy what the first one published, and the
 * claim check keeps a worker whose job was handed over (its lock lapsed) from publishing at all.
 * From the push on, a cancel no longer interrupts: a pushed branch without its pull request would
 * be half-published.
 */
export async function publishPullRequest(ctx: JobContext, config: RepoConfig, change: PreparedChange, pr: PullRequestDraft): Promise<{ published: Published; fresh: boolean }> {
  const { job, deps } = ctx;
  const prefix = deps.env.LILYPAD_QUEUE_PREFIX;
  const jobId = runJobId(job.repoId, job.issueNumber);
  // The lock is renewed every third of its ttl while its holder lives, so the ttl only says how
  // long a dead holder blocks the next copy: as long as the job lock, after which that copy exists.
  const ttlMs = deps.env.LILYPAD_JOB_LOCK_SECONDS * 1000;
  return withRedisLock(deps.redis, keys.publishLock(prefix, jobId), { ttlMs, waitMs: 10 * 60_000 }, async () => {
    const already = await readPublished(deps.redis, prefix, jobId, job.deliveryId);
    if (already) return { published: already, fresh: false };
    await assertStillOwned(ctx);
    const pushed = await ctx.step('push', () =>
      pushWithoutOverwriting(change.dir, change.headSha!, {
        redis: deps.redis,
        prefix,
        repoId: job.repoId,
        issueNumber: job.issueNumber,
        cloneUrl: pr.cloneUrl,
        authHeader: () => ctx.tokens.gitAuthHeader(),
        signal: ctx.signal,
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
        labels: [...config.labels, ...(pr.evidenceLabel ? [pr.evidenceLabel] : [])],
        removeLabels: EVIDENCE_LABELS,
        reviewers: config.reviewers ?? [job.triggeredBy],
        signal: ctx.signal,
      }),
    );
    for (const w of opened.warnings) ctx.log.warn({ warning: w }, 'pull request');
    const published: Published = {
      deliveryId: job.deliveryId,
      number: opened.number,
      url: opened.url,
      branch: pushed.branch,
      sha: change.headSha!,
      updated: opened.updated,
      incomplete: pr.incomplete,
      exitReason: pr.exitReason,
      draft: config.draft,
      ...(pushed.skipped.length > 0 ? { note: `Someone else pushed to \`${pushed.skipped.join('`, `')}\`, so Lilypad left it as it is and used \`${pushed.branch}\`.` } : {}),
    };
    await recordPublished(deps.redis, prefix, jobId, published);
    return { published, fresh: true };
  });
}

/** The labels a pull request gets by its evidence: verified, or not (unverified or failing). */
export const EVIDENCE_LABELS = ['lilypad:verified', 'lilypad:unverified'];

/** The pull request's head moved while a follow-up ran: its commit would not sit on top. */
export class HeadMovedError extends Error {
  override name = 'HeadMovedError';
}

/**
 * A follow-up's publication: its commit (made on the head it started from) is pushed with a lease
 * on that head, so it lands on top of everything people pushed, and nothing is ever overwritten.
 */
export async function pushOnTop(ctx: JobContext, change: PreparedChange, branch: string, expectedHead: string, cloneUrl: string): Promise<void> {
  const { deps, job } = ctx;
  await assertStillOwned(ctx);
  const result = await ctx.step('push', async () => pushBranch(change.dir, cloneUrl, branch, await ctx.tokens.gitAuthHeader(), { expected: expectedHead }, ctx.signal));
  if (result !== 'pushed') throw new HeadMovedError(`someone pushed to \`${branch}\` while Lilypad worked on it`);
  await forgetPush(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, branch);
  // When the commit became the head, for `/lilypad ci` (github/ci-release.ts).
  if (change.headSha) await recordHeadPush(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, branch, change.headSha);
}
