import { prepareIssue } from '../../agent/prompt.ts';
import { renderEvidence, renderPullRequestBody } from '../../github/pull-request-body.ts';
import { forgetWithheld, keepWithheld, MAX_WITHHELD_BYTES, readWithheld } from '../../store/withheld-changes.ts';
import { changeDiff } from '../../workspace/publish.ts';
import { renderRevisions, testWord, withRevisions, type Revision } from '../../github/revisions.ts';
import { pinText, runJobId, type IssueRunJob } from '../../store/jobs.ts';
import { runLinkFor } from '../../config/public-urls.ts';
import { gitTreeReader } from '../../inference/index.ts';
import { originLine, resolveConfig, runPlanOf, type EffectiveConfig } from '../effective-config.ts';
import { resetFollowupCount } from '../../store/followup-requests.ts';
import type { JobContext } from '../job-context.ts';
import type { RunOutcome } from '../outcome.ts';
import { commitMessage, refuseSecrets } from '../phases/change.ts';
import type { SandboxRun } from '../phases/attempts.ts';
import { publishPullRequest } from '../phases/publish.ts';
import { recordIssueRevision } from '../phases/report.ts';
import { recheckPinnedText, validateIssueJob } from '../phases/validate.ts';
import { prepareWorkspace, type Workspace } from '../phases/workspace.ts';
import { readPublished, type Published } from '../../store/published.ts';
import { evidenceLabel, evidenceSummary, perTestChanges, setupNotes } from '../run-report.ts';
import { BUDGET_EXITS, type FinishedWork, type PreparedRun, type RunPlug, type SpineStages } from '../spine.ts';

interface IssuePrepared extends PreparedRun {
  ws: Workspace;
  effective: EffectiveConfig;
  issueTitle: string;
  pinnedBody: string;
}

/**
 * An issue job: a labelled issue becomes a draft pull request on `lilypad/issue-N`, or an honest
 * account of why not. Every side effect is idempotent: a retry or re-run updates its own branch,
 * pull request and status comment, never anyone else's commits.
 */
export function issuePlug(ctx: JobContext<IssueRunJob>): RunPlug<IssuePrepared> {
  const { job, deps } = ctx;
  return {
    // Another copy of this job may already have published for this trigger (see publishPullRequest).
    async alreadyDone() {
      const already = await readPublished(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, runJobId(job.repoId, job.issueNumber), job.deliveryId);
      return already ? publishedOutcome(already) : null;
    },
    publishKept: (_ctx, stages) => (job.publishKept ? publishKeptChange(ctx, job.publishKept, stages) : Promise.resolve(null)),
    async prepare() {
      const { text, loaded } = await validateIssueJob(ctx);
      await ctx.progress.phase({ kind: 'preparing', text: 'preparing the sandbox' });
      const ws = await prepareWorkspace(ctx);
      // Setup and tests the configuration does not give are worked out from the files at the base commit.
      const effective = await ctx.step('infer', () => resolveConfig(loaded, gitTreeReader(ws.mirrorDir, ws.checkout.baseCommit)));
      const config = effective.config;
      return {
        config,
        effective,
        plan: runPlanOf(effective, `github:${job.repoId}`, { account: `github-installation:${job.installationId}`, name: `${job.owner}/${job.repo}` }),
        ws,
        issueTitle: text.title,
        pinnedBody: text.body,
        task: prepareIssue(text.title, text.body),
        checkout: ws.checkout,
        source: ws.mirrorDir,
        instructionsAt: { gitDir: ws.mirrorDir, commit: ws.checkout.baseCommit },
        subject: `${job.owner}/${job.repo}#${job.issueNumber}`,
        commit: { message: commitMessage(text.title, `Drafted by Lilypad for #${job.issueNumber}`, config.ci === 'hold'), author: await deps.github.commitAuthor(ws.htmlUrl) },
        beforeAgent: () => recheckPinnedText(ctx),
      };
    },
    publish: (_ctx, prepared, work) => openPullRequest(ctx, prepared, work),
  };
}

