import type { Queue } from 'bullmq';
import type { ApplicationFunction, Context } from 'probot';
import { eventJobId, type EventJob } from '../queue/jobs.ts';

/**
 * The Probot app: webhooks are validated (Probot checks X-Hub-Signature-256 on the raw body) and
 * reduced to an event job keyed by X-GitHub-Delivery, so a redelivery is a no-op. Nothing slow
 * happens here: GitHub gives up on a webhook after 10 s, and this answers in milliseconds.
 */
export function lilypadApp(events: Queue<EventJob>): ApplicationFunction {
  return (app) => {
    const enqueue = async (context: Context, data: Omit<EventJob, 'deliveryId' | 'receivedAt' | 'installationId' | 'repoId' | 'owner' | 'repo' | 'sender'>) => {
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
      if (!/^\s*\/lilypad\b/i.test(comment.body)) return;
      if (issue.pull_request) {
        // On a pull request, only `/lilypad ci` is understood here: it releases held CI.
        if (/^\s*\/lilypad\s+ci\s*$/i.test(comment.body)) await enqueue(context, { kind: 'ci', issueNumber: issue.number, commentId: comment.id });
        return;
      }
      await enqueue(context, {
        kind: 'comment',
        issueNumber: issue.number,
        commentId: comment.id,
        commentBody: comment.body.slice(0, 500),
        issueTitle: issue.title,
        issueBody: issue.body ?? '',
      });
    });
    // Who edits an issue while its job waits or runs decides whether the pinned text still holds.
    app.on('issues.edited', async (context) => {
      const { issue, changes } = context.payload;
      if (issue.pull_request || !(changes.title || changes.body)) return;
      await enqueue(context, { kind: 'edited', issueNumber: issue.number });
    });
  };
}
