/**
 * What CI leaves on a commit, as GitHub keeps it: check suites (one per app and commit; for GitHub
 * Actions one per workflow run), check runs with their output and annotations, Actions workflow
 * runs and jobs (a job's id is its check run's id) with their logs, and commit statuses. Kept
 * beside the rest of the stand-in's state (one store per StandinState) and turned into GitHub's
 * REST and webhook shapes by the serialisers at the bottom.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import * as gitRepo from './git-repo.ts';
import { isoNow, nodeId } from './state.ts';
import type { RepoRec, StandinState, UserRec } from './state.ts';
import type {
  ActionsJob,
  CheckAnnotation,
  CheckAnnotationInput,
  CheckApp,
  CheckConclusion,
  CheckRun,
  CheckStatus,
  CheckSuite,
  CombinedStatus,
  CommitStatus,
  CommitStatusState,
  PullRequestMinimal,
} from './types.ts';

/** GitHub Actions' app on github.com (id 15368, owned by the `github` organisation). */
export const ACTIONS_APP_SLUG = 'github-actions';
const ACTIONS_APP_ID = 15368;
/** How long a log download address stays valid (GitHub: one minute). */
export const LOG_URL_TTL_SECONDS = 60;
/** Where the stand-in serves job logs; GitHub redirects to its blob storage instead. */
export const LOG_DOWNLOAD_PREFIX = '/_standin/actions/job-logs/';

export interface CheckAppRec {
  id: number;
  slug: string;
  name: string;
  owner: UserRec;
  createdAt: string;
}

export interface WorkflowRunRec {
  id: number;
  name: string;
  runNumber: number;
}

export interface CheckSuiteRec {
  id: number;
  repo: RepoRec;
  app: CheckAppRec;
  headSha: string;
  /** GitHub's `head_branch`: null for a suite of a fork's branch (the Checks API sees pushes in its own repository only). */
  headBranch: string | null;
  /** The fork (`owner/name`) whose pull request ran this suite on the same commit; null: the repository's own branch. */
  fork: string | null;
  createdAt: string;
  updatedAt: string;
  runs: CheckRunRec[];
  /** GitHub Actions: the workflow run this suite belongs to. */
  workflowRun: WorkflowRunRec | null;
}

export interface CheckRunRec {
  id: number;
  suite: CheckSuiteRec;
  name: string;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  startedAt: string;
  completedAt: string | null;
  title: string | null;
  summary: string | null;
  text: string | null;
  annotations: CheckAnnotationInput[];
  detailsUrl: string | null;
  /** GitHub Actions: the job's log text (timestamped lines), complete once the job is. */
  log: string | null;
  steps: Array<{ name: string; conclusion: CheckConclusion | null; number: number }>;
}

export interface StatusRec {
  id: number;
  repo: RepoRec;
  sha: string;
  state: CommitStatusState;
  context: string;
  description: string | null;
  targetUrl: string | null;
  creator: UserRec;
  createdAt: string;
}

export class CiStore {
  readonly apps = new Map<string, CheckAppRec>();
  readonly suites = new Map<number, CheckSuiteRec>();
  readonly runs = new Map<number, CheckRunRec>();
  readonly statuses: StatusRec[] = [];
  /** Signs log download addresses, as blob storage signs its shared-access URLs. */
  readonly logKey = randomBytes(32);
  private seq = { app: 90000, suite: 8_000_000_000, run: 20_000_000_000, workflowRun: 9_000_000_000, status: 30_000_000_000, runNumber: 0 };

  constructor(private readonly state: StandinState) {}

  /** The app named `slug`: the stand-in's own app, GitHub Actions, or a third-party app made up on first use. */
  app(slug: string): CheckAppRec {
    const existing = this.apps.get(slug.toLowerCase());
    if (existing) return existing;
    const s = this.state;
    const rec: CheckAppRec =
      slug.toLowerCase() === s.appSlug.toLowerCase()
        ? { id: s.appId, slug: s.appSlug, name: s.app().name, owner: s.appOwner, createdAt: s.appCreatedAt }
        : slug === ACTIONS_APP_SLUG
          ? { id: ACTIONS_APP_ID, slug, name: 'GitHub Actions', owner: s.ensureUser('github', 'Organization'), createdAt: '2018-07-30T09:30:17Z' }
          : { id: ++this.seq.app, slug, name: slug, owner: s.ensureUser(`${slug}-owner`, 'Organization'), createdAt: isoNow(new Date(Date.now() - 86_400_000)) };
    this.apps.set(slug.toLowerCase(), rec);
    return rec;
  }

