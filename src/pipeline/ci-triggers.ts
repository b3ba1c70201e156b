import type { RepoConfig } from '../config/repo-config.ts';
import { CiFeedbackError, DEFAULT_CI_APPS, fetchCiFeedback, type FailingCheck } from '../github/ci-feedback.ts';
import type { GitHubClient, InstallationClient, IssueRef } from '../github/client.ts';
import { comment, replyOnce } from '../github/replies.ts';
import { loadRepoConfig } from '../github/repo-config-loader.ts';
import { SecretScanner } from '../observability/secrets.ts';
import { addressedSignatures, readCiFixRecord, recordCiDecision, uncountAutoFix, withCiFixLock, type CiFixPull } from '../store/ci-fix-records.ts';
import type { CiEventJob, IssueEventJob } from '../store/jobs.ts';
import { readPrRecord } from '../store/pull-records.ts';
import { ciCapBody, ciHintBody, decideCiFix, type CiFixDecision } from './ci-fix-policy.ts';
import { requestFollowup, requestFollowupIfIdle, type FollowupDeps, type FollowupPullRef } from './followups.ts';
import type { TriggerDeps } from './triggers.ts';

/**
 * What a failing CI result on a commit starts (ci-fix-policy.ts says what, this file finds out
 * the facts and does it), and `/lilypad fix-ci`. Only Lilypad's own open pull requests, only when
 * the commit is still their head, only checks by CI providers (never Lilypad's own), only results
 * that are the pull request's: a check suite that ran on its branch in this repository (never a
 * fork's pull request on the same commit, nor another branch), a commit status of a context the
 * repository names in `ci_status_contexts`. A refused result is said in the outcome (logged). A failing
 * check run whose suite (for GitHub Actions, its workflow run) is still running waits for the
 * suite's own event, so a fix sees every failure of a workflow at once; a finished suite or a
 * failing status decides at once (waiting for every other CI could wait for ever: a status that
 * turns green sends no event Lilypad acts on). The fix reads the failing checks again when it
 * starts. Each head is decided about once, under a lock per pull request: GitHub sends a check_run
 * and a check_suite event for one failure, and may deliver each again.
 */

/** A failing check run, check suite or commit status: for each of Lilypad's pull requests with the commit as head, what `ci_fix` says. */
export async function handleCiEvent(evt: CiEventJob, deps: TriggerDeps): Promise<string> {
  const { slug } = await deps.github.appIdentity();
  const notCi = notFromCi(evt, slug);
  if (notCi) return notCi;
  if (evt.kind === 'check_run' && evt.suiteCompleted === false) return 'waiting: its suite is still running (the suite’s own event decides)';
  const notOurs = notThisRepositorysBranch(evt);
  if (notOurs) return notOurs;
  const client = await deps.github.installation(evt.installationId);
  const pulls = evt.kind === 'status' ? await pullsWithHead(client, evt) : evt.pullNumbers;
  if (pulls.length === 0) return 'ignored: no open pull request has this commit as its head';
  const outcomes: string[] = [];
  for (const n of pulls) outcomes.push(`#${n}: ${await forPull(evt, deps, client, slug, n)}`);
  return outcomes.join('; ');
}

/** Why the result is not a CI provider's (null: it is). Statuses come from any CI but Lilypad's own bot. */
function notFromCi(evt: CiEventJob, slug: string): string | null {
  if (evt.app === null) return evt.sender.login.toLowerCase() === `${slug}[bot]`.toLowerCase() ? "ignored: Lilypad's own commit status" : null;
  const app = evt.app.toLowerCase();
  if (app === slug.toLowerCase()) return "ignored: Lilypad's own check";
  if (!DEFAULT_CI_APPS.includes(app)) return `ignored: a check by ${evt.app}, which is not a CI provider`;
  return null;
}

/**
 * Why a check result is not one of a pull request of this repository (null: it may be). GitHub
 * gives a suite that a fork's pull request ran no branch and no pull request, even on a commit that
 * is also the head of Lilypad's branch; a suite of another branch names that branch and none of
 * Lilypad's pull requests. Neither is looked at further, so neither can start a fix.
 */
function notThisRepositorysBranch(evt: CiEventJob): string | null {
  if (evt.kind === 'status') return null;
  if (evt.headBranch === undefined) return 'refused: the event does not say which branch its check suite ran on (queued by an earlier version); it does not count';
  if (evt.headBranch === null) return "refused: its check suite ran on no branch of this repository (a fork's pull request with the same commit); results from forks never count";
  if (evt.pullNumbers.length === 0) return `refused: its check suite ran on \`${evt.headBranch.slice(0, 100)}\`, which is no open pull request's branch in this repository`;
  return null;
}

/** A commit status names no pull request: GitHub is asked which open ones have the commit as their head. */
async function pullsWithHead(client: GitHubClient, evt: CiEventJob): Promise<number[]> {
  const res = await client.request('GET /repos/{owner}/{repo}/commits/{commit_sha}/pulls', { owner: evt.owner, repo: evt.repo, commit_sha: evt.headSha, per_page: 100 });
  return res.data.filter((p) => p.state === 'open' && p.head.sha === evt.headSha).map((p) => p.number).slice(0, 50);
}

