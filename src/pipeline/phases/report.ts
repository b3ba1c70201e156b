import type { GitHubClient } from '../../github/client.ts';
import { quoteUntrusted } from '../../github/pull-request-body.ts';
import { renderRevisions, withRevisions, type Revision } from '../../github/revisions.ts';
import type { AddressedThread } from '../review-task.ts';
import type { JobContext } from '../job-context.ts';
import { addRevision, type PrRecord } from '../../store/pull-records.ts';
import type { Published } from '../../store/published.ts';
import type { FollowupRunJob } from '../../store/jobs.ts';

/**
 * Phase 6, report (GitHub's side; the final status is the outcome's, see outcome.ts): the pull
 * request's Revisions table and Lilypad's own record of it, and for follow-ups a reply in each review
 * thread the run addressed. Lilypad never approves, resolves threads, dismisses reviews or marks ready.
 */
/** Keeps the pull request's record and, when it has earlier revisions (a re-run), its full table. */
export async function recordIssueRevision(ctx: JobContext, p: Published, base: Omit<PrRecord, 'revisions' | 'lastSha'>, revision: Revision, htmlUrl: string): Promise<void> {
  const { deps, job } = ctx;
  const record = await addRevision(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, p.number, base, revision);
  if (record.revisions.length > 1) await rewriteRevisions(ctx, p.number, record.revisions, htmlUrl);
}

export async function rewriteRevisions(ctx: JobContext, pullNumber: number, revisions: readonly Revision[], htmlUrl: string): Promise<void> {
  const { job } = ctx;
  const client = await ctx.tokens.rest();
  const pr = (await client.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: job.owner, repo: job.repo, pull_number: pullNumber })).data;
  const body = withRevisions(pr.body ?? '', renderRevisions(revisions, (sha) => `${htmlUrl}/commit/${sha}`));
  await client.request('PATCH /repos/{owner}/{repo}/pulls/{pull_number}', { owner: job.owner, repo: job.repo, pull_number: pullNumber, body });
}

/** One reply per addressed review thread: what was done, and the commit. Best effort, each on its own. */
export async function replyInThreads(ctx: JobContext<FollowupRunJob>, client: GitHubClient, threads: readonly AddressedThread[], sha: string, commitUrl: string, summary: string): Promise<number> {
  const line = quoteUntrusted(ctx.scanner().redact(summary)).split('\n').find((l) => l.trim()) ?? '';
  const text = `**Lilypad** · addressed in [\`${sha.slice(0, 7)}\`](${commitUrl})${line ? `: ${line.slice(0, 200)}` : '.'}`;
  let replied = 0;
  for (const t of threads) {
    await client
      .request('POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies', { owner: ctx.job.owner, repo: ctx.job.repo, pull_number: ctx.job.pullNumber, comment_id: t.replyToCommentId, body: text })
      .then(() => replied++)
      .catch((err: unknown) => ctx.log.warn({ err: (err as Error).message, thread: t.id }, 'could not reply in a review thread'));
  }
  return replied;
}