  /**
   * The suite of `app` on `sha`; for GitHub Actions, the suite of workflow `workflow`'s run on `sha`.
   * `origin`: the branch it ran on (default: the branch whose tip is `sha`, an open pull request's
   * first), or the fork whose pull request ran it (then, as on GitHub, no head_branch).
   */
  suiteFor(repo: RepoRec, app: CheckAppRec, sha: string, workflow: string | null, origin: { branch?: string; fork?: string } = {}): CheckSuiteRec {
    const fork = origin.fork ?? null;
    const headBranch = fork !== null ? null : (origin.branch ?? branchAt(repo, sha));
    for (const suite of this.suites.values()) {
      if (suite.repo !== repo || suite.app !== app || suite.headSha !== sha || (suite.workflowRun?.name ?? null) !== workflow) continue;
      if (suite.fork === fork && suite.headBranch === headBranch) return suite;
    }
    const now = isoNow();
    const suite: CheckSuiteRec = {
      id: ++this.seq.suite,
      repo,
      app,
      headSha: sha,
      headBranch,
      fork,
      createdAt: now,
      updatedAt: now,
      runs: [],
      workflowRun: workflow === null ? null : { id: ++this.seq.workflowRun, name: workflow, runNumber: ++this.seq.runNumber },
    };
    this.suites.set(suite.id, suite);
    return suite;
  }

  addRun(suite: CheckSuiteRec, fields: Omit<CheckRunRec, 'id' | 'suite'>): CheckRunRec {
    const run: CheckRunRec = { id: ++this.seq.run, suite, ...fields };
    suite.runs.push(run);
    suite.updatedAt = isoNow();
    this.runs.set(run.id, run);
    return run;
  }

  addStatus(fields: Omit<StatusRec, 'id' | 'createdAt'>): StatusRec {
    const rec: StatusRec = { id: ++this.seq.status, createdAt: isoNow(), ...fields };
    this.statuses.push(rec);
    return rec;
  }

  /** The check runs on `sha` in `repo`, newest first. */
  runsOn(repo: RepoRec, sha: string): CheckRunRec[] {
    return [...this.runs.values()].filter((r) => r.suite.repo === repo && r.suite.headSha === sha).sort((a, b) => b.id - a.id);
  }

  suitesOn(repo: RepoRec, sha: string): CheckSuiteRec[] {
    return [...this.suites.values()].filter((s) => s.repo === repo && s.headSha === sha);
  }

  /** The statuses on `sha`, newest first (as GET .../statuses lists them). */
  statusesOn(repo: RepoRec, sha: string): StatusRec[] {
    return this.statuses.filter((st) => st.repo === repo && st.sha === sha).reverse();
  }

  /** `sig` and `se` (expiry, Unix seconds) for a job's log download address. */
  signLog(jobId: number, expires: number): string {
    return createHmac('sha256', this.logKey).update(`${jobId}:${expires}`).digest('base64url');
  }

  checkLogSignature(jobId: number, expires: number, sig: string): boolean {
    const want = Buffer.from(this.signLog(jobId, expires));
    const got = Buffer.from(sig);
    return want.length === got.length && timingSafeEqual(want, got);
  }
}

const stores = new WeakMap<StandinState, CiStore>();

/** The CI store of a stand-in's state (created on first use). */
export function ciOf(state: StandinState): CiStore {
  let store = stores.get(state);
  if (!store) {
    store = new CiStore(state);
    stores.set(state, store);
  }
  return store;
}

/** A branch whose tip is `sha`, preferring an open pull request's head (GitHub's `head_branch`), else null. */
function branchAt(repo: RepoRec, sha: string): string | null {
  for (const issue of repo.issues.values()) {
    if (issue.pull && issue.state === 'open' && gitRepo.branchSha(repo.gitDir, issue.pull.headRef) === sha) return issue.pull.headRef;
  }
  return gitRepo.listBranches(repo.gitDir).find((b) => gitRepo.branchSha(repo.gitDir, b) === sha) ?? null;
}