async function openPullRequest(ctx: JobContext<IssueRunJob>, p: IssuePrepared, work: FinishedWork): Promise<RunOutcome> {
  const { job, deps } = ctx;
  const agent = work.run.session.agent;
  const incomplete = BUDGET_EXITS.has(agent.exitReason);
  const revision = revisionOf(work.run, work.change.headSha!, `${job.trigger === 'label' ? 'label' : '`/lilypad`'} by @${job.triggeredBy}`);
  const body = withRevisions(pullRequestBody(ctx, p, work, revision.seconds, incomplete), renderRevisions([revision], (sha) => `${p.ws.htmlUrl}/commit/${sha}`));
  const title = `${incomplete ? '[incomplete] ' : ''}Lilypad: ${p.issueTitle}`.slice(0, 250);
  refuseSecrets(ctx.scanner(), Buffer.alloc(0), [body, title]);
  const verdict = work.run.session.evidence?.evidence.verdict ?? 'unverified';
  if (p.config.publish === 'verified' && verdict !== 'verified') return withhold(ctx, p, work, { title, body: pullRequestBody(ctx, p, work, revision.seconds, incomplete), verdict, incomplete, revision });
  const { published, fresh } = await publishPullRequest(ctx, p.config, work.change, { title, body, baseBranch: p.ws.defaultBranch, cloneUrl: p.ws.cloneUrl, incomplete, exitReason: agent.exitReason, evidenceLabel: evidenceLabel(work.run.session) });
  if (fresh) {
    await resetFollowupCount(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, published.number);
    const pinned = job.pinned ?? pinText(p.issueTitle, p.pinnedBody);
    await recordIssueRevision(ctx, published, { issueNumber: job.issueNumber, branch: published.branch, pinned }, revision, p.ws.htmlUrl).catch((err: unknown) =>
      ctx.log.warn({ err: (err as Error).message }, 'could not record the revision'),
    );
  }
  // The status says what was inferred, as the pull request does.
  const origin = originLine(p.effective);
  return { ...publishedOutcome(published), note: [published.note, origin].filter(Boolean).join(' ') || undefined };
}

function pullRequestBody(ctx: JobContext<IssueRunJob>, p: IssuePrepared, work: FinishedWork, seconds: number, incomplete: boolean): string {
  const { run, change } = work;
  const agent = run.session.agent;
  return renderPullRequestBody({
    issueNumber: ctx.job.issueNumber,
    issueTitle: p.issueTitle,
    summary: ctx.scanner().redact(agent.finalAnswer),
    files: change.files,
    dropped: change.dropped,
    leftOut: run.session.patch?.leftOut ?? [],
    tests: run.session.tests ? { ...run.session.tests, perTest: perTestChanges(run.session.tests.verdicts) } : null,
    evidence: evidenceSummary(run.session, run),
    origin: originLine(p.effective),
    setupNotes: setupNotes(run.session.setup),
    run: {
      model: run.model,
      steps: agent.steps,
      promptTokens: agent.usage.prompt_tokens,
      completionTokens: agent.usage.completion_tokens,
      seconds,
      exitReason: agent.exitReason,
      image: run.image,
      runId: ctx.runId,
      runUrl: runLinkFor(ctx.deps.env, ctx.runId),
    },
    incomplete,
    warnings: [...agent.warnings],
    ciHeld: p.config.ci === 'hold',
    ...(run.attempts ? { attempts: { rows: run.attempts.summaries, summary: run.attempts.ranking.summary } } : {}),
  });
}

/**
 * `publish: verified` and the change is not: nothing is pushed. The change (as the app would have
 * published it) and the pull request's text are kept for `/lilypad publish`; the status says what
 * was tried and the evidence.
 */
async function withhold(ctx: JobContext<IssueRunJob>, p: IssuePrepared, work: FinishedWork, pr: { title: string; body: string; verdict: string; incomplete: boolean; revision: Revision }): Promise<RunOutcome> {
  const { job, deps } = ctx;
  const diff = await changeDiff(work.change);
  const agent = work.run.session.agent;
  const kept = diff.length <= MAX_WITHHELD_BYTES;
  if (kept) {
    await keepWithheld(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, job.repoId, {
      runId: ctx.runId,
      issueNumber: job.issueNumber,
      baseCommit: p.checkout.baseCommit,
      patch: diff.toString('base64'),
      title: pr.title,
      body: pr.body,
      verdict: pr.verdict,
      exitReason: agent.exitReason,
      incomplete: pr.incomplete,
      revision: pr.revision,
      at: new Date().toISOString(),
    });
  }
  const attempts = work.run.attempts ? `${work.run.attempts.summaries.length} attempts in parallel; the best` : 'One attempt';
  const tests = work.run.session.tests;
  const tried = `${attempts} changed ${work.change.files.map((f) => `\`${f.path}\``).join(', ')} in ${agent.steps} steps (\`${agent.exitReason}\`); the tests ${tests ? `before: ${testWord(tests.before)}, after: ${testWord(tests.after, tests.afterNotRun)}` : 'did not run'}.${kept ? '' : ' The change is too large to keep for `/lilypad publish`; it is in the run\'s folder on the worker.'}`;
  const summary = evidenceSummary(work.run.session);
  return { result: 'withheld', verdict: pr.verdict, tried, evidence: summary ? renderEvidence(summary) : '_No tests ran, so there is no evidence._', exitReason: agent.exitReason, diff: work.patch };
}

