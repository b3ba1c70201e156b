import { createHash } from 'node:crypto';
import { z } from 'zod';

/** Queue names; Redis keys are `<LILYPAD_QUEUE_PREFIX>:<name>:...`. */
export const EVENTS_QUEUE = 'events';
export const RUNS_QUEUE = 'runs';

/** Where an issue lives. Job data never holds a secret: ids and names only. */
const issueRef = {
  installationId: z.number().int().positive(),
  repoId: z.number().int().positive(),
  owner: z.string().min(1),
  repo: z.string().min(1),
  issueNumber: z.number().int().positive(),
};

/** A webhook, reduced to what the trigger logic needs. One job per delivery (X-GitHub-Delivery). */
export const eventJobSchema = z.object({
  ...issueRef,
  deliveryId: z.string().min(1),
  /**
   * labeled, unlabeled, closed, comment, edited: on an issue. On a pull request (issueNumber is the
   * pull request's number): pr_comment (a `/lilypad …` comment in its conversation), review (a
   * submitted review), review_comment (a `/lilypad …` comment on a line), pr_closed, pr_unlabeled.
   */
  kind: z.enum(['labeled', 'unlabeled', 'closed', 'comment', 'edited', 'pr_comment', 'review', 'review_comment', 'pr_closed', 'pr_unlabeled']),
  label: z.string().optional(),
  commentId: z.number().int().optional(),
  commentBody: z.string().optional(),
  /** review: its id, GraphQL node id (for the reaction) and state (`changes_requested`, `commented`, …). */
  reviewId: z.number().int().optional(),
  reviewNodeId: z.string().optional(),
  reviewState: z.string().optional(),
  /** The issue's text as the webhook carried it: what the person who triggered the job saw. */
  issueTitle: z.string().optional(),
  issueBody: z.string().nullable().optional(),
  /** Said in the queued status (a job recovered by the reconcile sweep). */
  note: z.string().optional(),
  sender: z.object({ login: z.string(), type: z.string() }),
  receivedAt: z.string(),
});
export type EventJob = z.infer<typeof eventJobSchema>;

export const pinnedTextSchema = z.object({ title: z.string(), body: z.string(), sha256: z.string().regex(/^[0-9a-f]{64}$/) });
export type PinnedText = z.infer<typeof pinnedTextSchema>;

export function pinText(title: string, body: string | null | undefined): PinnedText {
  const text = { title, body: body ?? '' };
  return { ...text, sha256: textDigest(text.title, text.body) };
}

export function textDigest(title: string, body: string | null | undefined): string {
  return createHash('sha256').update(JSON.stringify([title, body ?? ''])).digest('hex');
}

/** What every run job holds: where, who and what started it, and the text pinned then. */
const runJobBase = {
  ...issueRef,
  triggeredBy: z.string().min(1),
  trigger: z.enum(['label', 'comment', 'review', 'review_comment']),
  label: z.string(),
  deliveryId: z.string(),
  queuedAt: z.string(),
  /**
   * The issue text pinned when the job was triggered. Retries and re-runs use it, never a later
   * edit: whoever can open an issue could otherwise rewrite what a maintainer approved.
   */
  pinned: pinnedTextSchema.optional(),
};

/** A labelled issue becomes a pull request. One job per issue at a time (deterministic id). */
const issueRunJobSchema = z.object({ ...runJobBase, kind: z.literal('issue') });

/**
 * Lilypad revises its own pull request `pullNumber` after review; its requests wait in Redis
 * (see store/followup-requests.ts and pipeline/followups.ts). `statusSlot` names the status reply this run edits.
 */
const followupRunJobSchema = z.object({ ...runJobBase, kind: z.literal('followup'), pullNumber: z.number().int().positive(), statusSlot: z.string().optional() });

/** The work on one issue or pull request. Job data without a kind (queued by older versions) is an issue job. */
export const runJobSchema = z.preprocess(
  (v) => (v !== null && typeof v === 'object' && !('kind' in v) ? { ...v, kind: 'issue' } : v),
  z.discriminatedUnion('kind', [issueRunJobSchema, followupRunJobSchema]),
);
export type RunJob = z.infer<typeof runJobSchema>;
export type IssueRunJob = z.infer<typeof issueRunJobSchema>;
export type FollowupRunJob = z.infer<typeof followupRunJobSchema>;
export type RunJobInput = z.input<typeof issueRunJobSchema> | z.input<typeof followupRunJobSchema>;

/** The issue or pull request a run job reports on (its status comment lives there). */
export function reportedNumber(job: RunJob): number {
  return job.kind === 'followup' ? job.pullNumber : job.issueNumber;
}

export const eventJobId = (deliveryId: string): string => `evt-${deliveryId.replace(/:/g, '_')}`;
/** Numeric repository id: stable across renames and free of separators. */
export const runJobId = (repoId: number, issueNumber: number): string => `run-${repoId}-${issueNumber}`;
/** One follow-up run on a pull request; `seq` counts that pull request's follow-ups. */
export const followupJobId = (repoId: number, pullNumber: number, seq: number): string => `fu-${repoId}-${pullNumber}-${seq}`;

