/**
 * The REST endpoints for what CI leaves on a commit, in GitHub's shapes and with its permissions:
 *
 * - checks: read — `GET /repos/{o}/{r}/commits/{ref}/check-runs` (check_name, status, filter, app_id),
 *   `.../commits/{ref}/check-suites` (app_id, check_name), `.../check-runs/{id}`,
 *   `.../check-runs/{id}/annotations`, `.../check-suites/{id}`, `.../check-suites/{id}/check-runs`
 * - statuses: read — `GET /repos/{o}/{r}/commits/{ref}/status` (combined), `.../commits/{ref}/statuses`
 * - pull_requests: read — `GET /repos/{o}/{r}/commits/{sha}/pulls` (the pull requests of a commit)
 * - actions: read — `GET /repos/{o}/{r}/actions/runs/{run_id}/jobs` (filter), `.../actions/jobs/{id}`,
 *   `.../actions/jobs/{id}/logs`: a 302 to a signed download address valid for one minute, which the
 *   stand-in serves too (serveJobLogDownload; byte ranges honoured, as blob storage does)
 */
import type { IncomingHttpHeaders } from 'node:http';
import * as gitRepo from './git-repo.ts';
import { annotationJson, checkRunJson, checkSuiteJson, ciOf, combinedStatusJson, jobJson, LOG_DOWNLOAD_PREFIX, LOG_URL_TTL_SECONDS, statusJson } from './ci-state.ts';
import type { CheckRunRec, CheckSuiteRec } from './ci-state.ts';
import type { ApiRequest, Params, RepoCtx, RouteKit } from './rest.ts';
import type { RepoRec, StandinState } from './state.ts';

const CHECK_STATUSES = ['queued', 'in_progress', 'completed'];