/**
 * `/lilypad publish`: the change run `runId` kept (`publish: verified`, not verified) is opened as a
 * draft pull request as that run would have opened it, with a line at the top saying who published
 * it against the evidence. No agent runs; the trigger is checked as for any run, the change is
 * applied to the base it was made on and scanned for secrets again.
 */
async function publishKeptChange(ctx: JobContext<IssueRunJob>, runId: string, stages: SpineStages): Promise<RunOutcome> {
  const { job, deps } = ctx;
  const prefix = deps.env.LILYPAD_QUEUE_PREFIX;
  const { text, config } = await validateIssueJob(ctx);
  const kept = await readWithheld(deps.redis, prefix, job.repoId, job.issueNumber);
  if (!kept || kept.runId !== runId) {
    return { result: 'no_change', why: `the change run \`${runId}\` kept is no longer there (a change is kept 30 days, and a later run replaces it). Label the issue again for a new run.`, exitReason: 'agent' };
  }
  await ctx.progress.phase({ kind: 'preparing', text: 'publishing the change the last run kept' });
  const ws = await prepareWorkspace(ctx);
  const patch = Buffer.from(kept.patch, 'base64');
  const commit = { message: commitMessage(text.title, `Drafted by Lilypad for #${job.issueNumber}`, config.ci === 'hold'), author: await deps.github.commitAuthor(ws.htmlUrl) };
  const change = await stages.change(ctx, { source: ws.mirrorDir, baseCommit: kept.baseCommit, patch, excludePaths: config.exclude_paths, commit });
  const revision: Revision = { ...kept.revision, sha: change.headSha!, trigger: `\`/lilypad publish\` by @${job.triggeredBy}` };
  const warning = `> [!WARNING]\n> Published with \`/lilypad publish\` by @${job.triggeredBy}, although the evidence is **${kept.verdict}** and this repository publishes only verified changes (\`publish: verified\`).\n\n`;
  const body = withRevisions(warning + kept.body, renderRevisions([revision], (sha) => `${ws.htmlUrl}/commit/${sha}`));
  refuseSecrets(ctx.scanner(), patch, [body, kept.title]);
  const label = kept.verdict === 'verified' ? 'lilypad:verified' : 'lilypad:unverified';
  const { published, fresh } = await publishPullRequest(ctx, config, change, { title: kept.title, body, baseBranch: ws.defaultBranch, cloneUrl: ws.cloneUrl, incomplete: kept.incomplete, exitReason: kept.exitReason, evidenceLabel: label });
  if (fresh) {
    await resetFollowupCount(deps.redis, prefix, job.repoId, published.number);
    const pinned = job.pinned ?? pinText(text.title, text.body);
    await recordIssueRevision(ctx, published, { issueNumber: job.issueNumber, branch: published.branch, pinned }, revision, ws.htmlUrl);
  }
  await forgetWithheld(deps.redis, prefix, job.repoId, job.issueNumber);
  return publishedOutcome(published);
}

/** What a publication was, as the run's outcome (also for a later copy of the job that finds it). */
function publishedOutcome(p: Published): Extract<RunOutcome, { result: 'pull_request' }> {
  return { result: 'pull_request', number: p.number, url: p.url, updated: p.updated, incomplete: p.incomplete, branch: p.branch, exitReason: p.exitReason, draft: p.draft, note: p.note };
}

/** One row of the pull request's Revisions table. */
export function revisionOf(run: SandboxRun, sha: string, trigger: string): Revision {
  const a = run.session.agent;
  return {
    trigger,
    sha,
    testsBefore: testWord(run.session.tests?.before),
    testsAfter: testWord(run.session.tests?.after, run.session.tests?.afterNotRun),
    steps: a.steps,
    tokens: a.usage.prompt_tokens + a.usage.completion_tokens,
    seconds: (Date.now() - run.startedAt) / 1000,
  };
}
