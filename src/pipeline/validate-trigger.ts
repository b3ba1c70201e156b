import type { GitHubClient } from '../github/client.ts';
import { hasWriteAccess } from '../github/permissions.ts';
import type { IssueEdit } from '../store/issue-edits.ts';
import { textDigest, type RunJob } from '../store/jobs.ts';

/** The trigger no longer holds (closed, unlabelled, no write access, text edited by an outsider). */
export class StaleTriggerError extends Error {
  override name = 'StaleTriggerError';
}

export interface IssueText {
  title: string;
  body: string;
}

/**
 * Checks that the trigger still holds and returns the text the agent gets: the text pinned when
 * the job was triggered. If the issue was edited since then by anyone who may not start Lilypad
 * (or by someone Lilypad could not identify), the job stops: a writer re-triggers to confirm.
 */
export async function validateTrigger(octokit: GitHubClient, job: RunJob, edits: () => Promise<IssueEdit[]>): Promise<IssueText> {
  const issue = (await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: job.owner, repo: job.repo, issue_number: job.issueNumber })).data;
  if (issue.state !== 'open') throw new StaleTriggerError('the issue was closed before the job started.');
  if (job.trigger === 'label') {
    const labels = issue.labels.map((l) => (typeof l === 'string' ? l : (l.name ?? '')));
    if (!labels.some((l) => l.toLowerCase() === job.label.toLowerCase())) throw new StaleTriggerError(`the \`${job.label}\` label was removed before the job started.`);
  }
  if (!(await hasWriteAccess(octokit, job.owner, job.repo, job.triggeredBy))) {
    throw new StaleTriggerError(`@${job.triggeredBy} no longer has write access to this repository.`);
  }
  if (!job.pinned) return { title: issue.title, body: issue.body ?? '' };
  await checkPinnedText(job, textDigest(issue.title, issue.body), edits);
  return { title: job.pinned.title, body: job.pinned.body };
}

/** Re-checked right before the agent starts, since setup and tests can take a while. */
export async function checkPinnedText(job: RunJob, currentDigest: string, edits: () => Promise<IssueEdit[]>): Promise<void> {
  if (!job.pinned || currentDigest === job.pinned.sha256) return;
  const recorded = await edits();
  const outsiders = recorded.filter((e) => !e.writer).map((e) => `@${e.login}`);
  if (recorded.length > 0 && outsiders.length === 0) return; // only writers edited: the pinned text stands
  const who = outsiders.length > 0 ? `by ${[...new Set(outsiders)].join(', ')}, who cannot start Lilypad` : 'by someone Lilypad could not identify';
  throw new StaleTriggerError(
    `the issue text was edited ${who}, after @${job.triggeredBy} started Lilypad, so the job stopped before the agent saw it. ` +
      'Someone with write access can check the new text and label the issue again (or comment `/lilypad`) to run Lilypad on it.',
  );
}