export function defineCiRoutes(s: StandinState, kit: RouteKit): void {
  const ci = ciOf(s);

  /** The repository (checked for `permission: read`) and the commit `{ref}` names. */
  const commitCtx = (req: ApiRequest, p: Params, permission: string): { ctx: RepoCtx; sha: string } => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [[permission, 'read']]);
    const sha = gitRepo.resolveCommit(ctx.repo.gitDir, p.ref ?? '');
    if (!sha) kit.fail(req, 422, `No commit found for SHA: ${p.ref ?? ''}`);
    return { ctx, sha };
  };
  const runOr404 = (req: ApiRequest, repo: RepoRec, idText: string | undefined): CheckRunRec => {
    const run = ci.runs.get(Number(idText));
    if (!run || run.suite.repo !== repo) kit.fail(req, 404, 'Not Found');
    return run;
  };
  const suiteOr404 = (req: ApiRequest, repo: RepoRec, idText: string | undefined): CheckSuiteRec => {
    const suite = ci.suites.get(Number(idText));
    if (!suite || suite.repo !== repo) kit.fail(req, 404, 'Not Found');
    return suite;
  };
  /** check_name, status, app_id and filter (latest: the newest run of each name per app), as GitHub filters runs. */
  const filterRuns = (req: ApiRequest, runs: CheckRunRec[]): CheckRunRec[] => {
    const name = req.query.get('check_name');
    const status = req.query.get('status');
    const appId = req.query.get('app_id');
    const filter = req.query.get('filter') ?? 'latest';
    if (status !== null && !CHECK_STATUSES.includes(status)) kit.validation(req, [{ resource: 'CheckRun', field: 'status', code: 'invalid' }]);
    if (filter !== 'latest' && filter !== 'all') kit.validation(req, [{ resource: 'CheckRun', field: 'filter', code: 'invalid' }]);
    let out = runs.filter((r) => (name === null || r.name === name) && (status === null || r.status === status) && (appId === null || String(r.suite.app.id) === appId));
    if (filter === 'latest') {
      const seen = new Set<string>();
      out = out.filter((r) => {
        const key = `${r.suite.app.id}\0${r.suite.workflowRun?.name ?? ''}\0${r.name}`;
        return !seen.has(key) && seen.add(key);
      });
    }
    return out;
  };
  const wrapped = <T>(req: ApiRequest, key: string, items: T[]): { status: number; json: unknown; headers: Record<string, string> } => {
    const { page, headers } = kit.paginate(req, items);
    return { status: 200, json: { total_count: items.length, [key]: page }, headers };
  };

  // ---- checks
  kit.add('GET', '/repos/{owner}/{repo}/commits/{ref}/check-runs', 'installation', 'checks=read', 'checks/runs#list-check-runs-for-a-git-reference', (req, p) => {
    const { ctx, sha } = commitCtx(req, p, 'checks');
    return wrapped(req, 'check_runs', filterRuns(req, ci.runsOn(ctx.repo, sha)).map((r) => checkRunJson(s, r)));
  });
  kit.add('GET', '/repos/{owner}/{repo}/commits/{ref}/check-suites', 'installation', 'checks=read', 'checks/suites#list-check-suites-for-a-git-reference', (req, p) => {
    const { ctx, sha } = commitCtx(req, p, 'checks');
    const appId = req.query.get('app_id');
    const name = req.query.get('check_name');
    const suites = ci.suitesOn(ctx.repo, sha).filter((st) => (appId === null || String(st.app.id) === appId) && (name === null || st.runs.some((r) => r.name === name)));
    return wrapped(req, 'check_suites', suites.map((st) => checkSuiteJson(s, st)));
  });
  kit.add('GET', '/repos/{owner}/{repo}/check-runs/{check_run_id}', 'installation', 'checks=read', 'checks/runs#get-a-check-run', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['checks', 'read']]);
    return { status: 200, json: checkRunJson(s, runOr404(req, ctx.repo, p.check_run_id)) };
  });
  kit.add('GET', '/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations', 'installation', 'checks=read', 'checks/runs#list-check-run-annotations', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['checks', 'read']]);
    const run = runOr404(req, ctx.repo, p.check_run_id);
    return kit.list(req, run.annotations.map((a) => annotationJson(s, run, a)));
  });
  kit.add('GET', '/repos/{owner}/{repo}/check-suites/{check_suite_id}', 'installation', 'checks=read', 'checks/suites#get-a-check-suite', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['checks', 'read']]);
    return { status: 200, json: checkSuiteJson(s, suiteOr404(req, ctx.repo, p.check_suite_id)) };
  });
  kit.add('GET', '/repos/{owner}/{repo}/check-suites/{check_suite_id}/check-runs', 'installation', 'checks=read', 'checks/runs#list-check-runs-in-a-check-suite', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['checks', 'read']]);
    const suite = suiteOr404(req, ctx.repo, p.check_suite_id);
    return wrapped(req, 'check_runs', filterRuns(req, [...suite.runs].reverse()).map((r) => checkRunJson(s, r)));
  });

  // ---- the pull requests of a commit (a status event names a commit, not a pull request)
  kit.add('GET', '/repos/{owner}/{repo}/commits/{commit_sha}/pulls', 'installation', 'pull_requests=read', 'commits/commits#list-pull-requests-associated-with-a-commit', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['pull_requests', 'read']]);
    const sha = gitRepo.resolveCommit(ctx.repo.gitDir, p.commit_sha ?? '');
    if (!sha) kit.fail(req, 422, `No commit found for SHA: ${p.commit_sha ?? ''}`);
    // GitHub: the merged pull request that brought the commit into the default branch; a commit not
    // on it gives the open and merged pull requests whose head branch holds it.
    const onDefault = gitRepo.isAncestor(ctx.repo.gitDir, sha, gitRepo.branchSha(ctx.repo.gitDir, ctx.repo.defaultBranch) ?? sha);
    const pulls = [...ctx.repo.issues.values()].filter((i) => {
      if (!i.pull) return false;
      const merged = i.pull.mergedAt !== null && i.pull.mergeCommitSha ? i.pull.mergeCommitSha : null;
      if (onDefault) return merged !== null && gitRepo.isAncestor(ctx.repo.gitDir, sha, merged);
      const tip = gitRepo.branchSha(ctx.repo.gitDir, i.pull.headRef);
      return (i.state === 'open' || merged !== null) && tip !== null && gitRepo.isAncestor(ctx.repo.gitDir, sha, tip);
    });
    return kit.list(req, pulls.map((i) => s.pull(i)));
  });

  // ---- commit statuses
  kit.add('GET', '/repos/{owner}/{repo}/commits/{ref}/status', 'installation', 'statuses=read', 'commits/statuses#get-the-combined-status-for-a-specific-reference', (req, p) => {
    const { ctx, sha } = commitCtx(req, p, 'statuses');
    const combined = combinedStatusJson(s, ctx.repo, sha, ci.statusesOn(ctx.repo, sha));
    const { page, headers } = kit.paginate(req, combined.statuses);
    return { status: 200, json: { ...combined, statuses: page }, headers };
  });
  kit.add('GET', '/repos/{owner}/{repo}/commits/{ref}/statuses', 'installation', 'statuses=read', 'commits/statuses#list-commit-statuses-for-a-reference', (req, p) => {
    const { ctx, sha } = commitCtx(req, p, 'statuses');
    return kit.list(req, ci.statusesOn(ctx.repo, sha).map((st) => statusJson(s, st)));
  });

  // ---- GitHub Actions
  const jobOr404 = (req: ApiRequest, repo: RepoRec, idText: string | undefined): CheckRunRec => {
    const run = ci.runs.get(Number(idText));
    if (!run || run.suite.repo !== repo || !run.suite.workflowRun) kit.fail(req, 404, 'Not Found');
    return run;
  };
  kit.add('GET', '/repos/{owner}/{repo}/actions/runs/{run_id}/jobs', 'installation', 'actions=read', 'actions/workflow-jobs#list-jobs-for-a-workflow-run', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['actions', 'read']]);
    const suite = [...ci.suites.values()].find((st) => st.repo === ctx.repo && String(st.workflowRun?.id) === p.run_id);
    if (!suite) kit.fail(req, 404, 'Not Found');
    const filter = req.query.get('filter') ?? 'latest';
    if (filter !== 'latest' && filter !== 'all') kit.validation(req, [{ resource: 'WorkflowJob', field: 'filter', code: 'invalid' }]);
    return wrapped(req, 'jobs', suite.runs.map((r) => jobJson(s, r)));
  });
  kit.add('GET', '/repos/{owner}/{repo}/actions/jobs/{job_id}', 'installation', 'actions=read', 'actions/workflow-jobs#get-a-job-for-a-workflow-run', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['actions', 'read']]);
    return { status: 200, json: jobJson(s, jobOr404(req, ctx.repo, p.job_id)) };
  });
  kit.add('GET', '/repos/{owner}/{repo}/actions/jobs/{job_id}/logs', 'installation', 'actions=read', 'actions/workflow-jobs#download-job-logs-for-a-workflow-run', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['actions', 'read']]);
    const job = jobOr404(req, ctx.repo, p.job_id);
    // A job's log is archived once it has finished; until then there is nothing to download.
    if (job.status !== 'completed' || job.log === null) kit.fail(req, 404, 'Not Found');
    const expires = Math.floor(Date.now() / 1000) + LOG_URL_TTL_SECONDS;
    const location = `${s.origin}${LOG_DOWNLOAD_PREFIX}${job.id}?se=${expires}&sig=${ci.signLog(job.id, expires)}`;
    return { status: 302, raw: Buffer.alloc(0), contentType: 'text/html;charset=utf-8', headers: { location } };
  });
}

