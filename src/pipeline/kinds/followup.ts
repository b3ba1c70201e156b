import { dropQuotedLines, fetchReviewFeedback } from '../../github/review-feedback.ts';
import type { FollowupRunJob } from '../../store/jobs.ts';
import { checkoutSetupBase } from '../../workspace/setup-base.ts';
import { gitTreeReader } from '../../inference/index.ts';
import { resolveConfig, runPlanOf, type EffectiveConfig } from '../effective-config.ts';
import { UserError } from '../failures.ts';
import { takeRequests, type FollowupRequest } from '../../store/followup-requests.ts';
import type { JobContext } from '../job-context.ts';
import type { RunOutcome } from '../outcome.ts';
import { commitMessage } from '../phases/change.ts';
import { HeadMovedError, pushOnTop } from '../phases/publish.ts';
import { replyInThreads, rewriteRevisions } from '../phases/report.ts';
import { validateFollowup, type ValidatedPull } from '../phases/validate.ts';
import { prepareWorkspace, type Workspace } from '../phases/workspace.ts';
import { addRevision } from '../../store/pull-records.ts';
import { buildReviewTask, type ReviewTask } from '../review-task.ts';
import { ciOnlyTask, ciStatusNote, readCiWork, rememberCiFix, reviewWithCi, revisionTrigger, type CiWork } from '../ci-fix-followup.ts';
import type { CiFixTask } from '../ci-fix-task.ts';
import { BUDGET_EXITS, runSpine, type FinishedWork, type PreparedRun, type RunPlug, type SpineStages } from '../spine.ts';
import { revisionOf } from './issue.ts';

interface FollowupPrepared extends PreparedRun {
  ws: Workspace;
  effective: EffectiveConfig;
  target: ValidatedPull;
  /** The review feedback shown (its threads are replied to after the push); null for a run that only fixes CI. */
  review: ReviewTask | null;
  /** The failing CI checks shown, and the task that showed them; null when the run fixes no CI. */
  ci: { work: CiWork; task: CiFixTask } | null;
}

/** The one task of a follow-up: review feedback, failing CI, or both (ci-fix-followup.ts). */
interface FollowupTask {
  title: string;
  body: string;
  warnings: string[];
  review: ReviewTask | null;
  ci: FollowupPrepared['ci'];
}

/**
 * A follow-up: Lilypad revises its own pull request after review, or fixes its failing CI. The
 * spine on the pull request's current head, with the review feedback or the failing checks (or
 * both) as the task; the new commit goes on top of the head, never forced. If the head moves while
 * it runs, it runs once more on the new head, then reports.
 */
export async function runFollowup(ctx: JobContext<FollowupRunJob>, jobId: string, stages?: SpineStages): Promise<RunOutcome> {
  const requests = await takeRequests(ctx.deps.redis, ctx.deps.env.LILYPAD_QUEUE_PREFIX, ctx.job, jobId);
  if (requests.length === 0) return { result: 'no_change', why: 'there was nothing left to do: every request was cancelled.', exitReason: 'cancelled' };
  try {
    return await runSpine(ctx, followupPlug(ctx, requests), stages);
  } catch (err) {
    if (!(err instanceof HeadMovedError)) throw err;
    ctx.log.warn({ err: err.message }, 'the pull request moved during the follow-up; running once more on the new head');
    await ctx.progress.phase({ kind: 'preparing', text: 'the branch moved meanwhile; starting again on its new head' });
    try {
      return await runSpine(ctx, followupPlug(ctx, requests), stages);
    } catch (again) {
      if (!(again instanceof HeadMovedError)) throw again;
      throw new UserError(`${again.message}, twice, so Lilypad's change was not pushed.`, 'comment `/lilypad` again once nobody else is pushing to the branch.');
    }
  }
}

