/**
 * The GitHub stand-in's CI surface through real clients (@octokit/rest, @octokit/auth-app, fetch):
 * check runs, suites and annotations, commit statuses, GitHub Actions jobs and their logs (302 to a
 * signed download address), the permissions each needs, and the check_run / check_suite / status
 * webhooks, delivered to a real HTTP server and checked with @octokit/webhooks-methods.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { request as octokitRequest } from '@octokit/request';
import { RequestError } from '@octokit/request-error';
import { Octokit } from '@octokit/rest';
import { verify } from '@octokit/webhooks-methods';
import { startGitHubStandin, webhookExample } from '../support/github-standin/index.ts';
import type { GitHubStandin } from '../support/github-standin/index.ts';

const SECRET = 'standin-ci-secret';
const PERMISSIONS = { metadata: 'read', contents: 'write', issues: 'write', pull_requests: 'write', checks: 'read', actions: 'read', statuses: 'read' } as const;

let gh: GitHubStandin;
let installationId: number;
let app: Octokit;
let head: string;
let pr: number;
let hooks: Server;
let hookUrl: string;
const received: Array<{ headers: IncomingHttpHeaders; body: string }> = [];

async function mint(permissions?: Record<string, string>): Promise<string> {
  const auth = createAppAuth({ appId: gh.appId, privateKey: gh.privateKeyPem, request: octokitRequest.defaults({ baseUrl: gh.apiUrl }) });
  return (await auth({ type: 'installation', installationId, ...(permissions ? { permissions } : {}) })).token;
}

function client(token: string): Octokit {
  return new Octokit({ baseUrl: gh.apiUrl, auth: token, log: { debug() {}, info() {}, warn() {}, error() {} } });
}

async function rejects(promise: Promise<unknown>, status: number): Promise<RequestError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof RequestError, `expected a RequestError, got ${String(err)}`);
    assert.equal(err.status, status, `expected ${status}, got ${err.status}: ${err.message}`);
    return err;
  }
  assert.fail(`expected HTTP ${status}, the request succeeded`);
}

/** Top-level keys; `organization` only comes with organisation-owned repositories (the examples are a user's). */
const payloadKeys = (p: object): string[] => Object.keys(p).filter((k) => k !== 'organization').sort();
const keysOf = (v: unknown): string[] => Object.keys(v as object).sort();