export interface DownloadResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Serves a job log at the address the logs endpoint redirected to: no token (the address is the
 * credential), refused once expired or tampered with; `Range: bytes=a-b | a- | -n` honoured with 206.
 */
export function serveJobLogDownload(s: StandinState, url: URL, headers: IncomingHttpHeaders): DownloadResponse | null {
  if (!url.pathname.startsWith(LOG_DOWNLOAD_PREFIX)) return null;
  const text = (status: number, message: string): DownloadResponse => ({ status, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: Buffer.from(`${message}\n`) });
  const ci = ciOf(s);
  const jobId = Number(url.pathname.slice(LOG_DOWNLOAD_PREFIX.length));
  const expires = Number(url.searchParams.get('se'));
  const sig = url.searchParams.get('sig') ?? '';
  if (!Number.isInteger(jobId) || !Number.isInteger(expires) || !ci.checkLogSignature(jobId, expires, sig)) return text(403, 'AuthenticationFailed: the signature does not match');
  if (expires < Math.floor(Date.now() / 1000)) return text(403, 'AuthenticationFailed: the signed address has expired');
  const log = ci.runs.get(jobId)?.log;
  if (log === null || log === undefined) return text(404, 'BlobNotFound');
  const data = Buffer.from(log, 'utf8');
  const base = { 'content-type': 'text/plain; charset=utf-8', 'accept-ranges': 'bytes' };
  const range = /^bytes=(\d*)-(\d*)$/.exec(String(headers.range ?? '').trim());
  if (!range || (range[1] === '' && range[2] === '')) return { status: 200, headers: base, body: data };
  let start: number;
  let end: number;
  if (range[1] === '') {
    start = Math.max(0, data.length - Number(range[2]));
    end = data.length - 1;
  } else {
    start = Number(range[1]);
    end = range[2] === '' ? data.length - 1 : Math.min(Number(range[2]), data.length - 1);
  }
  if (start >= data.length || start > end) return { status: 416, headers: { ...base, 'content-range': `bytes */${data.length}` }, body: Buffer.alloc(0) };
  return { status: 206, headers: { ...base, 'content-range': `bytes ${start}-${end}/${data.length}` }, body: data.subarray(start, end + 1) };
}
