import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { STATUS_MARKER } from './status-comment.ts';
import type { Logger } from '../observability/logger.ts';
import { eventJobId, runJobId, type EventJob, type RunJob } from '../store/jobs.ts';
import type { GitHubApp } from './app-auth.ts';
import type { GitHubClient } from './client.ts';
import { markRecoveredOnce } from '../store/recovery-marks.ts';

const DEFAULT_TRIGGER_LABEL = 'lilypad';
/** Status texts that promise a job exists (see renderStatus). */
const LIVE_STATUS = /\*\*(Queued|Running|Testing)\*\*/;

export interface ReconcileDeps {
  github: GitHubApp;
  redis: Redis;
  prefix: string;
  runs: Queue<RunJob>;
  events: Queue<EventJob>;
  logger: Logger;
}

export interface ReconcileSummary {
  installations: number;
  checked: number;
  enqueued: number;
}

interface SearchItem {
  number: number;
  repository_url: string;
  pull_request?: unknown;
}

/**
 * GitHub does not redeliver a webhook that failed (the app was down, a network blip): the label is
 * on the issue but no job ever started. This finds open issues carrying the default trigger label
 * that Lilypad has never answered, and feeds their last `labeled` event through the normal trigger
 * path (permission checks included), keyed by that event's id so each is handled once.
 * Repositories that configure another trigger label are not covered.
 */
export async function reconcileMissedTriggers(deps: ReconcileDeps): Promise<ReconcileSummary> {
  const summary: ReconcileSummary = { installations: 0, checked: 0, enqueued: 0 };
  const app = await deps.github.probot.auth();
  const botLogin = await deps.github.botLogin();
  for (let page = 1; page <= 20; page++) {
    const res = await app.request('GET /app/installations', { per_page: 100, page });
    for (const inst of res.data) {
      summary.installations++;
      const account = inst.account as { login?: string; type?: string } | null;
      if (!account?.login) continue;
      const octokit = await deps.github.installation(inst.id);
      const qualifier = account.type === 'Organization' ? 'org' : 'user';
      const found = await octokit.request('GET /search/issues', {
        q: `is:issue is:open label:"${DEFAULT_TRIGGER_LABEL}" ${qualifier}:${account.login}`,
        per_page: 100,
      });
      for (const item of found.data.items as SearchItem[]) {
        if (item.pull_request) continue;
        summary.checked++;
        const [owner, repo] = item.repository_url.split('/').slice(-2) as [string, string];
        if (await enqueueIfMissed(deps, octokit, inst.id, owner, repo, item.number, botLogin)) summary.enqueued++;
      }
    }
    if (res.data.length < 100) break;
  }
  if (summary.enqueued > 0) deps.logger.warn(summary, 'reconcile: started jobs for labels whose webhook never arrived');
  return summary;
}

async function enqueueIfMissed(deps: ReconcileDeps, octokit: GitHubClient, installationId: number, owner: string, repo: string, issueNumber: number, botLogin: string): Promise<boolean> {
  const repoId = Number((await octokit.request('GET /repos/{owner}/{repo}', { owner, repo })).data.id);
  if (await deps.runs.getJob(runJobId(repoId, issueNumber))) return false;
  const comments = (await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}/comments', { owner, repo, issue_number: issueNumber, per_page: 100 })).data;
  const ours = comments.filter((c) => c.user?.login === botLogin);
  // A status that says a job waits or runs, with no job in Redis: the job was lost with Redis's
  // data. It is queued again, once per status edit.
  const status = ours.find((c) => c.body?.startsWith(STATUS_MARKER));
  const lost = status && LIVE_STATUS.test(status.body ?? '');
  if (ours.length > 0 && !lost) return false; // answered before: not missed
  if (lost && !(await markRecoveredOnce(deps.redis, deps.prefix, repoId, issueNumber, status.updated_at))) return false;
  const events = (await octokit.request('GET /repos/{owner}/{repo}/issues/{issue_number}/events', { owner, repo, issue_number: issueNumber, per_page: 100 })).data as Array<{
    id: number;
    event: string;
    actor?: { login: string; type: string } | null;
    label?: { name: string };
  }>;
  const labeled = events.filter((e) => e.event === 'labeled' && e.label?.name.toLowerCase() === DEFAULT_TRIGGER_LABEL && e.actor).at(-1);
  if (!labeled?.actor) return false;
  const deliveryId = lost ? `recover-${labeled.id}-${Date.parse(status.updated_at)}` : `reconcile-${labeled.id}`;
  const job: EventJob = {
    installationId,
    repoId,
    owner,
    repo,
    issueNumber,
    deliveryId,
    kind: 'labeled',
    label: labeled.label!.name,
    sender: { login: labeled.actor.login, type: labeled.actor.type },
    receivedAt: new Date().toISOString(),
    ...(lost ? { note: 'Lilypad lost track of this job (its queue data was lost) and queued it again.' } : {}),
  };
  const existing = await deps.events.getJob(eventJobId(deliveryId));
  if (existing) return false;
  await deps.events.add('labeled', job, { jobId: eventJobId(deliveryId), removeOnComplete: { age: 30 * 24 * 3600 } });
  return true;
}
