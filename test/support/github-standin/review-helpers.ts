/**
 * The stand-in's test helpers for pull requests and the review loop: branches and pull requests,
 * reviews, line comments and replies, thread resolution and outdating, and the matching webhook
 * payloads. Also the secondary-rate-limit rule for failApiRequests.
 */
import * as gitRepo from './git-repo.ts';
import { commentOnLine, outdateThread, replyToComment, resolveThread, submitReview } from './reviews.ts';
import type { ReviewEvent } from './reviews.ts';
import { isoNow, nodeId } from './state.ts';
import type { IssueRec, ReviewCommentRec, StandinState } from './state.ts';
import type { InjectedFailure, Pull, Reaction, Review, ReviewComment, ReviewThread, SecondaryRateLimitRule, StandinReviewHelpers, WebhookPayload } from './types.ts';
import type { PayloadFactory } from './webhooks.ts';

const EVENTS: Record<'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED', ReviewEvent> = { APPROVED: 'APPROVE', CHANGES_REQUESTED: 'REQUEST_CHANGES', COMMENTED: 'COMMENT' };

/** GitHub's text for a secondary rate limit (the request id varies). */
export const SECONDARY_RATE_LIMIT_MESSAGE =
  'You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.';

/**
 * A secondary rate limit as GitHub sends it: 403 (or 429) with `retry-after`, GitHub's message and
 * its documentation link; `x-ratelimit-remaining` stays above zero, which is how clients tell it
 * from the primary limit.
 */
export function secondaryRateLimitRule(rule: SecondaryRateLimitRule): InjectedFailure {
  return {
    match: rule.match,
    status: rule.status ?? 403,
    times: rule.times ?? 1,
    message: SECONDARY_RATE_LIMIT_MESSAGE,
    documentationUrl: 'https://docs.github.com/enterprise-server@3.15/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits',
    headers: { 'retry-after': String(rule.retryAfterSeconds ?? 1) },
  };
}

