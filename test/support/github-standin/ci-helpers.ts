/**
 * The stand-in's test helpers for CI: a check run (a GitHub Actions job with its log, or another
 * app's check), completing it, a commit status, and the check_run / check_suite / status webhooks
 * GitHub sends for each, built on the @octokit/webhooks-examples payloads and optionally delivered.
 */
import { ACTIONS_APP_SLUG, checkRunJson, checkSuiteJson, ciOf, stampLogLines, statusJson, suiteStatus } from './ci-state.ts';
import type { CheckRunRec, StatusRec } from './ci-state.ts';
import * as gitRepo from './git-repo.ts';
import { isoNow } from './state.ts';
import type { RepoRec, StandinState } from './state.ts';
import type { CheckAnnotationInput, CheckRunInput, CheckRunResult, ProducedWebhook, StandinCiHelpers, WebhookResult } from './types.ts';
import type { PayloadFactory } from './webhooks.ts';

type Deliver = (targetUrl: string, event: string, payload: object) => Promise<WebhookResult>;

/** GitHub refuses longer status descriptions. */
const MAX_STATUS_DESCRIPTION = 140;

export function ciHelpers(state: StandinState, payloads: PayloadFactory, deliver: Deliver): StandinCiHelpers {
  const ci = ciOf(state);
  const repoOrThrow = (owner: string, repo: string): RepoRec => {
    const r = state.findRepo(owner, repo);
    if (!r) throw new Error(`no repository ${owner}/${repo} in the stand-in`);
    return r;
  };
  const commitOrThrow = (repo: RepoRec, ref: string): string => {
    const sha = gitRepo.resolveCommit(repo.gitDir, ref);
    if (!sha) throw new Error(`no commit ${ref} in ${repo.owner.login}/${repo.name}`);
    return sha;
  };
  const sendAll = async (webhooks: ProducedWebhook[], to: string | undefined): Promise<WebhookResult[]> => {
    const out: WebhookResult[] = [];
    if (to === undefined) return out;
    for (const w of webhooks) out.push(await deliver(to, w.event, w.payload));
    return out;
  };

  const checkRunEvent = (action: string, run: CheckRunRec, sender: string): ProducedWebhook => ({
    event: 'check_run',
    payload: payloads.buildForRepo('check_run', action, action, { check_run: checkRunJson(state, run, true), sender: state.user(state.ensureUser(sender)) }, run.suite.repo),
  });
  const checkSuiteEvent = (run: CheckRunRec, sender: string): ProducedWebhook => {
    const { repository: _repo, ...suite } = checkSuiteJson(state, run.suite);
    return { event: 'check_suite', payload: payloads.buildForRepo('check_suite', 'completed', 'completed', { check_suite: suite, sender: state.user(state.ensureUser(sender)) }, run.suite.repo) };
  };

  /** Completes `run` with `conclusion`; for a failed Actions job, adds the runner's closing line and annotation. */
  const complete = (run: CheckRunRec, input: Parameters<StandinCiHelpers['completeCheckRun']>[3]): void => {
    const conclusion = input.conclusion ?? 'success';
    const actions = run.suite.workflowRun !== null;
    const failed = conclusion === 'failure' || conclusion === 'timed_out';
    run.status = 'completed';
    run.conclusion = conclusion;
    run.completedAt = isoNow();
    if (input.title !== undefined) run.title = input.title;
    if (input.summary !== undefined) run.summary = input.summary;
    if (input.text !== undefined) run.text = input.text;
    run.annotations.push(...(input.annotations ?? []));
    run.steps = run.steps.map((st) => ({ ...st, conclusion: failed && st.number === run.steps.length ? conclusion : 'success' }));
    if (!actions) return;
    const lines = typeof input.log === 'string' ? input.log.split('\n') : [...(input.log ?? [])];
    const exitCode = input.exitCode ?? 1;
    if (failed) {
      lines.push(`##[error]Process completed with exit code ${exitCode}.`);
      // GitHub Actions files the failure of a step as an annotation on the workflow directory.
      const closing: CheckAnnotationInput = { path: '.github', start_line: 1, annotation_level: 'failure', message: `Process completed with exit code ${exitCode}.` };
      run.annotations.push(closing);
    }
    lines.push('Cleaning up orphan processes');
    run.log = (run.log ?? '') + stampLogLines(lines, new Date()).slice(run.log ? 1 : 0);
  };

  const result = async (run: CheckRunRec, webhooks: ProducedWebhook[], to: string | undefined): Promise<CheckRunResult> => ({
    checkRun: checkRunJson(state, run),
    checkSuite: checkSuiteJson(state, run.suite),
    jobId: run.suite.workflowRun ? run.id : null,
    runId: run.suite.workflowRun?.id ?? null,
    webhooks,
    deliveries: await sendAll(webhooks, to),
  });

  return {
    async addCheckRun(owner, repo, input: CheckRunInput): Promise<CheckRunResult> {
      const r = repoOrThrow(owner, repo);
      const sha = commitOrThrow(r, input.ref);
      const appSlug = input.app ?? ACTIONS_APP_SLUG;
      const actions = appSlug === ACTIONS_APP_SLUG;
      if (!actions && (input.log !== undefined || input.workflow !== undefined)) throw new Error('only GitHub Actions check runs (app github-actions) have a workflow and a job log');
      if (input.fromFork !== undefined) {
        const [forkOwner = '', forkName = ''] = input.fromFork.split('/');
        if (!state.findRepo(forkOwner, forkName)) throw new Error(`no repository ${input.fromFork} in the stand-in to be the fork (create it first)`);
      }
      const origin = { ...(input.headBranch !== undefined ? { branch: input.headBranch } : {}), ...(input.fromFork !== undefined ? { fork: input.fromFork } : {}) };
      const suite = ci.suiteFor(r, ci.app(appSlug), sha, actions ? (input.workflow ?? 'CI') : null, origin);
      const status = input.status ?? 'completed';
      const run = ci.addRun(suite, {
        name: input.name,
        status: status === 'completed' ? 'in_progress' : status,
        conclusion: null,
        startedAt: isoNow(),
        completedAt: null,
        title: input.title ?? null,
        summary: input.summary ?? null,
        text: input.text ?? null,
        annotations: [],
        detailsUrl: input.detailsUrl ?? null,
        log: null,
        steps: actions ? [{ name: 'Set up job', conclusion: null, number: 1 }, { name: `Run ${input.name}`, conclusion: null, number: 2 }] : [],
      });
      const sender = input.sender ?? r.owner.login;
      const webhooks: ProducedWebhook[] = [checkRunEvent('created', run, sender)];
      if (status === 'completed') {
        complete(run, input);
        webhooks.push(checkRunEvent('completed', run, sender));
        if (suiteStatus(suite).status === 'completed') webhooks.push(checkSuiteEvent(run, sender));
      } else {
        run.annotations.push(...(input.annotations ?? []));
        if (actions && input.log !== undefined) run.log = stampLogLines(typeof input.log === 'string' ? input.log.split('\n') : input.log, new Date());
      }
      return result(run, webhooks, input.deliverTo);
    },

    async completeCheckRun(owner, repo, checkRunId, input): Promise<CheckRunResult> {
      const r = repoOrThrow(owner, repo);
      const run = ci.runs.get(checkRunId);
      if (!run || run.suite.repo !== r) throw new Error(`no check run ${checkRunId} in ${owner}/${repo}`);
      if (run.status === 'completed') throw new Error(`check run ${checkRunId} has already completed`);
      complete(run, input);
      const sender = input.sender ?? r.owner.login;
      const webhooks = [checkRunEvent('completed', run, sender)];
      if (suiteStatus(run.suite).status === 'completed') webhooks.push(checkSuiteEvent(run, sender));
      return result(run, webhooks, input.deliverTo);
    },

    async addCommitStatus(owner, repo, input) {
      const r = repoOrThrow(owner, repo);
      const sha = commitOrThrow(r, input.ref);
      const description = input.description ?? null;
      if (description !== null && description.length > MAX_STATUS_DESCRIPTION) throw new Error(`a status description is at most ${MAX_STATUS_DESCRIPTION} characters on GitHub`);
      const creator = state.ensureUser(input.creator ?? r.owner.login);
      const st: StatusRec = ci.addStatus({ repo: r, sha, state: input.state, context: input.context ?? 'default', description, targetUrl: input.targetUrl ?? null, creator });
      const info = gitRepo.commitInfo(r.gitDir, sha);
      const full = `${r.owner.login}/${r.name}`;
      const commitUrl = `${state.apiUrl}/repos/${full}/commits/${sha}`;
      const fill = {
        id: st.id,
        sha,
        name: full,
        target_url: st.targetUrl,
        context: st.context,
        description: st.description,
        state: st.state,
        commit: {
          sha,
          node_id: Buffer.from(`06:Commit${r.id}:${sha}`).toString('base64'),
          commit: {
            author: { name: info?.authorName ?? '', email: info?.authorEmail ?? '', date: info?.authorDate ?? st.createdAt },
            committer: { name: info?.committerName ?? '', email: info?.committerEmail ?? '', date: info?.committerDate ?? st.createdAt },
            message: info?.message ?? '',
            tree: { sha: info?.tree ?? '', url: `${state.apiUrl}/repos/${full}/git/trees/${info?.tree ?? ''}` },
            url: `${state.apiUrl}/repos/${full}/git/commits/${sha}`,
            comment_count: 0,
            verification: { verified: false, reason: 'unsigned', signature: null, payload: null },
          },
          url: commitUrl,
          html_url: `${state.origin}/${full}/commit/${sha}`,
          comments_url: `${commitUrl}/comments`,
          author: null,
          committer: null,
          parents: (info?.parents ?? []).map((p) => ({ sha: p, url: `${state.apiUrl}/repos/${full}/commits/${p}`, html_url: `${state.origin}/${full}/commit/${p}` })),
        },
        branches: gitRepo
          .listBranches(r.gitDir)
          .filter((b) => gitRepo.branchSha(r.gitDir, b) === sha)
          .map((b) => ({ name: b, commit: { sha, url: commitUrl }, protected: false })),
        created_at: st.createdAt,
        updated_at: st.createdAt,
        sender: state.user(creator),
      };
      const webhooks: ProducedWebhook[] = [{ event: 'status', payload: payloads.buildForRepo('status', undefined, undefined, fill, r) }];
      return { status: statusJson(state, st), webhooks, deliveries: await sendAll(webhooks, input.deliverTo) };
    },

    checkRuns(owner, repo, ref) {
      const r = repoOrThrow(owner, repo);
      return ci.runsOn(r, commitOrThrow(r, ref)).map((run) => checkRunJson(state, run));
    },

    jobLog(jobId) {
      return ci.runs.get(jobId)?.log ?? null;
    },
  };
}