/** GitHub's ranking of run conclusions for a suite's conclusion: the first one present wins. */
const SUITE_CONCLUSION_ORDER: readonly CheckConclusion[] = ['action_required', 'cancelled', 'timed_out', 'failure', 'neutral', 'success', 'skipped'];

export function suiteStatus(suite: CheckSuiteRec): { status: CheckStatus; conclusion: CheckConclusion | null } {
  if (suite.runs.length === 0) return { status: 'queued', conclusion: null };
  if (suite.runs.some((r) => r.status !== 'completed')) return { status: suite.runs.some((r) => r.status === 'in_progress') ? 'in_progress' : 'queued', conclusion: null };
  const present = new Set(suite.runs.map((r) => r.conclusion));
  return { status: 'completed', conclusion: SUITE_CONCLUSION_ORDER.find((c) => present.has(c)) ?? 'success' };
}

/** Combined state as GitHub computes it from the latest status of each context. */
export function combinedState(latest: readonly StatusRec[]): 'failure' | 'pending' | 'success' {
  if (latest.some((st) => st.state === 'failure' || st.state === 'error')) return 'failure';
  if (latest.length === 0 || latest.some((st) => st.state === 'pending')) return 'pending';
  return 'success';
}

/** The newest status of each context (input newest first). */
export function latestPerContext(statuses: readonly StatusRec[]): StatusRec[] {
  const seen = new Set<string>();
  return statuses.filter((st) => !seen.has(st.context) && seen.add(st.context));
}

// ---------------------------------------------------------------- serialisers

const repoPath = (r: RepoRec): string => `${r.owner.login}/${r.name}`;

export function checkAppJson(s: StandinState, app: CheckAppRec): CheckApp {
  if (app.id === s.appId) return { ...s.app() };
  const owner = s.user(app.owner);
  const actions = app.slug === ACTIONS_APP_SLUG;
  return {
    id: app.id,
    slug: app.slug,
    node_id: nodeId('App', app.id),
    owner,
    name: app.name,
    description: actions ? 'Automate your workflow from idea to production' : '',
    external_url: actions ? 'https://help.github.com/en/actions' : `${s.origin}/apps/${app.slug}`,
    html_url: `${s.origin}/apps/${app.slug}`,
    created_at: app.createdAt,
    updated_at: app.createdAt,
    permissions: actions ? { actions: 'write', checks: 'write', contents: 'write', metadata: 'read', statuses: 'write' } : { checks: 'write', metadata: 'read', statuses: 'write' },
    events: actions ? ['check_run', 'check_suite', 'pull_request', 'push'] : ['check_run', 'check_suite'],
  };
}

/**
 * GitHub's `pull-request-minimal`: the open pull requests of the suite's repository whose head is
 * the suite's branch (their head may have moved on since). A fork's suite has none: the Checks
 * API does not see branches in other repositories.
 */
export function pullRequestsFor(s: StandinState, suite: CheckSuiteRec): PullRequestMinimal[] {
  const repo = suite.repo;
  if (suite.fork !== null || suite.headBranch === null) return [];
  const api = `${s.apiUrl}/repos/${repoPath(repo)}`;
  const repoRef = { id: repo.id, url: api, name: repo.name };
  const out: PullRequestMinimal[] = [];
  for (const issue of repo.issues.values()) {
    const pull = issue.pull;
    if (!pull || issue.state !== 'open' || pull.headRef !== suite.headBranch) continue;
    out.push({
      url: `${api}/pulls/${issue.number}`,
      id: pull.id,
      number: issue.number,
      head: { ref: pull.headRef, sha: gitRepo.branchSha(repo.gitDir, pull.headRef) ?? suite.headSha, repo: repoRef },
      base: { ref: pull.baseRef, sha: gitRepo.branchSha(repo.gitDir, pull.baseRef) ?? '', repo: repoRef },
    });
  }
  return out;
}

