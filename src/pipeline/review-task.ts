import { prepareIssue, sanitizeIssueText } from '../agent/prompt.ts';
import type { FeedbackComment, FeedbackExclusions, FeedbackReview, FeedbackThread } from '../github/review-feedback.ts';
import { blockQuote, fenceFor } from '../shared/markdown.ts';

/**
 * The one Leaf-format user message (title, then body) for a follow-up run on Lilypad's pull
 * request: the pinned issue, then "Review feedback to address" (unresolved threads with their diff
 * hunks, review bodies, the conversation since Lilypad's last revision), then the instruction given
 * with `/lilypad`. Pure: the feedback was fetched and filtered by github/review-feedback.ts, so
 * nothing here decides who may speak; it only says how many were left out.
 */

/** Default size bound for the whole message (title and body), in estimated tokens. */
const DEFAULT_REVIEW_TASK_TOKEN_BUDGET = 16_000;
/** Lines of a diff hunk kept above (and including) the commented line, besides the `@@` header. */
export const DIFF_HUNK_LINES = 12;
/** One comment body longer than this is shortened (its head kept). */
const MAX_COMMENT_CHARS = 6_000;

/**
 * The same estimate the agent loop uses for text the server has not counted yet: four characters a
 * token. It overestimates English prose and code slightly for Qwen-family tokenizers, which is the
 * safe side for a budget.
 */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export interface ReviewTaskInput {
  /** The issue text pinned when the first run was triggered. */
  issue: { title: string; body: string | null };
  feedback: {
    threads: readonly FeedbackThread[];
    conversation: readonly FeedbackComment[];
    reviews: readonly FeedbackReview[];
    excluded: FeedbackExclusions;
    source?: 'graphql' | 'rest';
  };
  /** The text after `/lilypad` (empty when the trigger was a "changes requested" review without one). */
  instructions: string;
  /** Who gave the instruction. */
  requestedBy?: string;
  /** What triggered the run: never cut, and a comment or review that is only the command is not repeated. */
  trigger?: { commentId?: number; reviewId?: number };
  /** Default DEFAULT_REVIEW_TASK_TOKEN_BUDGET. */
  tokenBudget?: number;
}

export interface AddressedThread {
  id: string;
  /** Reply with POST /repos/{o}/{r}/pulls/{n}/comments/{replyToCommentId}/replies. */
  replyToCommentId: number;
  path: string;
  line: number | null;
}

export interface ReviewTask {
  title: string;
  body: string;
  estimatedTokens: number;
  /** What the model was shown, for replies once the run is done. */
  addressed: { threads: AddressedThread[]; commentIds: number[]; reviewIds: number[] };
  /** What was cut to fit the budget (counts of whole items; shortened comment bodies; characters of the issue). */
  cut: { threads: number; conversation: number; reviews: number; shortenedComments: number; issueChars: number };
  /** E.g. hidden text removed from the feedback. */
  warnings: string[];
}

const CONTROL_COMMAND = /^\/lilypad(?:\s+(?:ci|fix-ci|cancel|stop|run|start))?\s*$/i;

type Item =
  | { kind: 'thread'; thread: FeedbackThread; at: string; pinned: boolean }
  | { kind: 'review'; review: FeedbackReview; at: string; pinned: boolean }
  | { kind: 'comment'; comment: FeedbackComment; at: string; pinned: boolean };

/** Lower is cut first. */
const RELEVANCE: Record<Item['kind'], number> = { comment: 0, review: 1, thread: 2 };