interface PullFacts {
  evt: CiEventJob;
  deps: TriggerDeps;
  client: InstallationClient;
  ref: IssueRef;
  pull: CiFixPull;
  target: FollowupPullRef;
  config: RepoConfig;
  failing: FailingCheck[];
  /** The last commit Lilypad pushed to the pull request, and the pull request's page (for Lilypad's commit identity on its host). */
  lastSha: string;
  htmlUrl: string;
}

async function forPull(evt: CiEventJob, deps: TriggerDeps, client: InstallationClient, slug: string, pullNumber: number): Promise<string> {
  const prefix = deps.env.LILYPAD_QUEUE_PREFIX;
  const record = await readPrRecord(deps.redis, prefix, evt.repoId, pullNumber);
  if (!record) return 'ignored: not a Lilypad pull request';
  const pull: CiFixPull = { repoId: evt.repoId, pullNumber };
  // Cheap checks first: most CI events are for heads already decided, or for commits that moved on.
  if ((await readCiFixRecord(deps.redis, prefix, pull)).decided.includes(evt.headSha)) return 'already decided for this head';
  const pr = (await client.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: evt.owner, repo: evt.repo, pull_number: pullNumber })).data;
  if (pr.state !== 'open' || pr.head.ref !== record.branch) return 'ignored: not an open Lilypad pull request';
  if (evt.kind !== 'status' && evt.headBranch !== pr.head.ref) {
    return `refused: its check suite ran on \`${String(evt.headBranch).slice(0, 100)}\`, not on the pull request's branch \`${pr.head.ref}\``;
  }
  if (pr.head.sha !== evt.headSha) return `ignored: ${evt.headSha.slice(0, 7)} is no longer its head`;
  const loaded = await loadRepoConfig(client, evt.owner, evt.repo);
  if (!loaded.ok) return 'ignored: the configuration is not valid (said when someone asks Lilypad for something)';
  if (loaded.config.ci_fix === 'off') return 'ignored: ci_fix is off';
  if (evt.kind === 'status' && !loaded.config.ci_status_contexts.includes(evt.name ?? '')) {
    return `ignored: the commit status \`${(evt.name ?? '').slice(0, 100)}\` is not one of the contexts named in ci_status_contexts`;
  }
  const ref: IssueRef = { owner: evt.owner, repo: evt.repo, issueNumber: pullNumber };
  const failing = await readFailing(client, evt, slug, deps, ref, { number: pullNumber, branch: pr.head.ref }, loaded.config.ci_status_contexts);
  if (typeof failing === 'string') return failing;
  const target: FollowupPullRef = { installationId: evt.installationId, repoId: evt.repoId, owner: evt.owner, repo: evt.repo, pullNumber, issueNumber: record.issueNumber };
  const facts: PullFacts = { evt, deps, client, ref, pull, target, config: loaded.config, failing, lastSha: record.lastSha, htmlUrl: pr.html_url };
  return withCiFixLock(deps.redis, prefix, pull, () => decideAndAct(facts));
}

/** The failing CI checks on the head, or why they cannot be read; results from elsewhere left out, with a log line. */
async function readFailing(
  client: GitHubClient,
  evt: CiEventJob,
  slug: string,
  deps: TriggerDeps,
  ref: IssueRef,
  pull: { number: number; branch: string },
  statusContexts: readonly string[],
): Promise<FailingCheck[] | string> {
  try {
    const opts = { owner: evt.owner, repo: evt.repo, headSha: evt.headSha, pull, ownAppSlug: slug, statusContexts, scanner: new SecretScanner() };
    const feedback = await fetchCiFeedback(client, opts);
    logLeftOut(deps, `${evt.owner}/${evt.repo}#${pull.number}`, evt.headSha, feedback.ignored);
    return feedback.failing;
  } catch (err) {
    // A missing permission is the installation's to fix, said once; anything else is retried with the event.
    if (!(err instanceof CiFeedbackError) || err.status !== 403) throw err;
    await replyOnce(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, client, ref, 'ci-unreadable', `**Lilypad** cannot read the CI results of this pull request: ${err.message}`);
    return `CI results not readable: ${err.message}`;
  }
}

/** A log line for CI results on the head that were not read: a fork's or another branch's suites, unnamed status contexts. */
export function logLeftOut(deps: Pick<TriggerDeps, 'logger'>, pull: string, headSha: string, ignored: { elsewhere: number; statusContexts: readonly string[] }): void {
  if (ignored.elsewhere === 0 && ignored.statusContexts.length === 0) return;
  deps.logger.info(
    { pull, head: headSha.slice(0, 7), elsewhere: ignored.elsewhere, statusContexts: ignored.statusContexts.slice(0, 20) },
    "CI results on the head that are not the pull request's were left out (check runs of a fork's or another branch's suites; status contexts not in ci_status_contexts)",
  );
}