const MINIMAL_REPO_KEYS = [
  'id', 'node_id', 'name', 'full_name', 'private', 'owner', 'html_url', 'description', 'fork', 'url', 'archive_url', 'assignees_url', 'blobs_url',
  'branches_url', 'collaborators_url', 'comments_url', 'commits_url', 'compare_url', 'contents_url', 'contributors_url', 'deployments_url',
  'downloads_url', 'events_url', 'forks_url', 'git_commits_url', 'git_refs_url', 'git_tags_url', 'git_url', 'issue_comment_url',
  'issue_events_url', 'issues_url', 'keys_url', 'labels_url', 'languages_url', 'merges_url', 'milestones_url', 'notifications_url',
  'pulls_url', 'releases_url', 'ssh_url', 'stargazers_url', 'statuses_url', 'subscribers_url', 'subscription_url', 'tags_url', 'teams_url',
  'trees_url', 'hooks_url',
];

/** GitHub's `minimal-repository`. */
export function minimalRepo(s: StandinState, repo: RepoRec): Record<string, unknown> {
  const full = s.repo(repo);
  return Object.fromEntries(MINIMAL_REPO_KEYS.map((k) => [k, full[k] ?? null]));
}

/** GitHub's `check-suite` (REST; the check_suite payload carries it without `repository`). */
export function checkSuiteJson(s: StandinState, suite: CheckSuiteRec): CheckSuite {
  const repo = suite.repo;
  const api = `${s.apiUrl}/repos/${repoPath(repo)}`;
  const info = gitRepo.commitInfo(repo.gitDir, suite.headSha);
  const { status, conclusion } = suiteStatus(suite);
  return {
    id: suite.id,
    node_id: nodeId('CheckSuite', suite.id),
    head_branch: suite.headBranch,
    head_sha: suite.headSha,
    status,
    conclusion,
    url: `${api}/check-suites/${suite.id}`,
    before: info?.parents[0] ?? null,
    after: suite.headSha,
    pull_requests: pullRequestsFor(s, suite),
    app: checkAppJson(s, suite.app),
    repository: minimalRepo(s, repo),
    created_at: suite.createdAt,
    updated_at: suite.updatedAt,
    head_commit: {
      id: suite.headSha,
      tree_id: info?.tree ?? '',
      message: info?.message ?? '',
      timestamp: info?.committerDate ?? suite.createdAt,
      author: { name: info?.authorName ?? '', email: info?.authorEmail ?? '' },
      committer: { name: info?.committerName ?? '', email: info?.committerEmail ?? '' },
    },
    latest_check_runs_count: suite.runs.length,
    check_runs_url: `${api}/check-suites/${suite.id}/check-runs`,
    rerequestable: true,
    runs_rerequestable: true,
  };
}

/** Where a check run's page is: an Actions job's page, or the Checks tab. */
function runHtmlUrl(s: StandinState, run: CheckRunRec): string {
  const full = repoPath(run.suite.repo);
  const wr = run.suite.workflowRun;
  return wr ? `${s.origin}/${full}/actions/runs/${wr.id}/job/${run.id}` : `${s.origin}/${full}/runs/${run.id}`;
}

/**
 * GitHub's `check-run`: over REST `check_suite` is `{ id }`; in webhook payloads it is the whole
 * suite (without `repository` and `head_commit`, as GitHub sends it).
 */
export function checkRunJson(s: StandinState, run: CheckRunRec, webhook = false): CheckRun {
  const repo = run.suite.repo;
  const api = `${s.apiUrl}/repos/${repoPath(repo)}`;
  let suite: CheckRun['check_suite'] = { id: run.suite.id };
  if (webhook) {
    const { repository: _r, head_commit: _h, latest_check_runs_count: _l, check_runs_url: _c, rerequestable: _x, runs_rerequestable: _y, ...rest } = checkSuiteJson(s, run.suite);
    suite = rest;
  }
  return {
    id: run.id,
    head_sha: run.suite.headSha,
    node_id: nodeId('CheckRun', run.id),
    external_id: '',
    url: `${api}/check-runs/${run.id}`,
    html_url: runHtmlUrl(s, run),
    details_url: run.detailsUrl ?? runHtmlUrl(s, run),
    status: run.status,
    conclusion: run.conclusion,
    started_at: run.startedAt,
    completed_at: run.completedAt,
    output: {
      title: run.title,
      summary: run.summary,
      text: run.text,
      annotations_count: run.annotations.length,
      annotations_url: `${api}/check-runs/${run.id}/annotations`,
    },
    name: run.name,
    check_suite: suite,
    app: checkAppJson(s, run.suite.app),
    pull_requests: pullRequestsFor(s, run.suite),
  };
}

