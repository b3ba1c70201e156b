import { createHash } from 'node:crypto';

/**
 * Every Redis key Lilypad writes outside BullMQ's own, built here and nowhere else. Each family
 * is under the installation's queue prefix (LILYPAD_QUEUE_PREFIX), so one Redis can hold several
 * installations, and says in its comment what it holds and, for a record, which file of src/store/
 * reads and writes it (a lock's key goes to store/redis-lock.ts). The strings are what earlier
 * versions wrote: changing one orphans existing data (test/unit/store-keys.test.ts pins them).
 */
export interface IssueKeyRef {
  owner: string;
  repo: string;
  issueNumber: number;
}

const issueRef = (ref: IssueKeyRef) => `${ref.owner}/${ref.repo}#${ref.issueNumber}`.toLowerCase();
const followupBase = (prefix: string, repoId: number, pullNumber: number) => `${prefix}:followup:${repoId}:${pullNumber}`;
const statusComment = (prefix: string, ref: IssueKeyRef, slot?: string) => `${prefix}:status:${issueRef(ref)}${slot ? `:${slot}` : ''}`.toLowerCase();

export const keys = {
  // --- jobs -----------------------------------------------------------------------------------
  /** Lock held while a trigger is decided for one job id (pipeline/triggers.ts). */
  triggerLock: (prefix: string, jobId: string) => `${prefix}:lock:${jobId}`,
  /** Edits of an issue recorded from `issues.edited` while its job is queued or running (issue-edits.ts). */
  edits: (prefix: string, jobId: string) => `${prefix}:edits:${jobId}`,
  /** Set while a job writes its final status, so a new trigger waits for it (finishing-marks.ts). */
  finishing: (prefix: string, jobId: string) => `${prefix}:finishing:${jobId}`,
  /** A writer's confirmation of the issue text after a non-writer edited it (text-confirmations.ts). */
  textConfirm: (prefix: string, repoId: number, issueNumber: number) => `${prefix}:text-confirm:${repoId}:${issueNumber}`,
  /** Cancel broadcasts (pub/sub channel) and the per-job cancelled marker (cancel-bus.ts). */
  cancelChannel: (prefix: string) => `${prefix}:cancel`,
  cancelled: (prefix: string, jobId: string) => `${prefix}:cancelled:${jobId}`,

  // --- workspace and publishing ---------------------------------------------------------------
  /** Lock on one repository's mirror across processes sharing a data directory. */
  mirrorLock: (prefix: string, mirrorKey: string) => `${prefix}:mirror:${mirrorKey}`,
  /** Lock around one job's push and pull request: one publisher per trigger. */
  publishLock: (prefix: string, jobId: string) => `${prefix}:publish:${jobId}`,
  /** What a trigger published (JSON), so a later copy of the job reports it instead of pushing again (published.ts). */
  published: (prefix: string, jobId: string) => `${prefix}:published:${jobId}`,
  /** A change a run made but did not publish (`publish: verified`, not verified), kept for `/lilypad publish` (JSON). */
  withheld: (prefix: string, repoId: number, issueNumber: number) => `${prefix}:withheld:${repoId}:${issueNumber}`,
  /** The commit Lilypad last pushed to a branch, and the one it is about to push (JSON, push-records.ts). */
  pushed: (prefix: string, repoId: number, branch: string) => `${prefix}:pushed:${repoId}:${branch}`,
  /** The commit Lilypad's own last push made a branch's head, and when (JSON, push-records.ts; `/lilypad ci`). */
  headPushed: (prefix: string, repoId: number, branch: string) => `${prefix}:head-pushed:${repoId}:${branch}`,
  /** Lilypad's record of one of its pull requests (JSON): the issue, branch, pinned text, revisions (pull-records.ts). */
  pullRecord: (prefix: string, repoId: number, pullNumber: number) => `${prefix}:pr:${repoId}:${pullNumber}`,

  // --- follow-ups on a pull request (followup-requests.ts) --------------------------------------
  /** Requests waiting for the next follow-up run (JSON list). */
  followupPending: (prefix: string, repoId: number, pullNumber: number) => `${followupBase(prefix, repoId, pullNumber)}:pending`,
  /** The id of the follow-up job queued or running for the pull request. */
  followupCurrent: (prefix: string, repoId: number, pullNumber: number) => `${followupBase(prefix, repoId, pullNumber)}:current`,
  /** A counter numbering the pull request's follow-up jobs (never reset: job ids stay unique). */
  followupSeq: (prefix: string, repoId: number, pullNumber: number) => `${followupBase(prefix, repoId, pullNumber)}:seq`,
  /** Follow-up runs queued since the pull request was opened or last re-run from its issue (max_followups). */
  followupRuns: (prefix: string, repoId: number, pullNumber: number) => `${followupBase(prefix, repoId, pullNumber)}:runs`,
  /** Lock around every change of the four above. */
  followupLock: (prefix: string, repoId: number, pullNumber: number) => `${followupBase(prefix, repoId, pullNumber)}:lock`,
  /** The follow-up requests a follow-up job took over (JSON list). */
  followupTaken: (prefix: string, jobId: string) => `${prefix}:followup-taken:${jobId}`,

  // --- CI fixes on a pull request (ci-fix-records.ts) -----------------------------------------
  /** What Lilypad decided about failing CI on the pull request: automatic fixes, heads decided, signatures addressed (JSON). */
  ciFix: (prefix: string, repoId: number, pullNumber: number) => `${prefix}:ci-fix:${repoId}:${pullNumber}`,
  /** Lock around one decision about the pull request's CI (two CI events for one head decide once). */
  ciFixLock: (prefix: string, repoId: number, pullNumber: number) => `${prefix}:ci-fix:${repoId}:${pullNumber}:lock`,

  // --- GitHub-facing bookkeeping --------------------------------------------------------------
  /** The id of the status comment of an issue (or of a pull request's follow-up slot) (status-comment-ids.ts). */
  statusComment,
  /** Lock around finding, creating and editing that comment. */
  statusCommentLock: (prefix: string, ref: IssueKeyRef, slot?: string) => `${statusComment(prefix, ref, slot)}:lock`,
  /** Marks that a one-time reply was posted, e.g. "only writers can start Lilypad" (reply-marks.ts). */
  replied: (prefix: string, ref: IssueKeyRef, what: string) => `${prefix}:replied:${issueRef(ref)}:${what}`.toLowerCase(),
  /** Marks that the reconcile sweep queued a lost job again for one status update (recovery-marks.ts). */
  recovered: (prefix: string, repoId: number, issueNumber: number, statusUpdatedAt: string) => `${prefix}:recovered:${repoId}:${issueNumber}:${statusUpdatedAt}`,

  // --- workers (heartbeats.ts, installation-id.ts) ---------------------------------------------
  /** A worker instance is alive while this key exists. */
  heartbeat: (prefix: string, instance: string) => `${prefix}:heartbeat:${instance}`,
  /** This installation's id, made once by its first worker. */
  installation: (prefix: string) => `${prefix}:installation`,

  // --- run pages ------------------------------------------------------------------------------
  /** One part of a run's record (observability/run-store.ts): its summary, live event stream, or finished record. */
  run: (prefix: string, runId: string, part: 'summary' | 'live' | 'record') => `${prefix}:run:${runId}:${part}`,
  /** The sorted set of run ids by start time. */
  runIndex: (prefix: string) => `${prefix}:runs`,
  /** A signed-in viewer's session (web-sessions.ts), under a digest of its id: the key never holds the cookie's secret. */
  webSession: (prefix: string, sessionId: string) => `${prefix}:websession:${createHash('sha256').update(sessionId).digest('hex')}`,
} as const;