function followupPlug(ctx: JobContext<FollowupRunJob>, requests: FollowupRequest[]): RunPlug<FollowupPrepared> {
  const { job, deps } = ctx;
  return {
    async prepare() {
      const { target, loaded, installation, config: repoConfig } = await validateFollowup(ctx);
      // Read before the sandbox: a CI fix with nothing failing on the head stops here.
      const ciHead = { sha: target.headSha, branch: target.headRef, statusContexts: repoConfig.ci_status_contexts };
      const ciWork = await ctx.step('ci', () => readCiWork(ctx, installation, ciHead, requests));
      await ctx.progress.phase({ kind: 'preparing', text: 'reading the review and preparing the sandbox' });
      const ws = await prepareWorkspace(ctx, target.headRef);
      const head = ws.checkout.baseCommit;
      // Setup runs with network: on the base, the code a human owns, never on Lilypad's own commits.
      const setupCommit = await checkoutSetupBase(ws.mirrorDir, ws.checkout.dir, head, target.baseRef, { signal: ctx.signal });
      if (!setupCommit) {
        throw new UserError(
          `the pull request's branch \`${target.headRef}\` shares no history with its base \`${target.baseRef}\`, so Lilypad cannot run the setup commands on the base's code.`,
          'rebase the branch on its base (or change the base of the pull request), then ask again.',
        );
      }
      // Setup runs on the base, so what it is (when inferred) is read from the base's files too.
      const effective = await ctx.step('infer', () => resolveConfig(loaded, gitTreeReader(ws.mirrorDir, setupCommit)));
      const config = effective.config;
      const task = await followupTask(ctx, target, config.allow_bots, requests, ciWork);
      const last = requests.at(-1)!;
      return {
        config,
        effective,
        plan: runPlanOf(effective, `github:${job.repoId}`, { account: `github-installation:${job.installationId}`, name: `${job.owner}/${job.repo}` }),
        ws,
        target,
        review: task.review,
        ci: task.ci,
        task: { title: task.title, body: task.body, warning: task.warnings.join(' ') || undefined },
        checkout: { dir: ws.checkout.dir, baseCommit: head, headAfterSetup: { setupCommit, branch: target.headRef } },
        source: ws.mirrorDir,
        // From the base's side, never from the pull request's head: the agent wrote that.
        instructionsAt: { gitDir: ws.mirrorDir, commit: setupCommit },
        subject: `${job.owner}/${job.repo}#${job.issueNumber}`,
        commit: {
          message: task.review
            ? commitMessage(`Address review on #${job.pullNumber}`, `Revised by Lilypad after review of #${job.pullNumber} (requested by @${last.by})`, config.ci === 'hold')
            : commitMessage(`Fix CI on #${job.pullNumber}`, `Fixed by Lilypad: failing CI on #${job.pullNumber} (${last.ci?.auto ? 'ci_fix: auto' : `requested by @${last.by}`})`, config.ci === 'hold'),
          author: await deps.github.commitAuthor(ws.htmlUrl),
        },
      };
    },
    publish: (_ctx, prepared, work) => pushRevision(ctx, prepared, work, requests),
  };
}

/**
 * Review requests get the review task, CI requests the CI task; both together, the review task with
 * the failing checks after it (one run, one commit: a fix that passes review but not CI, or the
 * reverse, would only start another round).
 */
async function followupTask(ctx: JobContext<FollowupRunJob>, target: ValidatedPull, allowBots: string[], requests: FollowupRequest[], ci: CiWork | null): Promise<FollowupTask> {
  const reviews = requests.filter((r) => !r.ci);
  if (ci && reviews.length === 0) {
    const fixers = requests.filter((r) => !r.ci?.auto);
    const task = ciOnlyTask({ title: target.record.pinned.title, body: target.record.pinned.body }, ci, instructionsOf(fixers), fixers.at(-1)?.by);
    return { title: task.title, body: task.body, warnings: [...task.warnings, ...ci.warnings], review: null, ci: { work: ci, task } };
  }
  const review = await reviewTask(ctx, target, allowBots, reviews);
  if (!ci || ci.checks.length === 0) return { title: review.title, body: review.body, warnings: review.warnings, review, ci: null };
  const task = reviewWithCi(review, ci);
  return { title: task.title, body: task.body, warnings: [...review.warnings, ...task.warnings, ...ci.warnings], review, ci: { work: ci, task } };
}

