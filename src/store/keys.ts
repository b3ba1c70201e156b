/**
 * Every Redis key Lilypad writes outside BullMQ's own, built here and nowhere else. Each family
 * is under the installation's queue prefix (LILYPAD_QUEUE_PREFIX), so one Redis can hold several
 * installations, and says in its comment what it holds and who writes it.
 */
export interface IssueKeyRef {
  owner: string;
  repo: string;
  issueNumber: number;
}

const issueRef = (ref: IssueKeyRef) => `${ref.owner}/${ref.repo}#${ref.issueNumber}`.toLowerCase();

export const keys = {
  // --- jobs -----------------------------------------------------------------------------------
  /** Lock held while a trigger is decided for one job id (triggers.ts). */
  triggerLock: (prefix: string, jobId: string) => `${prefix}:lock:${jobId}`,
  /** Edits of an issue recorded from `issues.edited` while its job is queued or running. */
  edits: (prefix: string, jobId: string) => `${prefix}:edits:${jobId}`,
  /** Set while a job writes its final status, so a new trigger waits for it. */
  finishing: (prefix: string, jobId: string) => `${prefix}:finishing:${jobId}`,
  /** A writer's confirmation of the issue text after a non-writer edited it (validate phase). */
  textConfirm: (prefix: string, repoId: number, issueNumber: number) => `${prefix}:text-confirm:${repoId}:${issueNumber}`,
  /** Cancel broadcasts (pub/sub channel) and the per-job cancelled marker (cancel-bus.ts). */
  cancelChannel: (prefix: string) => `${prefix}:cancel`,
  cancelled: (prefix: string, jobId: string) => `${prefix}:cancelled:${jobId}`,

  // --- workspace and publishing ---------------------------------------------------------------
  /** Lock on one repository's mirror across processes sharing a data directory. */
  mirrorLock: (prefix: string, mirrorKey: string) => `${prefix}:mirror:${mirrorKey}`,
  /** Lock around one job's push and pull request: one publisher per trigger. */
  publishLock: (prefix: string, jobId: string) => `${prefix}:publish:${jobId}`,
  /** What a trigger published (JSON), so a later copy of the job reports it instead of pushing again. */
  published: (prefix: string, jobId: string) => `${prefix}:published:${jobId}`,
  /** The commit Lilypad last pushed to a branch, and the one it is about to push (JSON). */
  pushed: (prefix: string, repoId: number, branch: string) => `${prefix}:pushed:${repoId}:${branch}`,
  /** Lilypad's record of one of its pull requests (JSON): the issue, branch, pinned text, revisions. */
  pullRecord: (prefix: string, repoId: number, pullNumber: number) => `${prefix}:pr:${repoId}:${pullNumber}`,
  /** Pending follow-up requests of one pull request (list and lock share the base). */
  followups: (prefix: string, repoId: number, pullNumber: number) => `${prefix}:followup:${repoId}:${pullNumber}`,
  /** The follow-up requests a follow-up job took over (JSON list). */
  followupTaken: (prefix: string, jobId: string) => `${prefix}:followup-taken:${jobId}`,

  // --- GitHub-facing bookkeeping --------------------------------------------------------------
  /** The id of the status comment of an issue (or of a pull request's follow-up slot). */
  statusComment: (prefix: string, ref: IssueKeyRef, slot?: string) => `${prefix}:status:${issueRef(ref)}${slot ? `:${slot}` : ''}`.toLowerCase(),
  /** Marks that a one-time reply was posted (for example "only writers can start Lilypad"). */
  replied: (prefix: string, ref: IssueKeyRef, what: string) => `${prefix}:replied:${issueRef(ref)}:${what}`.toLowerCase(),
  /** Marks that the reconcile sweep queued a lost job again for one status update. */
  recovered: (prefix: string, repoId: number, issueNumber: number, statusUpdatedAt: string) => `${prefix}:recovered:${repoId}:${issueNumber}:${statusUpdatedAt}`,
} as const;