function trimHunk(hunk: string): string {
  const lines = hunk.replace(/\n+$/, '').split('\n');
  const header = lines[0]?.startsWith('@@') ? lines.shift() : undefined;
  const tail = lines.slice(-DIFF_HUNK_LINES);
  return [...(header ? [header] : []), ...tail].join('\n');
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

const STATE_TEXT: Record<FeedbackReview['state'], string> = {
  APPROVED: 'approved',
  CHANGES_REQUESTED: 'requested changes',
  COMMENTED: 'commented',
};

export function buildReviewTask(input: ReviewTaskInput): ReviewTask {
  const budget = input.tokenBudget ?? DEFAULT_REVIEW_TASK_TOKEN_BUDGET;
  const warnings: string[] = [];
  const cut = { threads: 0, conversation: 0, reviews: 0, shortenedComments: 0, issueChars: 0 };

  // 1. Hygiene: the same cleaning as the issue text, for every piece of feedback.
  const issue = prepareIssue(input.issue.title, input.issue.body ?? '');
  if (issue.warning) warnings.push(issue.warning);
  let hidden = 0;
  const clean = (text: string): string => {
    const s = sanitizeIssueText(text);
    hidden += s.removedComments + s.removedInvisible;
    let t = s.text;
    if (t.length > MAX_COMMENT_CHARS) {
      cut.shortenedComments++;
      t = `${t.slice(0, MAX_COMMENT_CHARS)}\n[… ${t.length - MAX_COMMENT_CHARS} more characters cut]`;
    }
    return t;
  };
  // 2. The items, cleaned; the trigger itself (when it is only the command) and control commands are not feedback.
  const items = feedbackItems(input, clean);
  const instructions = clean(input.instructions.trim());
  if (hidden > 0) warnings.push(`removed ${hidden} HTML comment(s) and invisible character(s) from the review feedback before the model saw it`);

  // 3. Render; cut the least relevant, oldest items until it fits; then the issue body itself.
  const cutOrder = items
    .filter((i) => !i.pinned)
    .sort((a, b) => RELEVANCE[a.kind] - RELEVANCE[b.kind] || Date.parse(a.at) - Date.parse(b.at));
  const kept = new Set(items);
  let issueBody = issue.body;
  const render = (): string => renderBody(issueBody, items.filter((i) => kept.has(i)), input, instructions, cut);
  const fits = (): boolean => estimateTokens(`${issue.title}\n${render()}`) <= budget;

  // Drop by estimate first (cheap), then confirm by rendering.
  let over = estimateTokens(`${issue.title}\n${render()}`) - budget;
  for (const item of cutOrder) {
    if (over <= 0 && fits()) break;
    kept.delete(item);
    if (item.kind === 'thread') cut.threads++;
    else if (item.kind === 'review') cut.reviews++;
    else cut.conversation++;
    over -= estimateTokens(renderItem(item));
  }
  if (!fits()) {
    const excess = (estimateTokens(`${issue.title}\n${render()}`) - budget) * 4 + 200;
    const keep = Math.max(0, issueBody.length - excess);
    cut.issueChars = issueBody.length - keep;
    issueBody = `${issueBody.slice(0, keep)}\n[… ${cut.issueChars} characters of the issue cut to fit the size budget]`;
  }
  const body = render();

  const shown = items.filter((i) => kept.has(i));
  return {
    title: issue.title,
    body,
    estimatedTokens: estimateTokens(`${issue.title}\n${body}`),
    addressed: {
      threads: shown.flatMap((i) => (i.kind === 'thread' ? [{ id: i.thread.id, replyToCommentId: i.thread.rootCommentId, path: i.thread.path, line: i.thread.line }] : [])),
      commentIds: shown.flatMap((i) => (i.kind === 'comment' ? [i.comment.id] : [])),
      reviewIds: shown.flatMap((i) => (i.kind === 'review' ? [i.review.id] : [])),
    },
    cut,
    warnings,
  };
}

/** Every piece of feedback as an item to render or cut; the trigger is pinned (never cut). */
function feedbackItems(input: ReviewTaskInput, clean: (text: string) => string): Item[] {
  const trigger = input.trigger ?? {};
  const onlyCommand = (body: string): boolean => body.trim().toLowerCase().startsWith('/lilypad') && !body.trim().includes('\n');
  const items: Item[] = [];
  for (const t of input.feedback.threads) {
    const comments = t.comments.map((c) => ({ ...c, body: clean(c.body) }));
    const last = comments[comments.length - 1];
    if (!last) continue;
    const pinned = trigger.commentId !== undefined && t.comments.some((c) => c.id === trigger.commentId);
    items.push({ kind: 'thread', thread: { ...t, path: clean(t.path), diffHunk: sanitizeIssueText(trimHunk(t.diffHunk)).text, comments }, at: last.createdAt, pinned });
  }
  for (const r of input.feedback.reviews) {
    if (r.id === trigger.reviewId && onlyCommand(r.body)) continue;
    items.push({ kind: 'review', review: { ...r, body: clean(r.body) }, at: r.submittedAt, pinned: r.id === trigger.reviewId });
  }
  for (const c of input.feedback.conversation) {
    if (CONTROL_COMMAND.test(c.body.trim())) continue;
    if (c.id === trigger.commentId && onlyCommand(c.body)) continue;
    items.push({ kind: 'comment', comment: { ...c, body: clean(c.body) }, at: c.createdAt, pinned: c.id === trigger.commentId });
  }
  return items;
}

function renderItem(item: Item): string {
  switch (item.kind) {
    case 'thread': {
      const t = item.thread;
      const fence = fenceFor(t.diffHunk);
      const where = t.line === null ? `\`${t.path}\`` : `\`${t.path}\` line ${t.line}`;
      const comments = t.comments.map((c) => `@${c.author}:\n${blockQuote(c.body)}`).join('\n\n');
      return `### ${where}\n\n${fence}diff\n${t.diffHunk}\n${fence}\n\n${comments}`;
    }
    case 'review':
      return `@${item.review.author} ${STATE_TEXT[item.review.state]}:\n${blockQuote(item.review.body)}`;
    case 'comment':
      return `@${item.comment.author}:\n${blockQuote(item.comment.body)}`;
  }
}

function renderBody(issueBody: string, shown: Item[], input: ReviewTaskInput, instructions: string, cut: ReviewTask['cut']): string {
  const byTime = (a: Item, b: Item): number => Date.parse(a.at) - Date.parse(b.at);
  const threads = shown.filter((i) => i.kind === 'thread').sort(byTime);
  const reviews = shown.filter((i) => i.kind === 'review').sort(byTime);
  const comments = shown.filter((i) => i.kind === 'comment').sort(byTime);
  const parts: string[] = [];
  if (issueBody.trim()) parts.push(issueBody.replace(/\s+$/, ''));

  const feedback: string[] = [];
  if (threads.length) feedback.push(`Unresolved review threads on the current code:\n\n${threads.map(renderItem).join('\n\n')}`);
  if (reviews.length) feedback.push(`### Reviews\n\n${reviews.map(renderItem).join('\n\n')}`);
  if (comments.length) feedback.push(`### Conversation since Lilypad's last revision\n\n${comments.map(renderItem).join('\n\n')}`);

  const notes: string[] = [];
  const ex = input.feedback.excluded;
  const outsiders = ex.notWriters + ex.botsNotAllowed;
  if (outsiders > 0) {
    notes.push(`${plural(outsiders, 'comment')} by people without write access to this repository (or bots not allowed to instruct Lilypad) left out; their text is not shown.`);
  }
  const cutParts = [
    cut.threads ? plural(cut.threads, 'older review thread') : '',
    cut.reviews ? plural(cut.reviews, 'older review') : '',
    cut.conversation ? plural(cut.conversation, 'older conversation comment') : '',
    cut.shortenedComments ? `${plural(cut.shortenedComments, 'long comment')} shortened` : '',
    cut.issueChars ? `${cut.issueChars} characters of the issue` : '',
  ].filter(Boolean);
  if (cutParts.length) notes.push(`To fit the size limit, left out: ${cutParts.join(', ')}.`);
  if (input.feedback.source === 'rest') notes.push('Thread resolution could not be read from this server, so resolved threads may be listed too.');

  if (feedback.length || notes.length) {
    const block = [...feedback];
    if (!feedback.length) block.push('No review comments to show.');
    if (notes.length) block.push(notes.map((n) => `Note: ${n}`).join('\n'));
    parts.push(`## Review feedback to address\n\n${block.join('\n\n')}`);
  }
  const who = input.requestedBy ? ` (from @${input.requestedBy})` : '';
  parts.push(`## Instructions${who}\n\n${instructions || 'Address the review feedback above.'}`);
  return parts.join('\n\n');
}