async function reviewTask(ctx: JobContext<FollowupRunJob>, target: ValidatedPull, allowBots: string[], requests: FollowupRequest[]): Promise<ReviewTask> {
  const { job, deps } = ctx;
  const client = await ctx.tokens.rest();
  const feedback = await ctx.step('feedback', async () =>
    fetchReviewFeedback(client, { owner: job.owner, repo: job.repo, pullNumber: job.pullNumber, since: { sha: target.record.lastSha }, botLogin: await deps.github.botLogin(), allowBots, logger: ctx.log, signal: ctx.signal }),
  );
  const last = requests.at(-1)!;
  return buildReviewTask({
    issue: { title: target.record.pinned.title, body: target.record.pinned.body },
    feedback,
    instructions: instructionsOf(requests),
    requestedBy: last.by,
    trigger: { ...(last.commentId !== undefined ? { commentId: last.commentId } : {}), ...(last.reviewId !== undefined ? { reviewId: last.reviewId } : {}) },
  });
}

async function pushRevision(ctx: JobContext<FollowupRunJob>, p: FollowupPrepared, work: FinishedWork, requests: FollowupRequest[]): Promise<RunOutcome> {
  const { deps, job } = ctx;
  const head = p.checkout.baseCommit;
  await pushOnTop(ctx, work.change, p.target.headRef, head, p.ws.cloneUrl);
  // Reported from here on: the commit is on the pull request.
  const sha = work.change.headSha!;
  const commitUrl = `${p.ws.htmlUrl}/commit/${sha}`;
  const ciAddressed = p.ci?.task.addressed ?? [];
  const trigger = revisionTrigger(requests, ciAddressed);
  const record = await addRevision(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, job.pullNumber, { issueNumber: p.target.record.issueNumber, branch: p.target.headRef, pinned: p.target.record.pinned }, revisionOf(work.run, sha, trigger));
  if (p.ci) await rememberCiFix(ctx, p.ci.work, ciAddressed, sha);
  await rewriteRevisions(ctx, job.pullNumber, record.revisions, p.ws.htmlUrl).catch((err: unknown) => ctx.log.warn({ err: (err as Error).message }, 'could not update the Revisions table'));
  const agent = work.run.session.agent;
  const threads = await replyInThreads(ctx, await ctx.tokens.rest(), p.review?.addressed.threads ?? [], sha, commitUrl, agent.finalAnswer);
  const cut = p.review ? p.review.cut.threads + p.review.cut.conversation + p.review.cut.reviews : 0;
  const notes = [cut > 0 ? `${cut} older item(s) of feedback did not fit the model's budget and were left out.` : '', ciStatusNote(ciAddressed, p.config.ci === 'hold') ?? ''].filter(Boolean);
  return {
    result: 'revised',
    number: job.pullNumber,
    url: `${p.ws.htmlUrl}/pull/${job.pullNumber}`,
    sha,
    commitUrl,
    incomplete: BUDGET_EXITS.has(agent.exitReason),
    exitReason: agent.exitReason,
    threads,
    diff: work.patch,
    note: notes.join(' ') || undefined,
  };
}

/**
 * Every request's instructions, in order; several people's are attributed. Quoted lines go, as in
 * the feedback: a `/lilypad` that quote-replies someone must not carry their words as a writer's.
 */
function instructionsOf(requests: FollowupRequest[]): string {
  const given = requests.map((r) => ({ by: r.by, text: dropQuotedLines(r.instructions).text.trim() })).filter((r) => r.text);
  if (given.length <= 1) return given[0]?.text ?? '';
  return given.map((r) => `@${r.by}: ${r.text}`).join('\n\n');
}