async function decideAndAct(f: PullFacts): Promise<string> {
  const prefix = f.deps.env.LILYPAD_QUEUE_PREFIX;
  const record = await readCiFixRecord(f.deps.redis, prefix, f.pull);
  if (record.decided.includes(f.evt.headSha)) return 'already decided for this head';
  const decision = decideCiFix({
    mode: f.config.ci_fix,
    attemptsAllowed: f.config.ci_fix_attempts,
    autoFixesSoFar: record.autoFixes,
    headIsLilypads: f.config.ci_fix === 'auto' ? await isLilypadsHead(f) : true,
    failing: f.failing.map((c) => ({ name: c.name, signature: c.signature })),
    addressed: addressedSignatures(record),
  });
  return act(decision, f, record.autoFixes);
}

async function act(decision: CiFixDecision, f: PullFacts, autoFixesSoFar: number): Promise<string> {
  const { redis, env } = f.deps;
  const prefix = env.LILYPAD_QUEUE_PREFIX;
  const sha = f.evt.headSha;
  const hint = (reason: Parameters<typeof ciHintBody>[2]) => replyOnce(redis, prefix, f.client, f.ref, `ci-hint:${sha}`, ciHintBody(sha, f.failing, reason));
  switch (decision.kind) {
    case 'nothing':
      return `nothing: ${decision.why}`;
    case 'hint':
      await recordCiDecision(redis, prefix, f.pull, sha, false);
      await hint(decision.reason);
      return `hint: ${decision.reason}`;
    case 'cap':
      await recordCiDecision(redis, prefix, f.pull, sha, false);
      await replyOnce(redis, prefix, f.client, f.ref, 'ci-fix-cap', ciCapBody(autoFixesSoFar, f.config.ci_fix_attempts));
      return `nothing: ci_fix_attempts (${f.config.ci_fix_attempts}) reached`;
    case 'start': {
      // Counted first: a crash after this leaves the head decided and no fix (at most once, never twice).
      await recordCiDecision(redis, prefix, f.pull, sha, true);
      const queued = await requestFollowupIfIdle(followupDeps(f.deps), f.client, f.target, {
        by: `${(await f.deps.github.appIdentity()).slug}[bot]`,
        instructions: '',
        trigger: 'ci',
        ci: { headSha: sha, auto: true },
        deliveryId: f.evt.deliveryId,
        at: f.evt.receivedAt,
        maxFollowups: f.config.max_followups,
      });
      if (queued !== null) return `automatic CI fix: ${queued}`;
      await uncountAutoFix(redis, prefix, f.pull);
      await hint('busy');
      return 'hint: busy (another follow-up runs or waits)';
    }
  }
}

/**
 * Whether the head is Lilypad's own: the last commit it pushed, or the empty commit `/lilypad ci`
 * put on top of that one. Anything else means a person pushed to the branch.
 */
async function isLilypadsHead(f: PullFacts): Promise<boolean> {
  if (f.evt.headSha === f.lastSha) return true;
  const commit = (await f.client.request('GET /repos/{owner}/{repo}/commits/{ref}', { owner: f.evt.owner, repo: f.evt.repo, ref: f.evt.headSha })).data;
  const own = await f.deps.github.commitAuthor(f.htmlUrl);
  return commit.parents.length === 1 && commit.parents[0]?.sha === f.lastSha && commit.commit.author?.email === own.email && (commit.files ?? []).length === 0;
}

function followupDeps(deps: TriggerDeps): FollowupDeps {
  return { redis: deps.redis, prefix: deps.env.LILYPAD_QUEUE_PREFIX, runs: deps.runs, status: deps.status, cancelBus: deps.cancelBus, runStore: deps.runStore };
}

/**
 * `/lilypad fix-ci [instructions]` by a writer on Lilypad's pull request: a CI fix of the current
 * head, whatever the automatic cap says; it waits its turn behind a running follow-up (or is folded
 * into the next one) like any request. Only `ci_fix: off` refuses it.
 */
export async function ciFixCommand(evt: IssueEventJob, deps: TriggerDeps, client: GitHubClient, target: FollowupPullRef, instructions: string, config: RepoConfig): Promise<string> {
  const ref: IssueRef = { owner: evt.owner, repo: evt.repo, issueNumber: target.pullNumber };
  if (config.ci_fix === 'off') {
    await comment(client, ref, `@${evt.sender.login} CI fixes are turned off in this repository (\`ci_fix: off\` in \`.github/lilypad.yml\`); set \`ci_fix: command\` to use \`/lilypad fix-ci\`.`);
    return 'refused: ci_fix is off';
  }
  const pr = (await client.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: evt.owner, repo: evt.repo, pull_number: target.pullNumber })).data;
  return requestFollowup(followupDeps(deps), client, target, {
    by: evt.sender.login,
    instructions,
    trigger: evt.kind === 'review' ? 'review' : evt.kind === 'review_comment' ? 'review_comment' : 'comment',
    ci: { headSha: pr.head.sha, auto: false },
    ...(evt.commentId !== undefined ? { commentId: evt.commentId } : {}),
    ...(evt.reviewId !== undefined ? { reviewId: evt.reviewId } : {}),
    deliveryId: evt.deliveryId,
    at: evt.receivedAt,
    maxFollowups: config.max_followups,
  });
}
