import { prepareIssue } from '../agent/prompt.ts';
import { quoteUntrusted, renderPullRequestBody } from '../github/pull-request-body.ts';
import { renderRevisions, testWord, withRevisions, type Revision } from '../github/revisions.ts';
import { pinText, runJobId } from '../store/jobs.ts';
import { runLinkFor } from '../config/public-urls.ts';
import { CancelledError } from '../shared/cancel.ts';
import type { JobContext, RunJobOutcome } from './job-context.ts';
import { endIfStale, releaseJob } from './job-context.ts';
import { applyChange, publishPullRequest, refuseSecrets } from './phases/publish.ts';
import { recordIssueRevision, reportPullRequest } from './phases/report.ts';
import { runInSandbox, type SandboxRun } from './phases/sandbox.ts';
import { validateIssueJob } from './phases/validate.ts';
import { prepareWorkspace } from './phases/workspace.ts';
import { resetFollowupCount } from '../store/followup-requests.ts';
import { readPublished } from '../store/published.ts';

export const BUDGET_EXITS = new Set(['max_turns', 'max_context_len', 'max_tokens_per_turn', 'max_time', 'llm_query_error', 'tool_error']);

/**
 * An issue job: one labelled issue becomes a draft pull request, or an honest account of why not.
 * validate → workspace → sandbox (setup, tests, agent, tests) → publish → report. Every side
 * effect is idempotent (a retry or re-run updates its own branch, pull request and status comment,
 * never anyone else's commits), and everything is released whatever happens.
 */
export async function runIssueJob(ctx: JobContext): Promise<RunJobOutcome> {
  const { job, deps } = ctx;
  try {
    // Another copy of this job may already have published for this trigger (see publishPullRequest).
    const already = await readPublished(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, runJobId(job.repoId, job.issueNumber), job.deliveryId);
    if (already) return await reportPullRequest(ctx, already);
    const { text, config } = await validateIssueJob(ctx);
    await ctx.status.phase({ state: 'running', step: 0, phase: 'preparing the sandbox' });
    const ws = await prepareWorkspace(ctx);
    const run = await runInSandbox(ctx, config, prepareIssue(text.title, text.body), ws.checkout);
    const agent = run.session.agent;
    if (agent.exitReason === 'cancelled') throw new CancelledError();

    const patch = run.session.patch?.diff ?? Buffer.alloc(0);
    if (patch.length === 0) return await noChange(ctx, noPatchWhy(ctx, run), agent.exitReason);
    const change = await applyChange(ctx, config, text.title, ws.checkout.baseCommit, ws.mirrorDir, patch, ws.htmlUrl, `Drafted by Lilypad for #${job.issueNumber}`);
    if (!change.hasChanges) return await noChange(ctx, `every file the agent changed is left out of pull requests: ${change.dropped.map((d) => `\`${d.path}\` (${d.reason})`).join('; ')}.`, agent.exitReason, patch);

    const incomplete = BUDGET_EXITS.has(agent.exitReason);
    const revision = revisionOf(run, change.headSha!, `${job.trigger === 'label' ? 'label' : '`/lilypad`'} by @${job.triggeredBy}`);
    const body = renderPullRequestBody({
      issueNumber: job.issueNumber,
      issueTitle: text.title,
      summary: ctx.scanner().redact(agent.finalAnswer),
      files: change.files,
      dropped: change.dropped,
      leftOut: run.session.patch?.leftOut ?? [],
      tests: run.session.tests,
      run: {
        model: run.model,
        steps: agent.steps,
        promptTokens: agent.usage.prompt_tokens,
        completionTokens: agent.usage.completion_tokens,
        seconds: revision.seconds,
        exitReason: agent.exitReason,
        image: run.image,
        runId: ctx.runId,
        runUrl: runLinkFor(deps.env, ctx.runId),
      },
      incomplete,
      warnings: [...agent.warnings],
      ciHeld: config.ci === 'hold',
      ...(run.attempts ? { attempts: { rows: run.attempts.summaries, summary: run.attempts.selection.summary } } : {}),
    });
    const withTable = withRevisions(body, renderRevisions([revision], (sha) => `${ws.htmlUrl}/commit/${sha}`));
    const title = `${incomplete ? '[incomplete] ' : ''}Lilypad: ${text.title}`.slice(0, 250);
    await refuseSecrets(ctx.scanner(), patch, [withTable, title]);
    const { published, fresh } = await publishPullRequest(ctx, config, change, { title, body: withTable, baseBranch: ws.defaultBranch, cloneUrl: ws.cloneUrl, incomplete, exitReason: agent.exitReason });
    if (fresh) {
      await resetFollowupCount(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, published.number);
      const pinned = job.pinned ?? pinText(text.title, text.body);
      await recordIssueRevision(ctx, published, { issueNumber: job.issueNumber, branch: published.branch, pinned }, revision, ws.htmlUrl).catch((err: unknown) =>
        ctx.log.warn({ err: (err as Error).message }, 'could not record the revision'),
      );
    }
    return await reportPullRequest(ctx, published);
  } catch (err) {
    return await endIfStale(ctx, err);
  } finally {
    await releaseJob(ctx);
  }
}

export function revisionOf(run: SandboxRun, sha: string, trigger: string): Revision {
  const a = run.session.agent;
  return {
    trigger,
    sha,
    testsBefore: testWord(run.session.tests?.before),
    testsAfter: testWord(run.session.tests?.after),
    steps: a.steps,
    tokens: a.usage.prompt_tokens + a.usage.completion_tokens,
    seconds: (Date.now() - run.startedAt) / 1000,
  };
}

export function noPatchWhy(ctx: JobContext, run: SandboxRun): string {
  const agent = run.session.agent;
  return agent.exitReason === 'agent'
    ? `the agent finished without changing any file. Its last words: ${quoteLine(quoteUntrusted(ctx.scanner().redact(agent.finalAnswer)))}`
    : `the run ended (\`${agent.exitReason}\`${agent.error ? `: ${agent.error}` : ''}) before a change could be taken from the sandbox.`;
}

export async function noChange(ctx: JobContext, why: string, exitReason: string, diff?: Buffer): Promise<RunJobOutcome> {
  await ctx.status.finish({ state: 'no_change', why });
  ctx.deps.recorder.finish({ outcome: 'no_change', exitReason, why, ...(diff ? { diff } : {}) });
  return { result: 'no_change', why };
}

function quoteLine(text: string): string {
  const one = text.replace(/\s+/g, ' ').trim().slice(0, 300);
  return one ? `“${one}”` : '(none)';
}