before(async () => {
  gh = await startGitHubStandin({ webhookSecret: SECRET, appSlug: 'lilypad', permissions: { ...PERMISSIONS } });
  installationId = gh.createInstallation({ login: 'acme', type: 'Organization' }).id;
  gh.createRepo('acme', 'calc', { files: { 'calc.py': 'def add(a, b):\n    return a - b\n', 'README.md': '# calc\n' } });
  head = gh.createBranch('acme', 'calc', 'lilypad/issue-1', { 'calc.py': 'def add(a, b):\n    return a + b\n' }, { author: 'lilypad[bot]' });
  pr = gh.createPullRequest('acme', 'calc', { head: 'lilypad/issue-1', title: 'Fix add', author: 'lilypad[bot]' }).number;
  app = client(await mint());
  hooks = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.1', resolve));
  hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hooks`;
});

after(async () => {
  await gh.close();
  await new Promise<void>((resolve) => hooks.close(() => resolve()));
});

describe('a failing GitHub Actions job', () => {
  let jobId: number;
  let runId: number;

  test('its check run, suite and annotations over REST, in GitHub’s shapes', async () => {
    const made = await gh.addCheckRun('acme', 'calc', {
      ref: 'lilypad/issue-1',
      name: 'test (3.12)',
      conclusion: 'failure',
      annotations: [{ path: 'calc.py', start_line: 2, annotation_level: 'failure', message: 'AssertionError: 5 != -1', title: 'test_add' }],
      log: ['##[group]Run python -m unittest', 'python -m unittest', '##[endgroup]', 'FAIL: test_add (test_calc.AddTest)', 'AssertionError: 5 != -1'],
      workflow: 'CI',
    });
    assert.ok(made.jobId !== null && made.runId !== null);
    jobId = made.jobId;
    runId = made.runId;
    assert.equal(made.checkRun.id, jobId, 'an Actions job’s id is its check run’s id');

    const list = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: head });
    assert.equal(list.data.total_count, 1);
    const run = list.data.check_runs[0];
    assert.ok(run);
    assert.equal(run.id, jobId);
    assert.equal(run.name, 'test (3.12)');
    assert.equal(run.status, 'completed');
    assert.equal(run.conclusion, 'failure');
    assert.equal(run.head_sha, head);
    assert.equal(run.app?.slug, 'github-actions');
    assert.equal(run.app?.owner && 'login' in run.app.owner ? run.app.owner.login : null, 'github');
    assert.equal(run.output.annotations_count, 2, 'the given annotation and the runner’s exit-code annotation');
    assert.equal(run.check_suite?.id, made.checkSuite.id);
    assert.match(run.details_url ?? '', new RegExp(`/acme/calc/actions/runs/${runId}/job/${jobId}$`));
    assert.deepEqual(run.pull_requests.map((p) => p.number), [pr]);
    // The field set of GitHub's check-run schema.
    assert.deepEqual(keysOf(run), ['app', 'check_suite', 'completed_at', 'conclusion', 'details_url', 'external_id', 'head_sha', 'html_url', 'id', 'name', 'node_id', 'output', 'pull_requests', 'started_at', 'status', 'url']);

    // The same through a branch name, and through GET /check-runs/{id}.
    const byBranch = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: 'lilypad/issue-1' });
    assert.equal(byBranch.data.check_runs[0]?.id, jobId);
    const one = await app.request('GET /repos/{owner}/{repo}/check-runs/{check_run_id}', { owner: 'acme', repo: 'calc', check_run_id: jobId });
    assert.equal(one.data.name, 'test (3.12)');

    const annotations = await app.request('GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations', { owner: 'acme', repo: 'calc', check_run_id: jobId });
    assert.deepEqual(
      annotations.data.map((a) => [a.path, a.start_line, a.end_line, a.annotation_level, a.message]),
      [
        ['calc.py', 2, 2, 'failure', 'AssertionError: 5 != -1'],
        ['.github', 1, 1, 'failure', 'Process completed with exit code 1.'],
      ],
    );
    assert.equal(annotations.data[0]?.title, 'test_add');
    assert.match(annotations.data[0]?.blob_href ?? '', new RegExp(`/acme/calc/blob/${head}/calc.py$`));

    const suites = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-suites', { owner: 'acme', repo: 'calc', ref: head });
    assert.equal(suites.data.total_count, 1);
    const suite = suites.data.check_suites[0];
    assert.equal(suite?.app?.slug, 'github-actions');
    assert.equal(suite?.status, 'completed');
    assert.equal(suite?.conclusion, 'failure');
    assert.equal(suite?.head_branch, 'lilypad/issue-1');
    assert.equal(suite?.latest_check_runs_count, 1);
  });

  test('its job in the workflow run’s job list, and GET /actions/jobs/{id}', async () => {
    const jobs = await app.request('GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs', { owner: 'acme', repo: 'calc', run_id: runId });
    assert.equal(jobs.data.total_count, 1);
    const job = jobs.data.jobs[0];
    assert.equal(job?.id, jobId);
    assert.equal(job?.run_id, runId);
    assert.equal(job?.workflow_name, 'CI');
    assert.equal(job?.conclusion, 'failure');
    assert.match(job?.check_run_url ?? '', new RegExp(`/check-runs/${jobId}$`));
    const one = await app.request('GET /repos/{owner}/{repo}/actions/jobs/{job_id}', { owner: 'acme', repo: 'calc', job_id: jobId });
    assert.equal(one.data.name, 'test (3.12)');
  });

  test('its log: a 302 to a signed address that serves timestamped text without a token, and byte ranges', async () => {
    const res = await app.request('GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs', { owner: 'acme', repo: 'calc', job_id: jobId, request: { redirect: 'manual' } });
    assert.equal(res.status, 302);
    const location = res.headers.location;
    assert.ok(location, 'a Location header');
    assert.match(location, /\?se=\d+&sig=/);

    const plain = await fetch(location);
    assert.equal(plain.status, 200);
    // Read as bytes: fetch's text() drops a leading byte order mark.
    const text = Buffer.from(await plain.arrayBuffer()).toString('utf8');
    assert.ok(text.startsWith('\uFEFF'), 'the runner’s byte order mark');
    const lines = text.slice(1).trimEnd().split('\n');
    for (const line of lines) assert.match(line, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z /);
    assert.deepEqual(
      lines.map((l) => l.replace(/^\S+ /, '')),
      ['##[group]Run python -m unittest', 'python -m unittest', '##[endgroup]', 'FAIL: test_add (test_calc.AddTest)', 'AssertionError: 5 != -1', '##[error]Process completed with exit code 1.', 'Cleaning up orphan processes'],
    );
    assert.equal(gh.jobLog(jobId), text);
    const download = gh.requests.filter((r) => r.kind === 'download').at(-1);
    assert.equal(download?.token, null);
    assert.equal(download?.headers.authorization, undefined, 'fetch sends no token to the download address');

    const tail = await fetch(location, { headers: { range: 'bytes=-40' } });
    assert.equal(tail.status, 206);
    const total = Buffer.byteLength(text);
    assert.equal(tail.headers.get('content-range'), `bytes ${total - 40}-${total - 1}/${total}`);
    assert.equal(await tail.text(), Buffer.from(text).subarray(total - 40).toString());

    // Octokit following the redirect gets the text too (as a client without redirect: 'manual' does).
    const followed = await app.request('GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs', { owner: 'acme', repo: 'calc', job_id: jobId });
    assert.equal(followed.status, 200);
    assert.equal(followed.data, text.slice(1));

    const tampered = await fetch(location.replace(/sig=[^&]+/, 'sig=AAAA'));
    assert.equal(tampered.status, 403);
    const expired = new URL(location);
    expired.searchParams.set('se', String(Math.floor(Date.now() / 1000) - 5));
    assert.equal((await fetch(expired)).status, 403, 'a changed expiry breaks the signature');
  });

  test('check_run created and completed, then check_suite completed: delivered signed, in the examples’ shapes', async () => {
    received.length = 0;
    const made = await gh.addCheckRun('acme', 'calc', { ref: head, name: 'lint', conclusion: 'failure', log: ['ruff check .', 'calc.py:2:5: F821 undefined name'], workflow: 'Lint', deliverTo: hookUrl });
    assert.deepEqual(made.webhooks.map((w) => `${w.event}.${String(w.payload.action)}`), ['check_run.created', 'check_run.completed', 'check_suite.completed']);
    assert.deepEqual(made.deliveries.map((d) => d.status), [200, 200, 200]);
    assert.equal(received.length, 3);
    for (const [i, r] of received.entries()) {
      assert.equal(r.headers['x-github-event'], made.webhooks[i]?.event);
      assert.ok(await verify(SECRET, r.body, String(r.headers['x-hub-signature-256'])), 'signed with the webhook secret');
    }
    const [created, completed, suiteDone] = made.webhooks.map((w) => w.payload);
    assert.deepEqual(payloadKeys(completed ?? {}), payloadKeys(webhookExample('check_run', 'completed') ?? {}));
    assert.deepEqual(payloadKeys(suiteDone ?? {}), payloadKeys(webhookExample('check_suite', 'completed') ?? {}));
    const createdRun = created?.check_run as Record<string, unknown>;
    assert.equal(createdRun.status, 'in_progress');
    assert.equal(createdRun.conclusion, null);
    const run = completed?.check_run as Record<string, unknown>;
    assert.equal(run.conclusion, 'failure');
    assert.equal((run.app as { slug: string }).slug, 'github-actions');
    // In a payload the check run carries its whole suite, with the app and the pull requests.
    const exampleSuiteKeys = keysOf((webhookExample('check_run', 'completed')?.check_run as Record<string, unknown>).check_suite);
    for (const key of exampleSuiteKeys) assert.ok(key in (run.check_suite as object), `check_run.check_suite.${key}`);
    assert.deepEqual((run.check_suite as { pull_requests: Array<{ number: number }> }).pull_requests.map((p) => p.number), [pr]);
    const suite = suiteDone?.check_suite as Record<string, unknown>;
    assert.equal(suite.conclusion, 'failure');
    assert.equal(suite.head_sha, head);
    assert.deepEqual((suite.pull_requests as Array<{ number: number }>).map((p) => p.number), [pr]);
    assert.equal((suiteDone?.installation as { id: number }).id, installationId);
  });
});

describe('check runs of other apps, re-runs and runs in progress', () => {
  test('a third-party app’s check and Lilypad’s own: their app slugs; no job log for them', async () => {
    const other = await gh.addCheckRun('acme', 'calc', { ref: head, name: 'coverage', app: 'codecov', conclusion: 'failure', title: 'Coverage dropped', summary: '61% (-3%)' });
    const own = await gh.addCheckRun('acme', 'calc', { ref: head, name: 'Lilypad', app: 'lilypad', conclusion: 'neutral' });
    assert.equal(other.jobId, null);
    assert.equal(other.checkRun.app.slug, 'codecov');
    assert.equal(other.checkRun.output.title, 'Coverage dropped');
    assert.equal(own.checkRun.app.slug, 'lilypad');
    assert.equal(own.checkRun.app.id, gh.appId);
    await rejects(app.request('GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs', { owner: 'acme', repo: 'calc', job_id: other.checkRun.id }), 404);
    await assert.rejects(gh.addCheckRun('acme', 'calc', { ref: head, name: 'x', app: 'codecov', log: ['no'] }), /only GitHub Actions/);
    const codecov = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: head, app_id: other.checkRun.app.id });
    assert.deepEqual(codecov.data.check_runs.map((r) => r.name), ['coverage']);
  });

  test('filter=latest shows only the newest run of a name; filter=all every run', async () => {
    const sha = gh.createBranch('acme', 'calc', 'rerun', { 'x.txt': '1\n' });
    await gh.addCheckRun('acme', 'calc', { ref: sha, name: 'build', conclusion: 'failure', log: ['boom'] });
    const second = await gh.addCheckRun('acme', 'calc', { ref: sha, name: 'build', conclusion: 'success', log: ['ok'] });
    const latest = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: sha });
    assert.deepEqual(latest.data.check_runs.map((r) => [r.id, r.conclusion]), [[second.checkRun.id, 'success']]);
    const all = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: sha, filter: 'all' });
    assert.deepEqual(all.data.check_runs.map((r) => r.conclusion), ['success', 'failure']);
    const failing = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: sha, filter: 'all', check_name: 'build', per_page: 1, page: 2 });
    assert.deepEqual(failing.data.check_runs.map((r) => r.conclusion), ['failure']);
    assert.equal(failing.data.total_count, 2);
  });

  test('a run in progress has no conclusion and no log to download; completing it sends completed and the suite', async () => {
    const sha = gh.createBranch('acme', 'calc', 'slow', { 'y.txt': '1\n' });
    const started = await gh.addCheckRun('acme', 'calc', { ref: sha, name: 'e2e', status: 'in_progress', log: ['starting'] });
    assert.equal(started.checkRun.conclusion, null);
    assert.deepEqual(started.webhooks.map((w) => `${w.event}.${String(w.payload.action)}`), ['check_run.created']);
    await rejects(app.request('GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs', { owner: 'acme', repo: 'calc', job_id: started.checkRun.id }), 404);
    const running = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: sha, status: 'in_progress' });
    assert.equal(running.data.total_count, 1);
    const done = await gh.completeCheckRun('acme', 'calc', started.checkRun.id, { conclusion: 'timed_out', log: ['still waiting'] });
    assert.deepEqual(done.webhooks.map((w) => `${w.event}.${String(w.payload.action)}`), ['check_run.completed', 'check_suite.completed']);
    assert.equal(done.checkRun.conclusion, 'timed_out');
    assert.equal(done.checkSuite.conclusion, 'timed_out');
    const log = gh.jobLog(started.checkRun.id) ?? '';
    assert.deepEqual(log.replace(/^\uFEFF/, '').split('\n').filter(Boolean).map((l) => l.replace(/^\S+ /, '')), ['starting', 'still waiting', '##[error]Process completed with exit code 1.', 'Cleaning up orphan processes']);
    assert.equal((log.match(/\uFEFF/g) ?? []).length, 1, 'one byte order mark, at the start');
  });

  test('an unknown ref answers 422, an unknown check run 404', async () => {
    await rejects(app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: 'no-such-branch' }), 422);
    await rejects(app.request('GET /repos/{owner}/{repo}/check-runs/{check_run_id}', { owner: 'acme', repo: 'calc', check_run_id: 1 }), 404);
  });
});

describe('suites on the same commit from elsewhere', () => {
  test('a fork’s pull request: no head_branch and no pull requests; another branch: its own name and not the pull request', async () => {
    const sha = gh.createBranch('acme', 'calc', 'lilypad/issue-9', { 'NOTES.md': 'nine\n' }, { author: 'lilypad[bot]' });
    const nine = gh.createPullRequest('acme', 'calc', { head: 'lilypad/issue-9', title: 'Nine', author: 'lilypad[bot]' }).number;
    gh.createRepo('mallory', 'calc', { files: { 'README.md': '# fork\n' } });
    const own = await gh.addCheckRun('acme', 'calc', { ref: sha, name: 'test', conclusion: 'success', workflow: 'Nine' });
    const fork = await gh.addCheckRun('acme', 'calc', { ref: sha, name: 'test', conclusion: 'failure', workflow: 'Nine', fromFork: 'mallory/calc', log: ['forked'], sender: 'mallory', deliverTo: hookUrl });
    const other = await gh.addCheckRun('acme', 'calc', { ref: sha, name: 'test', conclusion: 'failure', workflow: 'Nine', headBranch: 'copy-of-nine' });
    assert.deepEqual(own.checkSuite.pull_requests.map((p) => p.number), [nine]);
    assert.equal(own.checkSuite.head_branch, 'lilypad/issue-9');
    assert.equal(fork.checkSuite.head_branch, null);
    assert.deepEqual(fork.checkSuite.pull_requests, []);
    assert.deepEqual(fork.checkRun.pull_requests, []);
    assert.equal(other.checkSuite.head_branch, 'copy-of-nine');
    assert.deepEqual(other.checkSuite.pull_requests, []);
    assert.equal(new Set([own.checkSuite.id, fork.checkSuite.id, other.checkSuite.id]).size, 3, 'three suites');

    const suites = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-suites', { owner: 'acme', repo: 'calc', ref: sha });
    assert.deepEqual(suites.data.check_suites.map((st) => `${st.head_branch ?? '(null)'}: ${st.pull_requests?.length ?? 0}`).sort(), ['(null): 0', 'copy-of-nine: 0', 'lilypad/issue-9: 1']);
    const runs = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: sha, filter: 'all' });
    assert.equal(runs.data.total_count, 3, 'the commit’s check runs list every suite’s');
    // The webhooks say the same: check_run's check_suite and the check_suite event.
    const delivered = fork.deliveries.length;
    assert.equal(delivered, 3);
    const bodies = received.slice(-3).map((r) => JSON.parse(r.body) as { check_run?: { check_suite: { head_branch: unknown; pull_requests: unknown[] } }; check_suite?: { head_branch: unknown; pull_requests: unknown[] } });
    for (const b of bodies) {
      const suite = b.check_run?.check_suite ?? b.check_suite;
      assert.equal(suite?.head_branch, null);
      assert.deepEqual(suite?.pull_requests, []);
    }
  });
});

describe('commit statuses', () => {
  test('the combined status takes the newest of each context; the list has every status with its creator', async () => {
    const sha = gh.createBranch('acme', 'calc', 'statuses', { 'z.txt': '1\n' });
    await gh.addCommitStatus('acme', 'calc', { ref: sha, context: 'ci/jenkins', state: 'pending', description: 'Build started', creator: 'jenkins-bot' });
    const failed = await gh.addCommitStatus('acme', 'calc', { ref: sha, context: 'ci/jenkins', state: 'failure', description: 'Build #12 failed: 3 tests', targetUrl: 'http://127.0.0.1:1/job/12', creator: 'jenkins-bot', deliverTo: hookUrl });
    await gh.addCommitStatus('acme', 'calc', { ref: sha, context: 'docs', state: 'success' });

    const combined = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/status', { owner: 'acme', repo: 'calc', ref: sha });
    assert.equal(combined.data.state, 'failure');
    assert.equal(combined.data.total_count, 2);
    assert.deepEqual(combined.data.statuses.map((st) => [st.context, st.state]).sort(), [['ci/jenkins', 'failure'], ['docs', 'success']]);
    assert.equal(combined.data.sha, sha);
    assert.ok(!('creator' in (combined.data.statuses[0] ?? {})), 'the combined status lists simple statuses');

    const list = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/statuses', { owner: 'acme', repo: 'calc', ref: sha });
    assert.deepEqual(list.data.map((st) => [st.context, st.state]), [['docs', 'success'], ['ci/jenkins', 'failure'], ['ci/jenkins', 'pending']]);
    assert.equal(list.data[1]?.creator?.login, 'jenkins-bot');
    assert.equal(list.data[1]?.target_url, 'http://127.0.0.1:1/job/12');

    const payload = failed.webhooks[0]?.payload ?? {};
    assert.equal(failed.webhooks[0]?.event, 'status');
    assert.deepEqual(payloadKeys(payload), payloadKeys(webhookExample('status', undefined) ?? {}));
    assert.equal(payload.state, 'failure');
    assert.equal(payload.sha, sha);
    assert.equal(payload.context, 'ci/jenkins');
    assert.deepEqual((payload.branches as Array<{ name: string }>).map((b) => b.name), ['statuses']);
    assert.equal((payload.sender as { login: string }).login, 'jenkins-bot');
    assert.ok(!('action' in payload), 'status payloads have no action');
    assert.equal(failed.deliveries[0]?.status, 200);

    await assert.rejects(gh.addCommitStatus('acme', 'calc', { ref: sha, state: 'error', description: 'x'.repeat(141) }), /at most 140/);
    const none = await app.request('GET /repos/{owner}/{repo}/commits/{ref}/status', { owner: 'acme', repo: 'calc', ref: 'main' });
    assert.equal(none.data.state, 'pending', 'no statuses: pending, as on GitHub');
    assert.equal(none.data.total_count, 0);
  });
});

describe('permissions', () => {
  test('checks, statuses and Actions endpoints each need their read permission', async () => {
    const noCi = client(await mint({ contents: 'read', pull_requests: 'read' }));
    const cases: Array<[Promise<unknown>, string]> = [
      [noCi.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: head }), 'checks=read'],
      [noCi.request('GET /repos/{owner}/{repo}/commits/{ref}/check-suites', { owner: 'acme', repo: 'calc', ref: head }), 'checks=read'],
      [noCi.request('GET /repos/{owner}/{repo}/commits/{ref}/status', { owner: 'acme', repo: 'calc', ref: head }), 'statuses=read'],
      [noCi.request('GET /repos/{owner}/{repo}/commits/{ref}/statuses', { owner: 'acme', repo: 'calc', ref: head }), 'statuses=read'],
      [noCi.request('GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs', { owner: 'acme', repo: 'calc', job_id: 1 }), 'actions=read'],
    ];
    for (const [call, accepted] of cases) {
      const err = await rejects(call, 403);
      assert.equal(err.response?.headers['x-accepted-github-permissions'], accepted);
      assert.match(String((err.response?.data as { message?: string }).message), /Resource not accessible by integration/);
    }
    const checksOnly = client(await mint({ checks: 'read' }));
    const ok = await checksOnly.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', { owner: 'acme', repo: 'calc', ref: head });
    assert.ok(ok.data.total_count > 0);
  });

  test('an app without the CI permissions cannot ask for them', async () => {
    const bare = await startGitHubStandin({ appSlug: 'lilypad' });
    try {
      const inst = bare.createInstallation({ login: 'acme', type: 'Organization' }).id;
      const auth = createAppAuth({ appId: bare.appId, privateKey: bare.privateKeyPem, request: octokitRequest.defaults({ baseUrl: bare.apiUrl }) });
      await assert.rejects(auth({ type: 'installation', installationId: inst, permissions: { checks: 'read' } }), /not granted/);
    } finally {
      await bare.close();
    }
  });
});
