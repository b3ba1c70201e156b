import type { Redis } from 'ioredis';
import { graphqlBaseUrl, type GitHubClient, type IssueRef } from './client.ts';
import { markRepliedOnce } from '../store/reply-marks.ts';

/** Small things Lilypad says on an issue or pull request: comments, the 👀 acknowledgement, refusals. */

export async function comment(octokit: GitHubClient, ref: IssueRef, body: string): Promise<number> {
  const res = await octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', { owner: ref.owner, repo: ref.repo, issue_number: ref.issueNumber, body });
  return Number(res.data.id);
}

/** What a 👀 acknowledges: a conversation comment, a comment on a line, or a review. */
export type Acknowledged = { kind: 'comment'; id: number } | { kind: 'review_comment'; id: number } | { kind: 'review'; nodeId: string };

/**
 * Acknowledges a trigger with 👀 at once (best effort). GitHub has no REST endpoint for reactions
 * on a review, only GraphQL's addReaction on the review's node id.
 */
export async function acknowledge(octokit: GitHubClient, ref: IssueRef, what: Acknowledged | null): Promise<void> {
  if (!what) return;
  const { owner, repo } = ref;
  const done =
    what.kind === 'comment'
      ? octokit.request('POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions', { owner, repo, comment_id: what.id, content: 'eyes' })
      : what.kind === 'review_comment'
        ? octokit.request('POST /repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions', { owner, repo, comment_id: what.id, content: 'eyes' })
        : octokit.request('POST /graphql', {
            baseUrl: graphqlBaseUrl(octokit),
            query: 'mutation($id: ID!) { addReaction(input: {subjectId: $id, content: EYES}) { reaction { content } } }',
            variables: { id: what.nodeId },
          });
  await done.catch(() => undefined);
}

/** One reply per person and issue (and `what`), however often they try. */
export async function replyOnce(redis: Redis, prefix: string, octokit: GitHubClient, ref: IssueRef, what: string, body: string): Promise<void> {
  if (!(await markRepliedOnce(redis, prefix, ref, what))) return;
  await comment(octokit, ref, body);
}

export function politeRefusal(login: string, label: string): string {
  return (
    `Thanks, @${login}! Lilypad can only be started or stopped by people with write, maintain or admin access to this repository. ` +
    `A maintainer can start it by adding the \`${label}\` label or commenting \`/lilypad\`.`
  );
}
