import type { RepoConfig } from '../config/repo-config.ts';
import { dropQuotedLines, fetchReviewFeedback } from '../github/review-feedback.ts';
import { CancelledError } from '../shared/cancel.ts';
import { takeRequests, type FollowupRequest } from '../store/followup-requests.ts';
import { BUDGET_EXITS, noChange, noPatchWhy, revisionOf } from './issue-job.ts';
import type { JobContext, RunJobOutcome } from './job-context.ts';
import { endIfStale, releaseJob } from './job-context.ts';
import { UserError } from './failures.ts';
import { addRevision } from '../store/pull-records.ts';
import { applyChange, HeadMovedError, pushOnTop, refuseSecrets } from './phases/publish.ts';
import { replyInThreads, rewriteRevisions } from './phases/report.ts';
import { runInSandbox } from './phases/sandbox.ts';
import { validateFollowup, type FollowupTarget } from './phases/validate.ts';
import { prepareWorkspace } from './phases/workspace.ts';
import { buildReviewTask } from './review-task.ts';
import { checkoutSetupBase } from '../workspace/setup-base.ts';
import type { FollowupRunJob } from '../store/jobs.ts';

/**
 * A follow-up job: Lilypad revises its own pull request after review. The same spine as an issue
 * job (validate → workspace → sandbox → publish → report), on the pull request's current head, with
 * the review feedback as the task; the new commit goes on top of the head, never forced. The setup
 * commands (which have network) run on the pull request's base, never on the head Lilypad wrote;
 * the sandbox moves to the head once the network is cut. If the head moves while it runs, it runs
 * once more on the new head, then reports.
 */
export async function runFollowupJob(ctx: JobContext<FollowupRunJob>, jobId: string): Promise<RunJobOutcome> {
  const { deps, job } = ctx;
  try {
    const requests = await takeRequests(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job, jobId);
    if (requests.length === 0) return await noChange(ctx, 'there was nothing left to do: every request was cancelled.', 'cancelled');
    const { target, config } = await validateFollowup(ctx);
    try {
      return await revise(ctx, config, target, requests);
    } catch (err) {
      if (!(err instanceof HeadMovedError)) throw err;
      ctx.log.warn({ err: err.message }, 'the pull request moved during the follow-up; running once more on the new head');
      await ctx.status.phase({ state: 'running', step: 0, phase: 'the branch moved meanwhile; starting again on its new head' });
      const again = await validateFollowup(ctx);
      try {
        return await revise(ctx, again.config, again.target, requests);
      } catch (err2) {
        if (!(err2 instanceof HeadMovedError)) throw err2;
        throw new UserError(`${err2.message}, twice, so Lilypad's change was not pushed.`, 'comment `/lilypad` again once nobody else is pushing to the branch.');
      }
    }
  } catch (err) {
    return await endIfStale(ctx, err);
  } finally {
    await releaseJob(ctx);
  }
}

async function revise(ctx: JobContext<FollowupRunJob>, config: RepoConfig, target: FollowupTarget, requests: FollowupRequest[]): Promise<RunJobOutcome> {
  const { deps, job } = ctx;
  await ctx.status.phase({ state: 'running', step: 0, phase: 'reading the review and preparing the sandbox' });
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
  const client = await ctx.tokens.rest();
  const feedback = await ctx.step('feedback', async () =>
    fetchReviewFeedback(client, {
      owner: job.owner,
      repo: job.repo,
      pullNumber: job.pullNumber,
      since: { sha: target.record.lastSha },
      botLogin: await deps.github.botLogin(),
      allowBots: config.allow_bots,
      logger: ctx.log,
      signal: ctx.signal,
    }),
  );
  const last = requests.at(-1)!;
  const task = buildReviewTask({
    issue: { title: target.record.pinned.title, body: target.record.pinned.body },
    feedback,
    instructions: instructionsOf(requests),
    requestedBy: last.by,
    trigger: { ...(last.commentId !== undefined ? { commentId: last.commentId } : {}), ...(last.reviewId !== undefined ? { reviewId: last.reviewId } : {}) },
  });
  const checkout = { dir: ws.checkout.dir, baseCommit: head, headAfterSetup: { setupCommit, branch: target.headRef } };
  const run = await runInSandbox(ctx, config, { title: task.title, body: task.body, warning: task.warnings.join(' ') || undefined }, checkout);
  const agent = run.session.agent;
  if (agent.exitReason === 'cancelled') throw new CancelledError();
  const patch = run.session.patch?.diff ?? Buffer.alloc(0);
  if (patch.length === 0) return noChange(ctx, noPatchWhy(ctx, run), agent.exitReason);
  const change = await applyChange(ctx, config, `Address review on #${job.pullNumber}`, head, ws.mirrorDir, patch, ws.htmlUrl, `Revised by Lilypad after review of #${job.pullNumber} (requested by @${last.by})`);
  if (!change.hasChanges) return noChange(ctx, `every file the agent changed is left out of pull requests: ${change.dropped.map((d) => `\`${d.path}\` (${d.reason})`).join('; ')}.`, agent.exitReason, patch);
  await refuseSecrets(ctx.scanner(), patch, []);
  await pushOnTop(ctx, change, target.headRef, head, ws.cloneUrl);

  // Reported from here on: the commit is on the pull request.
  const sha = change.headSha!;
  const commitUrl = `${ws.htmlUrl}/commit/${sha}`;
  const trigger = requests.map((r) => `${r.trigger === 'review' ? 'review' : '`/lilypad`'} by @${r.by}`).filter((v, i, a) => a.indexOf(v) === i).join(', ');
  const record = await addRevision(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, job.pullNumber, { issueNumber: target.record.issueNumber, branch: target.headRef, pinned: target.record.pinned }, revisionOf(run, sha, trigger));
  await rewriteRevisions(ctx, job.pullNumber, record.revisions, ws.htmlUrl).catch((err: unknown) => ctx.log.warn({ err: (err as Error).message }, 'could not update the Revisions table'));
  const replied = await replyInThreads(ctx, await ctx.tokens.rest(), task.addressed.threads, sha, commitUrl, agent.finalAnswer);
  const incomplete = BUDGET_EXITS.has(agent.exitReason);
  const cut = task.cut.threads + task.cut.conversation + task.cut.reviews;
  await ctx.status.finish({
    state: 'revised',
    sha,
    commitUrl,
    incomplete,
    exitReason: agent.exitReason,
    threads: replied,
    ...(cut > 0 ? { note: `${cut} older item(s) of feedback did not fit the model's budget and were left out.` } : {}),
  });
  deps.recorder.finish({ outcome: 'pull_request', exitReason: agent.exitReason, diff: patch, pr: { number: job.pullNumber, url: `${ws.htmlUrl}/pull/${job.pullNumber}` } });
  return { result: 'revised', number: job.pullNumber, sha, incomplete };
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
