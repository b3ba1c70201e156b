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

/** A webhook on an issue or a pull request, reduced to what the trigger logic needs. One job per delivery (X-GitHub-Delivery). */
const issueEventJobSchema = z.object({
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

/**
 * A CI result that failed on a commit: `check_run.completed` and `check_suite.completed` with a
 * failing conclusion, or a `status` of failure or error. It names a commit, not an issue: the pull
 * requests GitHub lists in a check payload are kept (a status lists none; the worker asks GitHub
 * which pull requests have the commit as their head). pipeline/ci-triggers.ts decides.
 */
const ciEventJobSchema = z.object({
  installationId: z.number().int().positive(),
  repoId: z.number().int().positive(),
  owner: z.string().min(1),
  repo: z.string().min(1),
  deliveryId: z.string().min(1),
  kind: z.enum(['check_run', 'check_suite', 'status']),
  headSha: z.string().regex(/^[0-9a-f]{40}$/),
  /** Pull request numbers from the payload (check events only; GitHub lists the open pull requests of the suite's branch, in the repository itself). */
  pullNumbers: z.array(z.number().int().positive()).max(50),
  /** The check run's name or the status's context (a suite has none). */
  name: z.string().max(500).optional(),
  /** The slug of the app that made the check; null for a commit status. */
  app: z.string().nullable(),
  /** The check's conclusion or the status's state. */
  conclusion: z.string(),
  /** check_run: whether its suite had finished too (a run in a suite still running waits for the suite's own event). */
  suiteCompleted: z.boolean().optional(),
  /**
   * Check events: the suite's branch (`head_branch`), null when GitHub names none (a fork's pull
   * request on the same commit); absent in jobs queued by earlier versions (refused as unknown).
   */
  headBranch: z.string().max(255).nullable().optional(),
  sender: z.object({ login: z.string(), type: z.string() }),
  receivedAt: z.string(),
});
export type CiEventJob = z.infer<typeof ciEventJobSchema>;
export type IssueEventJob = z.infer<typeof issueEventJobSchema>;

/** Every event job: on an issue or pull request, or a CI result on a commit. */
export const eventJobSchema = z.union([issueEventJobSchema, ciEventJobSchema]);
export type EventJob = z.infer<typeof eventJobSchema>;

export const CI_EVENT_KINDS: ReadonlySet<string> = new Set(['check_run', 'check_suite', 'status']);
export function isCiEvent(evt: EventJob): evt is CiEventJob {
  return CI_EVENT_KINDS.has(evt.kind);
}

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
  /** ci: Lilypad started a CI fix by itself (`ci_fix: auto`); `/lilypad fix-ci` is a comment. */
  trigger: z.enum(['label', 'comment', 'review', 'review_comment', 'ci']),
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
/**
 * An issue run. `publishKept` (the id of an earlier run): `/lilypad publish` by a writer; no agent
 * runs, the change that run kept (publish: verified, see withheld-changes.ts) is opened as it is.
 */
const issueRunJobSchema = z.object({ ...runJobBase, kind: z.literal('issue'), publishKept: z.string().optional() });

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

