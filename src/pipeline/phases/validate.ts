import type { RepoConfig } from '../../config/repo-config.ts';
import type { GitHubClient, InstallationClient, IssueRef } from '../../github/client.ts';
import { lastIssueEdit } from '../../github/issue-edits.ts';
import { hasWriteAccess } from '../../github/permissions.ts';
import { loadRepoConfig } from '../../github/repo-config-loader.ts';
import { readIssueEdits } from '../../store/issue-edits.ts';
import { runJobId, textDigest, type FollowupRunJob } from '../../store/jobs.ts';
import { readTextConfirmation, writeTextConfirmation } from '../../store/text-confirmations.ts';
import type { LoadedConfig } from '../effective-config.ts';
import { UserError } from '../failures.ts';
import type { JobContext } from '../job-context.ts';
import { readPrRecord, type PrRecord } from '../../store/pull-records.ts';
import { checkPinnedText, StaleTriggerError, validateTrigger, type IssueText } from '../validate-trigger.ts';

/**
 * Phase 1, validate: the trigger must still hold, and the repository's configuration must be
 * valid. Issue jobs: issue open, label present, permission, text as pinned. Follow-ups: the pull
 * request is open and still Lilypad's, and whoever asked may still write.
 */
export async function validateIssueJob(ctx: JobContext): Promise<{ text: IssueText; config: RepoConfig; loaded: LoadedConfig; installation: InstallationClient }> {
  const installation = await ctx.deps.github.installation(ctx.job.installationId);
  const text = await ctx.step('validate', () => validateTrigger(installation, ctx.job, () => recordedEdits(ctx)));
  const loaded = await ctx.step('config', () => loadConfigOrFail(installation, ctx.ref));
  const config = loaded.config;
  await ctx.step('last_edit', () => checkLastEditor(ctx, installation, config));
  return { text, config, loaded, installation };
}

/**
 * The pinned text is what the issue said when the trigger arrived, not necessarily what the
 * maintainer read: someone without write access may have rewritten it in between (or, for a label
 * the reconcile sweep found, any time before the sweep). So the last editor of the issue must be
 * able to start Lilypad too; otherwise the job stops before the agent, naming them, as a mid-job
 * edit does. Stopping records the edit: a later trigger by a writer (who has been told) on the
 * same text and the same last edit takes it as read and confirmed.
 */
async function checkLastEditor(ctx: JobContext, client: GitHubClient, config: RepoConfig): Promise<void> {
  const { job, deps } = ctx;
  if (job.kind !== 'issue') return;
  const edit = await lastIssueEdit(client, job.owner, job.repo, job.issueNumber);
  if (edit === null) return;
  if (edit === 'unknown') {
    ctx.log.warn('this GitHub server has no GraphQL API: who last edited the issue cannot be checked');
    return;
  }
  const allowed = !edit.bot || config.allow_bots.some((b) => b.toLowerCase() === edit.login.toLowerCase());
  if (allowed && (await hasWriteAccess(client, job.owner, job.repo, edit.login))) return;
  const mark = `${edit.at}|${job.pinned?.sha256 ?? textDigest(...(await currentText(ctx)))}`;
  const stored = await readTextConfirmation(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, job.issueNumber);
  if (stored && stored.mark === mark && stored.deliveryId !== job.deliveryId) return;
  await writeTextConfirmation(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, job.issueNumber, { mark, deliveryId: job.deliveryId });
  throw new StaleTriggerError(
    `the issue text was last edited by @${edit.login}, who cannot start Lilypad, at ${edit.at} (before the job started), so it may not be what @${job.triggeredBy} read, and the job stopped before the agent saw it. ` +
      'Someone with write access can read the issue as it is now and label it again (or comment `/lilypad`): Lilypad then takes this text as confirmed.',
  );
}

async function currentText(ctx: JobContext): Promise<[string, string | null | undefined]> {
  const issue = (await (await ctx.tokens.rest()).request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: ctx.job.owner, repo: ctx.job.repo, issue_number: ctx.job.issueNumber })).data;
  return [issue.title, issue.body];
}

/** The pull request a follow-up revises, as validation found it: Lilypad's record, its head and its base. */
export interface ValidatedPull {
  record: PrRecord;
  headRef: string;
  headSha: string;
  baseRef: string;
}

export async function validateFollowup(ctx: JobContext<FollowupRunJob>): Promise<{ target: ValidatedPull; config: RepoConfig; loaded: LoadedConfig; installation: InstallationClient }> {
  const { job, deps } = ctx;
  const installation = await deps.github.installation(job.installationId);
  const target = await ctx.step('validate', async () => {
    const client = await ctx.tokens.rest();
    const pr = (await client.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: job.owner, repo: job.repo, pull_number: job.pullNumber })).data;
    if (pr.state !== 'open') throw new StaleTriggerError('the pull request was closed before the follow-up started.');
    const record = await readPrRecord(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, job.pullNumber);
    if (!record || record.branch !== pr.head.ref || pr.head.repo?.id !== job.repoId) {
      throw new StaleTriggerError(`this pull request's branch (\`${pr.head.ref}\`) is not one Lilypad keeps, so it does not revise it.`);
    }
    // An automatic CI fix was started by Lilypad itself (ci_fix: auto), not by a person to check again.
    if (job.trigger !== 'ci' && !(await hasWriteAccess(client, job.owner, job.repo, job.triggeredBy))) {
      throw new StaleTriggerError(`@${job.triggeredBy} no longer has write access to this repository.`);
    }
    return { record, headRef: pr.head.ref, headSha: pr.head.sha, baseRef: pr.base.ref };
  });
  const loaded = await ctx.step('config', () => loadConfigOrFail(installation, ctx.ref));
  return { target, config: loaded.config, loaded, installation };
}

/** Setup and the tests can take a while: the issue text is checked again right before the agent. */
export async function recheckPinnedText(ctx: JobContext): Promise<void> {
  if (!ctx.job.pinned || ctx.job.kind !== 'issue') return;
  const issue = (await (await ctx.tokens.rest()).request('GET /repos/{owner}/{repo}/issues/{issue_number}', { owner: ctx.job.owner, repo: ctx.job.repo, issue_number: ctx.job.issueNumber })).data;
  await checkPinnedText(ctx.job, textDigest(issue.title, issue.body), () => recordedEdits(ctx));
}

async function recordedEdits(ctx: JobContext) {
  return readIssueEdits(ctx.deps.redis, ctx.deps.env.LILYPAD_QUEUE_PREFIX, runJobId(ctx.job.repoId, ctx.job.issueNumber));
}

async function loadConfigOrFail(octokit: InstallationClient, ref: IssueRef): Promise<LoadedConfig> {
  const res = await loadRepoConfig(octokit, ref.owner, ref.repo);
  if (!res.ok) {
    throw new UserError(
      `\`${res.source ?? '.github/lilypad.yml'}\` is not valid:\n${res.problems.map((p) => `- ${p}`).join('\n')}`,
      'fix the file, then label the issue again or comment `/lilypad`.',
    );
  }
  return { file: res.source, config: res.config, keys: res.keys };
}
