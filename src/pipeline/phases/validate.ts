import type { ProbotOctokit } from 'probot';
import type { RepoConfig } from '../../config/repo-config.ts';
import type { GitHubClient, IssueRef } from '../../github/client.ts';
import { hasWriteAccess } from '../../github/permissions.ts';
import { loadRepoConfig } from '../../github/repo-config-loader.ts';
import { editsKey, runJobId, textDigest } from '../../queue/jobs.ts';
import { UserError } from '../failures.ts';
import type { JobContext } from '../job-context.ts';
import { readPrRecord, type PrRecord } from '../pr-record.ts';
import { checkPinnedText, parseEdits, StaleTriggerError, validateTrigger, type IssueText } from '../validate-trigger.ts';

/**
 * Phase 1, validate: the trigger must still hold, and the repository's configuration must be
 * valid. Issue jobs: issue open, label present, permission, text as pinned. Follow-ups: the pull
 * request is open and still Lilypad's, and whoever asked may still write.
 */
export async function validateIssueJob(ctx: JobContext): Promise<{ text: IssueText; config: RepoConfig; installation: ProbotOctokit }> {
  const installation = await ctx.deps.github.installation(ctx.job.installationId);
  const text = await ctx.step('validate', () => validateTrigger(installation as unknown as GitHubClient, ctx.job, () => recordedEdits(ctx)));
  const config = await ctx.step('config', () => loadConfigOrFail(installation, ctx.ref));
  return { text, config, installation };
}

export interface FollowupTarget {
  record: PrRecord;
  headRef: string;
  headSha: string;
  baseRef: string;
}

export async function validateFollowup(ctx: JobContext): Promise<{ target: FollowupTarget; config: RepoConfig; installation: ProbotOctokit }> {
  const { job, deps } = ctx;
  const installation = await deps.github.installation(job.installationId);
  const target = await ctx.step('validate', async () => {
    const client = await ctx.tokens.rest();
    const pr = (await client.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: job.owner, repo: job.repo, pull_number: job.pullNumber! })).data;
    if (pr.state !== 'open') throw new StaleTriggerError('the pull request was closed before the follow-up started.');
    const record = await readPrRecord(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, job.pullNumber!);
    if (!record || record.branch !== pr.head.ref || pr.head.repo?.id !== job.repoId) {
      throw new StaleTriggerError(`this pull request's branch (\`${pr.head.ref}\`) is not one Lilypad keeps, so it does not revise it.`);
    }
    if (!(await hasWriteAccess(client, job.owner, job.repo, job.triggeredBy))) {
      throw new StaleTriggerError(`@${job.triggeredBy} no longer has write access to this repository.`);
    }
    return { record, headRef: pr.head.ref, headSha: pr.head.sha, baseRef: pr.base.ref };
  });
  const config = await ctx.step('config', () => loadConfigOrFail(installation, ctx.ref));
  return { target, config, installation };
}

/** Setup and the tests can take a while: the issue text is checked again right before the agent. */
export async function recheckPinnedText(ctx: JobContext): Promise<void> {
  if (!ctx.job.pinned || ctx.job.kind !== 'issue') return;
  const issue = (await (await ctx.tokens.rest()).request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: ctx.job.owner, repo: ctx.job.repo, issue_number: ctx.job.issueNumber })).data;
  await checkPinnedText(ctx.job, textDigest(issue.title, issue.body), () => recordedEdits(ctx));
}

async function recordedEdits(ctx: JobContext) {
  const key = editsKey(ctx.deps.env.LILYPAD_QUEUE_PREFIX, runJobId(ctx.job.repoId, ctx.job.issueNumber));
  return parseEdits(await ctx.deps.redis.lrange(key, 0, -1));
}

async function loadConfigOrFail(octokit: ProbotOctokit, ref: IssueRef): Promise<RepoConfig> {
  const res = await loadRepoConfig(octokit, ref.owner, ref.repo);
  if (!res.ok) {
    throw new UserError(
      `\`${res.source ?? '.github/lilypad.yml'}\` is not valid:\n${res.problems.map((p) => `- ${p}`).join('\n')}`,
      'fix the file, then label the issue again or comment `/lilypad`.',
    );
  }
  return res.config;
}