export function annotationJson(s: StandinState, run: CheckRunRec, a: CheckAnnotationInput): CheckAnnotation {
  return {
    path: a.path,
    start_line: a.start_line,
    end_line: a.end_line ?? a.start_line,
    start_column: a.start_column ?? null,
    end_column: a.end_column ?? null,
    annotation_level: a.annotation_level,
    title: a.title ?? null,
    message: a.message,
    raw_details: a.raw_details ?? null,
    blob_href: `${s.origin}/${repoPath(run.suite.repo)}/blob/${run.suite.headSha}/${a.path}`,
  };
}

/** GitHub's `job` (Actions): its id is the check run's id. */
export function jobJson(s: StandinState, run: CheckRunRec): ActionsJob {
  const wr = run.suite.workflowRun;
  if (!wr) throw new Error(`check run ${run.id} is not a GitHub Actions job`);
  const api = `${s.apiUrl}/repos/${repoPath(run.suite.repo)}`;
  return {
    id: run.id,
    run_id: wr.id,
    run_url: `${api}/actions/runs/${wr.id}`,
    run_attempt: 1,
    node_id: nodeId('CheckRun', run.id),
    head_sha: run.suite.headSha,
    url: `${api}/actions/jobs/${run.id}`,
    html_url: runHtmlUrl(s, run),
    status: run.status,
    conclusion: run.conclusion,
    created_at: run.startedAt,
    started_at: run.startedAt,
    completed_at: run.completedAt,
    name: run.name,
    steps: run.steps.map((st) => ({
      name: st.name,
      status: run.status === 'completed' ? 'completed' : 'in_progress',
      conclusion: st.conclusion,
      number: st.number,
      started_at: run.startedAt,
      completed_at: run.completedAt,
    })),
    check_run_url: `${api}/check-runs/${run.id}`,
    labels: ['ubuntu-latest'],
    runner_id: 1,
    runner_name: 'GitHub Actions 1',
    runner_group_id: 1,
    runner_group_name: 'GitHub Actions',
    workflow_name: wr.name,
    head_branch: run.suite.headBranch,
  };
}

/** GitHub's `status` (GET .../statuses, with `creator`); `simple` drops `creator` as the combined status does. */
export function statusJson(s: StandinState, st: StatusRec, simple = false): CommitStatus {
  const full = repoPath(st.repo);
  const json: CommitStatus = {
    url: `${s.apiUrl}/repos/${full}/statuses/${st.sha}`,
    avatar_url: s.user(st.creator).avatar_url,
    id: st.id,
    node_id: nodeId('StatusContext', st.id),
    state: st.state,
    description: st.description,
    target_url: st.targetUrl,
    context: st.context,
    created_at: st.createdAt,
    updated_at: st.createdAt,
  };
  if (!simple) json.creator = s.user(st.creator);
  return json;
}

export function combinedStatusJson(s: StandinState, repo: RepoRec, sha: string, statuses: readonly StatusRec[]): CombinedStatus {
  const latest = latestPerContext(statuses);
  const api = `${s.apiUrl}/repos/${repoPath(repo)}`;
  return {
    state: combinedState(latest),
    statuses: latest.map((st) => statusJson(s, st, true)),
    sha,
    total_count: latest.length,
    repository: minimalRepo(s, repo),
    commit_url: `${api}/commits/${sha}`,
    url: `${api}/commits/${sha}/status`,
  };
}

/** A log line as the Actions runner writes it: an ISO time with seven fractional digits, a space, the text. */
export function stampLogLines(lines: readonly string[], start: Date): string {
  const stamped = lines.map((line, i) => {
    const t = new Date(start.getTime() + i * 7).toISOString().replace(/\.(\d{3})Z$/, (_m, ms: string) => `.${ms}${String(i % 10000).padStart(4, '0')}Z`);
    return `${t} ${line}`;
  });
  // The runner's log files start with a UTF-8 byte order mark.
  return `\uFEFF${stamped.join('\n')}\n`;
}