export function reviewHelpers(state: StandinState, payloads: PayloadFactory): StandinReviewHelpers {
  const pullOrThrow = (owner: string, repo: string, number: number): IssueRec => {
    const r = state.findRepo(owner, repo);
    const issue = r?.issues.get(number);
    if (!issue || !issue.pull) throw new Error(`no pull request ${owner}/${repo}#${number} in the stand-in`);
    return issue;
  };
  const reviewCommentOrThrow = (id: number): ReviewCommentRec => {
    const c = state.reviewComments.get(id);
    if (!c) throw new Error(`no review comment ${id} in the stand-in`);
    return c;
  };
  const at = (d: Date | undefined): { at: string } | Record<string, never> => (d ? { at: isoNow(d) } : {});

  return {
    createBranch(owner, repo, branch, files, o = {}): string {
      const r = state.findRepo(owner, repo);
      if (!r) throw new Error(`no repository ${owner}/${repo} in the stand-in`);
      const from = gitRepo.resolveCommit(r.gitDir, o.from ?? r.defaultBranch);
      if (!from) throw new Error(`no commit ${o.from ?? r.defaultBranch} in ${owner}/${repo}`);
      if (!gitRepo.branchSha(r.gitDir, branch)) gitRepo.setBranch(r.gitDir, branch, from);
      const author = o.author ?? r.owner.login;
      const sha = gitRepo.commitFiles(r.gitDir, branch, files, o.message ?? `Update ${branch}`, { name: author, email: `${author}@users.noreply.127.0.0.1` });
      r.pushedAt = isoNow();
      return sha;
    },

    createPullRequest(owner, repo, input): Pull {
      const r = state.findRepo(owner, repo);
      if (!r) throw new Error(`no repository ${owner}/${repo} in the stand-in`);
      const issue = state.createIssue(r, {
        title: input.title,
        body: input.body ?? null,
        user: state.ensureUser(input.author),
        labels: input.labels ?? [],
        viaApp: input.author === state.botUser.login,
        pull: { headRef: input.head, baseRef: input.base ?? r.defaultBranch, draft: input.draft ?? true, requestedReviewers: [], mergedAt: null },
      });
      return state.pull(issue, true);
    },

    submitReview(owner, repo, number, input): WebhookPayload {
      const issue = pullOrThrow(owner, repo, number);
      const { review } = submitReview(state, issue, {
        user: state.ensureUser(input.author),
        event: EVENTS[input.state],
        body: input.body ?? '',
        comments: input.comments ?? [],
        viaApp: false,
        ...at(input.at),
      });
      return payloads.reviewEvent('submitted', review, input.author);
    },

    commentOnLine(owner, repo, number, input): WebhookPayload {
      const issue = pullOrThrow(owner, repo, number);
      const c = commentOnLine(state, issue, {
        path: input.path,
        line: input.line,
        body: input.body,
        ...(input.side ? { side: input.side } : {}),
        user: state.ensureUser(input.author),
        viaApp: false,
        ...at(input.at),
      });
      return payloads.reviewCommentEvent('created', c, input.author);
    },

    replyToReviewComment(commentId, body, author, o = {}): WebhookPayload {
      const c = replyToComment(state, reviewCommentOrThrow(commentId), { user: state.ensureUser(author), body, viaApp: false, ...at(o.at) });
      return payloads.reviewCommentEvent('created', c, author);
    },

    commentOnPullRequest(owner, repo, number, body, sender, o = {}): WebhookPayload {
      const issue = pullOrThrow(owner, repo, number);
      const c = state.addComment(issue, state.ensureUser(sender), body, false);
      if (o.at) {
        c.createdAt = isoNow(o.at);
        c.updatedAt = c.createdAt;
      }
      return payloads.commentEvent('created', c, sender);
    },

    resolveReviewThread(commentId, by, resolved = true): void {
      resolveThread(reviewCommentOrThrow(commentId), state.ensureUser(by), resolved);
    },

    outdateReviewThread(commentId): void {
      outdateThread(reviewCommentOrThrow(commentId));
    },

    closePullRequest(owner, repo, number, sender, o = {}): WebhookPayload {
      const issue = pullOrThrow(owner, repo, number);
      const pull = issue.pull;
      if (!pull) throw new Error('unreachable');
      const user = state.ensureUser(sender);
      if (o.merged) {
        const head = gitRepo.branchSha(issue.repo.gitDir, pull.headRef);
        if (head) gitRepo.setBranch(issue.repo.gitDir, pull.baseRef, head);
        pull.mergedAt = isoNow();
      }
      state.setState(issue, 'closed', user, null);
      issue.stateReason = null;
      return payloads.pullRequestEvent('closed', issue, sender);
    },

    reviews(owner, repo, number): Review[] {
      return state.reviewsOf(pullOrThrow(owner, repo, number)).map((r) => state.review(r));
    },

    reviewComments(owner, repo, number): ReviewComment[] {
      return state.reviewCommentsOf(pullOrThrow(owner, repo, number)).map((c) => state.reviewComment(c));
    },

    reviewThreads(owner, repo, number): ReviewThread[] {
      return state.threadsOf(pullOrThrow(owner, repo, number)).map((t) => ({
        id: nodeId('PullRequestReviewThread', t.id),
        rootCommentId: t.comments[0]?.id ?? 0,
        isResolved: t.resolved,
        resolvedBy: t.resolvedBy?.login ?? null,
        isOutdated: t.comments[0]?.outdated ?? false,
        commentIds: t.comments.map((c) => c.id),
      }));
    },

    reviewCommentReactions(commentId): Reaction[] {
      return reviewCommentOrThrow(commentId).reactions.map((r) => state.reaction(r));
    },

    reviewReactions(reviewId): Reaction[] {
      const r = state.reviews.get(reviewId);
      if (!r) throw new Error(`no review ${reviewId} in the stand-in`);
      return r.reactions.map((x) => state.reaction(x));
    },
  };
}
