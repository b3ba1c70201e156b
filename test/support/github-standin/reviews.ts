/**
 * Pull request reviews, review comments and review threads: the rules both the REST API and the
 * test helpers go through, so a comment made by a helper looks exactly like one made over REST.
 */
import * as gitRepo from './git-repo.ts';
import { isoNow } from './state.ts';
import type { IssueRec, ReviewCommentRec, ReviewRec, ReviewState, StandinState, UserRec } from './state.ts';

/** A review or comment GitHub would refuse with 422; `errors` go into the error body as GitHub lists them. */
export class ReviewInputError extends Error {
  constructor(
    message: string,
    readonly errors: unknown[],
  ) {
    super(message);
  }
}

export type ReviewEvent = 'APPROVE' | 'REQUEST_CHANGES' | 'COMMENT';

const EVENT_STATE: Record<ReviewEvent, ReviewState> = { APPROVE: 'APPROVED', REQUEST_CHANGES: 'CHANGES_REQUESTED', COMMENT: 'COMMENTED' };

export interface LineComment {
  path: string;
  line: number;
  side?: 'LEFT' | 'RIGHT';
  body: string;
}

function pullShas(issue: IssueRec): { head: string; base: string } {
  const pull = issue.pull;
  if (!pull) throw new Error(`#${issue.number} is not a pull request`);
  const head = gitRepo.branchSha(issue.repo.gitDir, pull.headRef);
  const base = gitRepo.branchSha(issue.repo.gitDir, pull.baseRef);
  if (!head || !base) throw new ReviewInputError('Unprocessable Entity', ['the pull request has no head or base branch']);
  return { head, base };
}

/** Where `line` of `path` sits in the pull request's current diff, or a 422 as GitHub answers it. */
function locate(issue: IssueRec, c: LineComment): { diffHunk: string; position: number; commitId: string } {
  const { head, base } = pullShas(issue);
  const where = gitRepo.locateInDiff(gitRepo.fileDiff(issue.repo.gitDir, base, head, c.path), c.line, c.side ?? 'RIGHT');
  if (!where) {
    throw new ReviewInputError('Validation Failed', [
      { resource: 'PullRequestReviewComment', code: 'custom', field: 'pull_request_review_thread.line', message: 'could not be resolved' },
    ]);
  }
  return { ...where, commitId: head };
}

/** Submits a review (state from `event`; no event leaves it PENDING) with optional line comments, each opening a thread. */
export function submitReview(
  state: StandinState,
  issue: IssueRec,
  input: { user: UserRec; event: ReviewEvent | null; body: string; comments: LineComment[]; viaApp: boolean; at?: string },
): { review: ReviewRec; comments: ReviewCommentRec[] } {
  if (input.user === issue.user && input.event === 'APPROVE') throw new ReviewInputError('Unprocessable Entity', ['Review Can not approve your own pull request']);
  if (input.user === issue.user && input.event === 'REQUEST_CHANGES') throw new ReviewInputError('Unprocessable Entity', ['Review Can not request changes on your own pull request']);
  if ((input.event === 'REQUEST_CHANGES' || input.event === 'COMMENT') && input.body.trim() === '' && input.comments.length === 0) {
    throw new ReviewInputError('Unprocessable Entity', [`Review body is required when the event is ${input.event}`]);
  }
  const located = input.comments.map((c) => ({ c, where: locate(issue, c) }));
  const { head } = pullShas(issue);
  const review = state.addReview(issue, {
    user: input.user,
    body: input.body,
    state: input.event ? EVENT_STATE[input.event] : 'PENDING',
    commitId: head,
    ...(input.at ? { at: input.at } : {}),
  });
  const comments = located.map(({ c, where }) =>
    state.addReviewComment(review, {
      user: input.user,
      body: c.body,
      viaApp: input.viaApp,
      replyTo: null,
      path: c.path,
      side: c.side ?? 'RIGHT',
      line: c.line,
      position: where.position,
      diffHunk: where.diffHunk,
      commitId: where.commitId,
      ...(input.at ? { at: input.at } : {}),
    }),
  );
  return { review, comments };
}

/** A single comment on a line outside a review: GitHub wraps it in a COMMENTED review with an empty body. */
export function commentOnLine(state: StandinState, issue: IssueRec, input: LineComment & { user: UserRec; viaApp: boolean; at?: string }): ReviewCommentRec {
  const { comments } = submitReview(state, issue, {
    user: input.user,
    event: 'COMMENT',
    body: '',
    comments: [{ path: input.path, line: input.line, body: input.body, ...(input.side ? { side: input.side } : {}) }],
    viaApp: input.viaApp,
    ...(input.at ? { at: input.at } : {}),
  });
  const first = comments[0];
  if (!first) throw new Error('unreachable: a line comment was not created');
  return first;
}

/** A reply in the thread of `to` (a reply to a reply joins the same thread, as on GitHub). */
export function replyToComment(state: StandinState, to: ReviewCommentRec, input: { user: UserRec; body: string; viaApp: boolean; at?: string }): ReviewCommentRec {
  const review = state.addReview(to.issue, { user: input.user, body: '', state: 'COMMENTED', commitId: to.commitId, ...(input.at ? { at: input.at } : {}) });
  return state.addReviewComment(review, { user: input.user, body: input.body, viaApp: input.viaApp, replyTo: to, ...(input.at ? { at: input.at } : {}) });
}

export function resolveThread(comment: ReviewCommentRec, by: UserRec, resolved = true): void {
  comment.thread.resolved = resolved;
  comment.thread.resolvedBy = resolved ? by : null;
}

/** Outdates the whole thread of `comment`, as a push that removes the commented line does. */
export function outdateThread(comment: ReviewCommentRec): void {
  for (const c of comment.thread.comments) {
    c.outdated = true;
    c.updatedAt = isoNow();
  }
}
