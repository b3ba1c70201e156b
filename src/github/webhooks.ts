import type { Queue } from 'bullmq';
import type { ApplicationFunction, Context } from 'probot';
import { eventJobId, type CiEventJob, type EventJob, type IssueEventJob } from '../store/jobs.ts';

/**
 * The Probot app: webhooks are validated (Probot checks X-Hub-Signature-256 on the raw body) and
 * reduced to an event job keyed by X-GitHub-Delivery, so a redelivery is a no-op. Nothing slow
 * happens here: GitHub gives up on a webhook after 10 s, and this answers in milliseconds.
 */
/** A comment that speaks to Lilypad starts with `/lilypad` (then a word or instructions). */
const COMMAND = /^\s*\/lilypad\b/i;
/** The instructions given with `/lilypad` are kept up to this length in the event. */
const MAX_COMMAND_CHARS = 4000;

/** What every event job takes from the delivery rather than from the event's own fields. */
type FromDelivery = 'deliveryId' | 'receivedAt' | 'installationId' | 'repoId' | 'owner' | 'repo' | 'sender';

/** Check conclusions and status states that mean "failed": only these can start a CI fix. */
const FAILED_CHECK = new Set(['failure', 'timed_out', 'action_required']);
const FAILED_STATUS = new Set(['failure', 'error']);

export function lilypadApp(events: Queue<EventJob>): ApplicationFunction {
  return (app) => {
    const enqueue = async (context: Context, data: Omit<IssueEventJob, FromDelivery> | Omit<CiEventJob, FromDelivery>) => {
      const payload = context.payload as {
        installation?: { id: number };
        repository: { id: number; name: string; owner: { login: string } };
        sender: { login: string; type: string };
      };
      if (!payload.installation) return;
      const job: EventJob = {
        ...data,
        installationId: payload.installation.id,
        repoId: payload.repository.id,
        owner: payload.repository.owner.login,
        repo: payload.repository.name,
        sender: { login: payload.sender.login, type: payload.sender.type },
        deliveryId: context.id,
        receivedAt: new Date().toISOString(),
      };
      await events.add(data.kind, job, { jobId: eventJobId(context.id) });
    };

    app.on('issues.labeled', async (context) => {
      const { issue, label } = context.payload;
      if (issue.pull_request || !label) return;
      await enqueue(context, { kind: 'labeled', issueNumber: issue.number, label: label.name, issueTitle: issue.title, issueBody: issue.body ?? '' });
    });
    app.on('issues.unlabeled', async (context) => {
      const { issue, label } = context.payload;
      if (issue.pull_request || !label) return;
      await enqueue(context, { kind: 'unlabeled', issueNumber: issue.number, label: label.name });
    });
    app.on('issues.closed', async (context) => {
      if (context.payload.issue.pull_request) return;
      await enqueue(context, { kind: 'closed', issueNumber: context.payload.issue.number });
    });
    app.on('issue_comment.created', async (context) => {
      const { issue, comment } = context.payload;
      if (!COMMAND.test(comment.body)) return;
      const kind = issue.pull_request ? 'pr_comment' : 'comment';
      await enqueue(context, {
        kind,
        issueNumber: issue.number,
        commentId: comment.id,
        commentBody: comment.body.slice(0, MAX_COMMAND_CHARS),
        ...(kind === 'comment' ? { issueTitle: issue.title, issueBody: issue.body ?? '' } : {}),
      });
    });
    // On Lilypad's own pull requests: reviews and line comments may ask for a follow-up run.
    app.on('pull_request_review.submitted', async (context) => {
      const { review, pull_request: pr } = context.payload;
      const state = String(review.state).toLowerCase();
      if (state !== 'changes_requested' && !COMMAND.test(review.body ?? '')) return;
      await enqueue(context, {
        kind: 'review',
        issueNumber: pr.number,
        reviewId: review.id,
        reviewNodeId: review.node_id,
        reviewState: state,
        commentBody: (review.body ?? '').slice(0, MAX_COMMAND_CHARS),
      });
    });
    app.on('pull_request_review_comment.created', async (context) => {
      const { comment, pull_request: pr } = context.payload;
      if (!COMMAND.test(comment.body)) return;
      await enqueue(context, { kind: 'review_comment', issueNumber: pr.number, commentId: comment.id, commentBody: comment.body.slice(0, MAX_COMMAND_CHARS) });
    });
    app.on('pull_request.closed', async (context) => {
      await enqueue(context, { kind: 'pr_closed', issueNumber: context.payload.pull_request.number });
    });
    app.on('pull_request.unlabeled', async (context) => {
      const { pull_request: pr, label } = context.payload;
      if (!label) return;
      await enqueue(context, { kind: 'pr_unlabeled', issueNumber: pr.number, label: label.name });
    });
    // CI results on a commit: only failures matter (a fix is for a failing check); which commit's
    // pull request they belong to, and whether it is Lilypad's, is decided in the worker.
    // A suite's branch and pull requests say whose result it is: a fork's pull request on the same
    // commit gets neither (the worker refuses it). Only pull requests of this repository are kept.
    const ownPulls = (context: Context, pulls: ReadonlyArray<{ number: number; head: { repo: { id: number } } }>) =>
      pulls.filter((p) => p.head.repo.id === (context.payload as { repository: { id: number } }).repository.id).map((p) => p.number).slice(0, 50);
    app.on('check_run.completed', async (context) => {
      const run = context.payload.check_run;
      if (!FAILED_CHECK.has(String(run.conclusion))) return;
      await enqueue(context, {
        kind: 'check_run',
        headSha: run.head_sha,
        headBranch: run.check_suite?.head_branch ?? null,
        pullNumbers: ownPulls(context, run.pull_requests),
        name: run.name.slice(0, 500),
        app: run.app?.slug ?? null,
        conclusion: String(run.conclusion),
        suiteCompleted: run.check_suite?.status === 'completed',
      });
    });
    app.on('check_suite.completed', async (context) => {
      const suite = context.payload.check_suite;
      if (!FAILED_CHECK.has(String(suite.conclusion))) return;
      await enqueue(context, {
        kind: 'check_suite',
        headSha: suite.head_sha,
        headBranch: suite.head_branch ?? null,
        pullNumbers: ownPulls(context, suite.pull_requests),
        app: suite.app?.slug ?? null,
        conclusion: String(suite.conclusion),
      });
    });
    app.on('status', async (context) => {
      const { state, sha, context: name } = context.payload;
      if (!FAILED_STATUS.has(state)) return;
      await enqueue(context, { kind: 'status', headSha: sha, pullNumbers: [], name: name.slice(0, 500), app: null, conclusion: state });
    });
    // Who edits an issue while its job waits or runs decides whether the pinned text still holds.
    app.on('issues.edited', async (context) => {
      const { issue, changes } = context.payload;
      if (issue.pull_request || !(changes.title || changes.body)) return;
      await enqueue(context, { kind: 'edited', issueNumber: issue.number });
    });
  };
}
