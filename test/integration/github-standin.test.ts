/**
 * The GitHub Enterprise Server stand-in, exercised through the real clients: @octokit/rest,
 * @octokit/auth-app (JWT + installation tokens), Probot's config plugin and a Probot app booted with
 * GHE_HOST/GHE_PROTOCOL, real `git clone`/`git push` over HTTP, and webhook signatures checked
 * with @octokit/webhooks-methods.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { request as octokitRequest } from '@octokit/request';
import { RequestError } from '@octokit/request-error';
import { Octokit } from '@octokit/rest';
import { verify } from '@octokit/webhooks-methods';
import { createNodeMiddleware, createProbot, ProbotOctokit } from 'probot';
import type { Probot } from 'probot';
import { signAppJwt, startGitHubStandin, webhookExample } from '../support/github-standin/index.ts';
import type { GitHubStandin, IssueEvent } from '../support/github-standin/index.ts';
import { waitFor } from '../support/poll.ts';

const SECRET = 'standin-webhook-secret';
const APP_ID = 4242;

let gh: GitHubStandin;
let acmeInstallation: number;
let otherInstallation: number;
const tmpDirs: string[] = [];

function tmpDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  tmpDirs.push(dir);
  return dir;
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs git with no user/system config, no prompts and no credential helpers. */
function git(args: string[], cwd?: string): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      'git',
      ['-c', 'credential.helper=', '-c', 'user.name=Test', '-c', 'user.email=test@localhost', '-c', 'init.defaultBranch=main', ...args],
      {
        cwd,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir(), GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '', LC_ALL: 'C' },
        timeout: 30_000,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

function authHeader(token: string): string[] {
  return ['-c', `http.extraHeader=Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`];
}

async function mustGit(args: string[], cwd?: string): Promise<string> {
  const r = await git(args, cwd);
  assert.equal(r.code, 0, `git ${args.join(' ')} failed:\n${r.stderr}`);
  return r.stdout;
}

/** An installation token minted through @octokit/auth-app (POST /app/installations/{id}/access_tokens). */
async function mint(installationId: number, opts: { repositoryNames?: string[]; permissions?: Record<string, string> } = {}): Promise<string> {
  const auth = createAppAuth({ appId: gh.appId, privateKey: gh.privateKeyPem, request: octokitRequest.defaults({ baseUrl: gh.apiUrl }) });
  const result = await auth({ type: 'installation', installationId, ...opts });
  return result.token;
}

function tokenClient(token: string): Octokit {
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

function errorBody(err: RequestError): Record<string, unknown> {
  const data = err.response?.data;
  assert.ok(typeof data === 'object' && data !== null && !Array.isArray(data), 'error body is a JSON object');
  return data as Record<string, unknown>;
}

before(async () => {
  gh = await startGitHubStandin({ webhookSecret: SECRET, appId: APP_ID, appSlug: 'lilypad' });
  acmeInstallation = gh.createInstallation({ login: 'acme', type: 'Organization' }).id;
  otherInstallation = gh.createInstallation({ login: 'octo-user' }).id;
  gh.createRepo('acme', 'widgets', { files: { 'README.md': '# widgets\n', 'src/app.py': 'print("hello")\n', 'src/util.py': 'X = 1\n' } });
  gh.createRepo('acme', 'gadgets', { files: { 'README.md': '# gadgets\n' } });
  gh.createRepo('acme', '.github', { files: { '.github/lilypad.yml': 'label: lilypad\nmax_steps: 40\n' } });
  gh.createRepo('octo-user', 'personal', { files: { 'README.md': '# personal\n' } });
  gh.addCollaborator('acme', 'widgets', 'alice', 'write');
  gh.addCollaborator('acme', 'widgets', 'mona', 'maintain');
  gh.addCollaborator('acme', 'widgets', 'tri', 'triage');
  gh.addCollaborator('acme', 'widgets', 'boss', 'admin');
  gh.addCollaborator('acme', 'widgets', 'reader', 'read');
  gh.createUser('bob');
  gh.createUser('renovate[bot]', { type: 'Bot' });
  gh.createIssue('acme', 'widgets', { title: 'Add a greeting', body: 'Please greet.', author: 'alice', labels: ['enhancement'] });
  gh.createIssue('acme', 'gadgets', { title: 'Gadget bug', author: 'alice' });
});

after(async () => {
  await gh.close();
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
});

describe('app authentication (JWT)', () => {
  test('@octokit/auth-app reaches the app endpoints', async () => {
    const app = new Octokit({ baseUrl: gh.apiUrl, authStrategy: createAppAuth, auth: { appId: gh.appId, privateKey: gh.privateKeyPem } });
    const { data: me } = await app.request('GET /app');
    assert.equal(me?.id, APP_ID);
    assert.equal(me?.slug, 'lilypad');
    const { data: installations } = await app.rest.apps.listInstallations();
    assert.deepEqual(installations.map((i) => i.account && 'login' in i.account ? i.account.login : null).sort(), ['acme', 'octo-user']);
    const { data: byRepo } = await app.rest.apps.getRepoInstallation({ owner: 'acme', repo: 'widgets' });
    assert.equal(byRepo.id, acmeInstallation);
    assert.equal(byRepo.target_type, 'Organization');
    assert.equal((await app.rest.apps.getOrgInstallation({ org: 'acme' })).data.id, acmeInstallation);
    assert.equal((await app.rest.apps.getUserInstallation({ username: 'octo-user' })).data.id, otherInstallation);
    await rejects(app.rest.apps.getOrgInstallation({ org: 'octo-user' }), 404);
    await rejects(app.rest.apps.getRepoInstallation({ owner: 'nobody', repo: 'nothing' }), 404);
  });

  test('rejects a JWT signed by another key, an expired one, one too far ahead, and a token', async () => {
    const now = Math.floor(Date.now() / 1000);
    const { privateKey: foreign } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const foreignPem = foreign.export({ type: 'pkcs1', format: 'pem' }).toString();
    const call = async (bearer: string): Promise<{ status: number; body: Record<string, unknown> }> => {
      const res = await fetch(`${gh.apiUrl}/app`, { headers: { authorization: `Bearer ${bearer}`, accept: 'application/vnd.github+json' } });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const forged = await call(signAppJwt(foreignPem, { iat: now - 30, exp: now + 500, iss: APP_ID }));
    assert.equal(forged.status, 401);
    assert.equal(forged.body.message, 'A JSON web token could not be decoded');
    assert.equal(typeof forged.body.documentation_url, 'string');

    const expired = await call(signAppJwt(gh.privateKeyPem, { iat: now - 900, exp: now - 300, iss: APP_ID }));
    assert.equal(expired.status, 401);
    assert.match(String(expired.body.message), /'Expiration time' claim \('exp'\) must be a numeric value/);

    const tooLong = await call(signAppJwt(gh.privateKeyPem, { iat: now, exp: now + 3600, iss: APP_ID }));
    assert.equal(tooLong.status, 401);
    assert.match(String(tooLong.body.message), /too far in the future/);

    const wrongApp = await call(signAppJwt(gh.privateKeyPem, { iat: now - 30, exp: now + 500, iss: APP_ID + 1 }));
    assert.equal(wrongApp.status, 404);

    const ok = await call(signAppJwt(gh.privateKeyPem, { iat: now - 30, exp: now + 500, iss: String(APP_ID) }));
    assert.equal(ok.status, 200);

    const token = await mint(acmeInstallation);
    assert.equal((await call(token)).status, 401, 'an installation token is not an app JWT');
    const none = await fetch(`${gh.apiUrl}/app/installations`);
    assert.equal(none.status, 401);
  });
});

describe('installation tokens', () => {
  test('have GitHub’s format and response shape, and are recorded', async () => {
    const app = new Octokit({ baseUrl: gh.apiUrl, authStrategy: createAppAuth, auth: { appId: gh.appId, privateKey: gh.privateKeyPem } });
    const { status, data } = await app.rest.apps.createInstallationAccessToken({ installation_id: acmeInstallation, repositories: ['widgets'], permissions: { issues: 'write' } });
    assert.equal(status, 201);
    assert.match(data.token, /^ghs_[A-Za-z0-9]{36}$/);
    assert.equal(data.repository_selection, 'selected');
    assert.deepEqual(data.repositories?.map((r) => r.full_name), ['acme/widgets']);
    assert.deepEqual(data.permissions, { issues: 'write', metadata: 'read' });
    const ttl = Date.parse(data.expires_at) - Date.now();
    assert.ok(ttl > 3590_000 && ttl <= 3600_000, `expires in about an hour (${ttl} ms)`);
    const issued = gh.tokens().find((t) => t.token === data.token);
    assert.deepEqual(issued?.repositories, ['widgets']);
    assert.equal(issued?.installationId, acmeInstallation);

    const all = await app.rest.apps.createInstallationAccessToken({ installation_id: acmeInstallation });
    assert.equal(all.data.repository_selection, 'all');
    assert.equal(all.data.repositories, undefined);

    const bad = await rejects(app.rest.apps.createInstallationAccessToken({ installation_id: acmeInstallation, repositories: ['personal'] }), 422);
    assert.match(String(errorBody(bad).message), /does not exist or is not accessible to the parent installation/);
    await rejects(app.rest.apps.createInstallationAccessToken({ installation_id: acmeInstallation, permissions: { administration: 'write' } }), 422);
    await rejects(app.rest.apps.createInstallationAccessToken({ installation_id: 999999 }), 404);
  });

  test('expire after tokenTtlSeconds', async () => {
    const short = await startGitHubStandin({ tokenTtlSeconds: 1 });
    try {
      const installationId = short.createInstallation({ login: 'acme', type: 'Organization' }).id;
      short.createRepo('acme', 'widgets');
      const auth = createAppAuth({ appId: short.appId, privateKey: short.privateKeyPem, request: octokitRequest.defaults({ baseUrl: short.apiUrl }) });
      const { token } = await auth({ type: 'installation', installationId });
      const client = new Octokit({ baseUrl: short.apiUrl, auth: token });
      assert.equal((await client.rest.repos.get({ owner: 'acme', repo: 'widgets' })).status, 200);
      // The token lapses on its own (1 s); poll until it does rather than sleep past it.
      const status = () => client.rest.repos.get({ owner: 'acme', repo: 'widgets' }).then((r) => r.status, (e: RequestError) => e.status);
      await waitFor(async () => (await status()) === 401, { what: 'the installation token to expire', timeoutMs: 5000, intervalMs: 100 });
      const err = await rejects(client.rest.repos.get({ owner: 'acme', repo: 'widgets' }), 401);
      assert.equal(errorBody(err).message, 'Bad credentials');
    } finally {
      await short.close();
    }
  });

  test('a token scoped to one repository cannot read another (REST)', async () => {
    const token = await mint(acmeInstallation, { repositoryNames: ['widgets'] });
    const client = tokenClient(token);
    assert.equal((await client.rest.repos.get({ owner: 'acme', repo: 'widgets' })).data.full_name, 'acme/widgets');
    await rejects(client.rest.repos.get({ owner: 'acme', repo: 'gadgets' }), 404);
    await rejects(client.rest.issues.createComment({ owner: 'acme', repo: 'gadgets', issue_number: 1, body: 'hi' }), 404);
    await rejects(client.rest.repos.getContent({ owner: 'acme', repo: 'gadgets', path: 'README.md' }), 404);
    const otherToken = await mint(otherInstallation);
    await rejects(tokenClient(otherToken).rest.issues.get({ owner: 'acme', repo: 'widgets', issue_number: 1 }), 404);
    const anonymous = new Octokit({ baseUrl: gh.apiUrl });
    await rejects(anonymous.rest.repos.get({ owner: 'acme', repo: 'widgets' }), 404);
    await rejects(tokenClient('ghs_' + 'x'.repeat(36)).rest.repos.get({ owner: 'acme', repo: 'widgets' }), 401);
  });

  test('a token lacking a permission gets 403 Resource not accessible by integration', async () => {
    const token = await mint(acmeInstallation, { permissions: { issues: 'read', contents: 'read' } });
    const client = tokenClient(token);
    assert.equal((await client.rest.issues.get({ owner: 'acme', repo: 'widgets', issue_number: 1 })).data.title, 'Add a greeting');
    const err = await rejects(client.rest.issues.createComment({ owner: 'acme', repo: 'widgets', issue_number: 1, body: 'nope' }), 403);
    assert.equal(errorBody(err).message, 'Resource not accessible by integration');
    assert.equal(err.response?.headers['x-accepted-github-permissions'], 'issues=write; pull_requests=write');
    await rejects(client.rest.pulls.list({ owner: 'acme', repo: 'widgets' }), 403);
  });
});

describe('REST resources', () => {
  test('contents: JSON (base64) and raw forms, directories, 404s', async () => {
    const client = tokenClient(await mint(acmeInstallation));
    const { data, headers } = await client.rest.repos.getContent({ owner: 'acme', repo: 'widgets', path: 'src/app.py' });
    assert.ok(!Array.isArray(data) && data.type === 'file');
    assert.equal(data.encoding, 'base64');
    assert.equal(Buffer.from(data.content ?? '', 'base64').toString('utf8'), 'print("hello")\n');
    assert.match(data.sha, /^[0-9a-f]{40}$/);
    assert.equal(headers['x-github-media-type'], 'github.v3; format=json');

    const raw = await client.rest.repos.getContent({ owner: 'acme', repo: 'widgets', path: 'src/app.py', mediaType: { format: 'raw' } });
    assert.equal(raw.data as unknown, 'print("hello")\n');
    assert.equal(raw.headers['content-type'], 'application/vnd.github.v3.raw; charset=utf-8');

    const dir = await client.rest.repos.getContent({ owner: 'acme', repo: 'widgets', path: 'src' });
    assert.ok(Array.isArray(dir.data));
    assert.deepEqual(dir.data.map((e) => `${e.type}:${e.path}`), ['file:src/app.py', 'file:src/util.py']);
    const rootDir = await client.rest.repos.getContent({ owner: 'acme', repo: 'widgets', path: '' });
    assert.ok(Array.isArray(rootDir.data) && rootDir.data.some((e) => e.type === 'dir' && e.name === 'src'));

    await rejects(client.rest.repos.getContent({ owner: 'acme', repo: 'widgets', path: 'missing.txt' }), 404);
    const badRef = await rejects(client.rest.repos.getContent({ owner: 'acme', repo: 'widgets', path: 'README.md', ref: 'no-such-branch' }), 404);
    assert.equal(errorBody(badRef).message, 'No commit found for the ref no-such-branch');

    const sha = gh.setFile('acme', 'widgets', 'src/util.py', 'X = 2\n', 'bump X');
    const updated = await client.rest.repos.getContent({ owner: 'acme', repo: 'widgets', path: 'src/util.py', ref: sha, mediaType: { format: 'raw' } });
    assert.equal(updated.data as unknown, 'X = 2\n');
  });

  test("Probot's config plugin falls back to the organisation's .github repository", async () => {
    const token = await mint(acmeInstallation);
    const octokit = new ProbotOctokit({ baseUrl: gh.apiUrl, auth: { token }, throttle: { enabled: false } });
    const fallback = await octokit.config.get({ owner: 'acme', repo: 'widgets', path: '.github/lilypad.yml' });
    assert.deepEqual(fallback.config, { label: 'lilypad', max_steps: 40 });
    assert.deepEqual(fallback.files.map((f) => [f.repo, f.config === null]), [['widgets', true], ['.github', false]]);

    gh.setFile('acme', 'gadgets', '.github/lilypad.yml', 'label: gadget-bot\n');
    const own = await octokit.config.get({ owner: 'acme', repo: 'gadgets', path: '.github/lilypad.yml' });
    assert.deepEqual(own.config, { label: 'gadget-bot' });
  });

  test('collaborator permission: legacy permission plus role_name (maintain→write, triage→read)', async () => {
    const client = tokenClient(await mint(acmeInstallation));
    const get = async (username: string): Promise<[string, string]> => {
      const { data } = await client.rest.repos.getCollaboratorPermissionLevel({ owner: 'acme', repo: 'widgets', username });
      assert.equal(data.user?.login, username);
      return [data.permission, data.role_name];
    };
    assert.deepEqual(await get('alice'), ['write', 'write']);
    assert.deepEqual(await get('mona'), ['write', 'maintain']);
    assert.deepEqual(await get('tri'), ['read', 'triage']);
    assert.deepEqual(await get('boss'), ['admin', 'admin']);
    assert.deepEqual(await get('reader'), ['read', 'read']);
    assert.deepEqual(await get('bob'), ['none', 'none']);
    assert.deepEqual(await get('renovate[bot]'), ['none', 'none']);
    const { data } = await client.rest.repos.getCollaboratorPermissionLevel({ owner: 'acme', repo: 'widgets', username: 'mona' });
    assert.deepEqual(data.user?.permissions, { admin: false, maintain: true, push: true, triage: true, pull: true });
    await rejects(client.rest.repos.getCollaboratorPermissionLevel({ owner: 'acme', repo: 'widgets', username: 'ghost-user' }), 404);
  });

  test('comments: create, edit history, reactions, delete; labels; issue fields', async () => {
    const client = tokenClient(await mint(acmeInstallation));
    const created = await client.rest.issues.createComment({ owner: 'acme', repo: 'widgets', issue_number: 1, body: 'Working on it' });
    assert.equal(created.status, 201);
    assert.equal(created.data.user?.login, 'lilypad[bot]');
    assert.equal(created.data.user?.type, 'Bot');
    assert.equal(created.data.performed_via_github_app?.id, APP_ID);
    assert.equal(created.headers.location, created.data.url);
    const id = created.data.id;
    await client.rest.issues.updateComment({ owner: 'acme', repo: 'widgets', comment_id: id, body: 'Step 1 done' });
    const edited = await client.rest.issues.updateComment({ owner: 'acme', repo: 'widgets', comment_id: id, body: 'All done' });
    assert.equal(edited.data.body, 'All done');
    const mine = gh.comments('acme', 'widgets', 1).find((c) => c.id === id);
    assert.deepEqual(mine?.edits, ['Working on it', 'Step 1 done', 'All done']);
    assert.equal(mine?.user.login, 'lilypad[bot]');
    assert.ok(mine && mine.updated_at >= mine.created_at);

    const first = await client.rest.reactions.createForIssueComment({ owner: 'acme', repo: 'widgets', comment_id: id, content: 'eyes' });
    assert.equal(first.status, 201);
    const again = await client.rest.reactions.createForIssueComment({ owner: 'acme', repo: 'widgets', comment_id: id, content: 'eyes' });
    assert.equal(again.status, 200);
    assert.equal(again.data.id, first.data.id);
    assert.deepEqual(gh.reactions(id).map((r) => [r.content, r.user.login]), [['eyes', 'lilypad[bot]']]);
    await rejects(client.rest.reactions.createForIssueComment({ owner: 'acme', repo: 'widgets', comment_id: id, content: 'party' as 'eyes' }), 422);
    // Refused by the conformance check (GitHub's description lists the reactions), on purpose here.
    assert.match(gh.takeConformanceViolations().join('\n'), /\/content must be equal to one of the allowed values/);
    const onIssue = await client.rest.reactions.createForIssue({ owner: 'acme', repo: 'widgets', issue_number: 1, content: 'rocket' });
    assert.equal(onIssue.status, 201);
    assert.equal(gh.issue('acme', 'widgets', 1).reactions.rocket, 1);

    const labels = await client.rest.issues.addLabels({ owner: 'acme', repo: 'widgets', issue_number: 1, labels: ['lilypad: working'] });
    assert.deepEqual(labels.data.map((l) => l.name), ['enhancement', 'lilypad: working']);
    const removed = await client.rest.issues.removeLabel({ owner: 'acme', repo: 'widgets', issue_number: 1, name: 'lilypad: working' });
    assert.deepEqual(removed.data.map((l) => l.name), ['enhancement']);
    await rejects(client.rest.issues.removeLabel({ owner: 'acme', repo: 'widgets', issue_number: 1, name: 'absent' }), 404);

    await client.rest.issues.deleteComment({ owner: 'acme', repo: 'widgets', comment_id: id });
    await rejects(client.rest.issues.getComment({ owner: 'acme', repo: 'widgets', comment_id: id }), 404);
    await rejects(client.rest.issues.createComment({ owner: 'acme', repo: 'widgets', issue_number: 1, body: 'x'.repeat(65537) }), 422);
    await rejects(client.rest.issues.get({ owner: 'acme', repo: 'widgets', issue_number: 999 }), 404);

    for (let i = 0; i < 35; i++) await client.rest.issues.createComment({ owner: 'acme', repo: 'gadgets', issue_number: 1, body: `note ${i}` });
    const firstPage = await client.rest.issues.listComments({ owner: 'acme', repo: 'gadgets', issue_number: 1 });
    assert.equal(firstPage.data.length, 30);
    assert.match(firstPage.headers.link ?? '', /rel="next"/);
    const every = await client.paginate(client.rest.issues.listComments, { owner: 'acme', repo: 'gadgets', issue_number: 1, per_page: 10 });
    assert.equal(every.length, 35);
    assert.equal(every[34]?.body, 'note 34');
  });

  test('headers, rate limit, error shapes and the request log', async () => {
    const token = await mint(acmeInstallation);
    const client = tokenClient(token);
    const { headers } = await client.rest.repos.get({ owner: 'acme', repo: 'widgets' });
    assert.equal(headers['x-github-enterprise-version'], '3.15.0');
    assert.equal(headers['x-github-media-type'], 'github.v3; format=json');
    for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-ratelimit-used', 'x-ratelimit-resource']) {
      assert.ok(headers[h] !== undefined, `${h} present`);
    }
    const { data: rl } = await client.rest.rateLimit.get();
    assert.equal(rl.resources.core.limit, 5000);
    assert.equal(rl.rate.remaining, rl.resources.core.remaining);

    const res = await fetch(`${gh.apiUrl}/no/such/route`, { headers: { authorization: `token ${token}` } });
    assert.equal(res.status, 404);
    assert.equal(res.headers.get('x-github-enterprise-version'), '3.15.0');
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.message, 'Not Found');
    assert.equal(typeof body.documentation_url, 'string');
    assert.match(gh.takeConformanceViolations().join('\n'), /no operation GET \/no\/such\/route/);

    const badJson = await fetch(`${gh.apiUrl}/repos/acme/widgets/issues/1/comments`, { method: 'POST', headers: { authorization: `token ${token}` }, body: '{oops' });
    assert.equal(badJson.status, 400);

    const logged = gh.requests.find((r) => r.path === '/api/v3/repos/acme/widgets' && r.token === token);
    assert.equal(logged?.status, 200);
    assert.equal(logged?.method, 'GET');
    assert.equal(logged?.kind, 'api');
  });
});

describe('git over HTTP and pull requests', () => {
  test('clone and push with a token; the pushed branch backs a draft pull request', async () => {
    const token = await mint(acmeInstallation, { repositoryNames: ['widgets'] });
    const work = path.join(tmpDir('standin-clone-'), 'widgets');
    await mustGit([...authHeader(token), 'clone', '--quiet', `${gh.origin}/acme/widgets.git`, work]);
    assert.equal(readFileSync(path.join(work, 'src/app.py'), 'utf8'), 'print("hello")\n');
    const branch = 'lilypad/issue-1';
    await mustGit(['checkout', '--quiet', '-b', branch], work);
    writeFileSync(path.join(work, 'src/app.py'), 'print("hello, world")\n');
    await mustGit(['commit', '--quiet', '-am', 'Greet the world'], work);
    await mustGit([...authHeader(token), 'push', '--quiet', 'origin', branch], work);
    const localHead = (await mustGit(['rev-parse', 'HEAD'], work)).trim();
    assert.equal(gh.branchSha('acme', 'widgets', branch), localHead);
    assert.equal(gh.readFile('acme', 'widgets', branch, 'src/app.py'), 'print("hello, world")\n');
    assert.ok(gh.requests.some((r) => r.kind === 'git' && r.path.endsWith('/git-receive-pack') && r.status === 200 && r.token === token));

    const client = tokenClient(token);
    const { data: br } = await client.rest.repos.getBranch({ owner: 'acme', repo: 'widgets', branch });
    assert.equal(br.commit.sha, localHead);
    assert.equal(br.commit.commit.message, 'Greet the world');
    await rejects(client.rest.repos.getBranch({ owner: 'acme', repo: 'widgets', branch: 'nope' }), 404);

    const pr = await client.rest.pulls.create({ owner: 'acme', repo: 'widgets', title: 'Greet the world', head: branch, base: 'main', body: 'Fixes #1', draft: true });
    assert.equal(pr.status, 201);
    assert.equal(pr.data.draft, true);
    assert.equal(pr.data.number, 2, 'issues and pull requests share one number sequence');
    assert.equal(pr.data.user?.login, 'lilypad[bot]');
    assert.equal(pr.data.head.sha, localHead);
    assert.equal(pr.data.head.label, `acme:${branch}`);
    assert.equal(pr.data.commits, 1);
    assert.equal(pr.data.changed_files, 1);

    const dup = await rejects(client.rest.pulls.create({ owner: 'acme', repo: 'widgets', title: 'again', head: `acme:${branch}`, base: 'main' }), 422);
    assert.equal(errorBody(dup).message, 'Validation Failed');
    assert.deepEqual(errorBody(dup).errors, [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for acme:${branch}.` }]);
    const noHead = await rejects(client.rest.pulls.create({ owner: 'acme', repo: 'widgets', title: 'x', head: 'missing-branch', base: 'main' }), 422);
    assert.deepEqual(errorBody(noHead).errors, [{ resource: 'PullRequest', field: 'head', code: 'invalid' }]);
    await rejects(client.rest.pulls.create({ owner: 'acme', repo: 'widgets', title: 'x', head: 'main', base: 'main' }), 422);

    const listed = await client.rest.pulls.list({ owner: 'acme', repo: 'widgets', head: `acme:${branch}` });
    assert.deepEqual(listed.data.map((p) => p.number), [2]);
    assert.equal((await client.rest.pulls.list({ owner: 'acme', repo: 'widgets', head: 'acme:other' })).data.length, 0);
    assert.equal((await client.rest.pulls.list({ owner: 'acme', repo: 'widgets', state: 'closed' })).data.length, 0);
    const asIssue = await client.rest.issues.get({ owner: 'acme', repo: 'widgets', issue_number: 2 });
    assert.equal(asIssue.data.pull_request?.url, pr.data.url);

    const reviewed = await client.rest.pulls.requestReviewers({ owner: 'acme', repo: 'widgets', pull_number: 2, reviewers: ['alice'] });
    assert.equal(reviewed.status, 201);
    assert.deepEqual(reviewed.data.requested_reviewers?.map((u) => u.login), ['alice']);
    const outsider = await rejects(client.rest.pulls.requestReviewers({ owner: 'acme', repo: 'widgets', pull_number: 2, reviewers: ['bob'] }), 422);
    assert.match(String(errorBody(outsider).message), /Reviews may only be requested from collaborators/);
    const author = await rejects(client.rest.pulls.requestReviewers({ owner: 'acme', repo: 'widgets', pull_number: 2, reviewers: ['lilypad[bot]'] }), 422);
    assert.equal(errorBody(author).message, 'Review cannot be requested from pull request author.');
    assert.deepEqual(gh.pulls('acme', 'widgets').map((p) => [p.number, p.draft, p.requested_reviewers.map((u) => u.login)]), [[2, true, ['alice']]]);

    const closed = await client.rest.pulls.update({ owner: 'acme', repo: 'widgets', pull_number: 2, state: 'closed' });
    assert.equal(closed.data.state, 'closed');
    assert.equal(gh.issue('acme', 'widgets', 2).state, 'closed');
    const reopened = await client.rest.pulls.create({ owner: 'acme', repo: 'widgets', title: 'Second try', head: branch, base: 'main', draft: true });
    assert.equal(reopened.data.number, 3);
  });

  test('git refuses other repositories, read-only pushes, and missing or expired credentials', async () => {
    const widgetsOnly = await mint(acmeInstallation, { repositoryNames: ['widgets'] });
    const base = tmpDir('standin-deny-');
    const outOfScope = await git([...authHeader(widgetsOnly), 'clone', '--quiet', `${gh.origin}/acme/gadgets.git`, path.join(base, 'g1')]);
    assert.notEqual(outOfScope.code, 0);
    assert.match(outOfScope.stderr, /Repository not found|not found/i);

    const anonymous = await git(['clone', '--quiet', `${gh.origin}/acme/widgets.git`, path.join(base, 'w0')]);
    assert.notEqual(anonymous.code, 0);
    assert.ok(gh.requests.some((r) => r.kind === 'git' && r.path.startsWith('/acme/widgets.git/info/refs') && r.status === 401));

    const readOnly = await mint(acmeInstallation, { permissions: { contents: 'read' } });
    const work = path.join(base, 'w1');
    await mustGit([...authHeader(readOnly), 'clone', '--quiet', `${gh.origin}/acme/widgets.git`, work]);
    await mustGit(['checkout', '--quiet', '-b', 'readonly-attempt'], work);
    writeFileSync(path.join(work, 'NEW.md'), 'new\n');
    await mustGit(['add', 'NEW.md'], work);
    await mustGit(['commit', '--quiet', '-m', 'try'], work);
    const push = await git([...authHeader(readOnly), 'push', 'origin', 'readonly-attempt'], work);
    assert.notEqual(push.code, 0);
    assert.match(push.stderr, /Write access to repository not granted|403/);
    assert.equal(gh.branchSha('acme', 'widgets', 'readonly-attempt'), null);

    gh.expireTokens(widgetsOnly);
    const expired = await git([...authHeader(widgetsOnly), 'ls-remote', `${gh.origin}/acme/widgets.git`]);
    assert.notEqual(expired.code, 0);
    const last = gh.requests.filter((r) => r.kind === 'git').at(-1);
    assert.equal(last?.status, 401);
  });
});

describe('webhooks', () => {
  let receiver: Server;
  let receiverUrl: string;
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];

  before(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(202, { 'content-type': 'text/plain' });
        res.end('accepted');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/api/github/webhooks`;
  });
  after(async () => {
    await new Promise<void>((r) => receiver.close(() => r()));
  });

  test('deliveries carry GitHub’s headers and a verifiable signature; payloads match the examples', async () => {
    const payload = gh.labelIssue('acme', 'widgets', 1, 'lilypad', 'alice');
    const result = await gh.sendWebhook(receiverUrl, 'issues', payload);
    assert.equal(result.status, 202);
    assert.equal(result.body, 'accepted');
    const got = received.at(-1);
    assert.ok(got);
    assert.equal(got.headers['x-github-event'], 'issues');
    assert.equal(got.headers['x-github-delivery'], result.deliveryId);
    assert.match(result.deliveryId, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.match(String(got.headers['user-agent']), /^GitHub-Hookshot\//);
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['x-github-hook-installation-target-type'], 'integration');
    assert.equal(got.headers['x-github-hook-installation-target-id'], String(APP_ID));
    assert.ok(got.headers['x-github-hook-id']);
    const signature = String(got.headers['x-hub-signature-256']);
    assert.equal(await verify(SECRET, got.body, signature), true);
    assert.equal(await verify('wrong-secret', got.body, signature), false);

    const body = JSON.parse(got.body) as Record<string, unknown>;
    const example = webhookExample('issues', 'labeled');
    assert.ok(example);
    for (const key of Object.keys(example)) assert.ok(key in body, `top-level key ${key} present`);
    const issue = body.issue as Record<string, unknown>;
    for (const key of Object.keys(example.issue as Record<string, unknown>)) assert.ok(key in issue, `issue.${key} present`);
    const repository = body.repository as Record<string, unknown>;
    for (const key of Object.keys(example.repository as Record<string, unknown>)) assert.ok(key in repository, `repository.${key} present`);
    assert.equal(body.action, 'labeled');
    assert.equal((body.label as { name: string }).name, 'lilypad');
    assert.ok((issue.labels as { name: string }[]).some((l) => l.name === 'lilypad'));
    assert.equal(issue.number, 1);
    assert.equal(repository.full_name, 'acme/widgets');
    assert.equal((body.sender as { login: string }).login, 'alice');
    assert.equal((body.installation as { id: number }).id, acmeInstallation);
    assert.equal((body.organization as { login: string }).login, 'acme');
    assert.equal(String(repository.url).startsWith(gh.apiUrl), true);

    const comment = gh.commentOnIssue('acme', 'widgets', 1, '/lilypad retry', 'alice');
    assert.equal(comment.action, 'created');
    assert.equal((comment.comment as { body: string }).body, '/lilypad retry');
    assert.equal(gh.comments('acme', 'widgets', 1).at(-1)?.body, '/lilypad retry');
    const closed = gh.closeIssue('acme', 'gadgets', 1, 'alice');
    assert.equal((closed.issue as { state: string }).state, 'closed');
    const unlabeled = gh.unlabelIssue('acme', 'widgets', 1, 'lilypad', 'alice');
    assert.equal(unlabeled.action, 'unlabeled');
    assert.equal(gh.issue('acme', 'widgets', 1).labels.some((l) => l.name === 'lilypad'), false);
    await assert.rejects(gh.sendWebhook('http://example.invalid/hook', 'ping', {}), /loopback/);
  });

  test('a Probot app configured with GHE_HOST/GHE_PROTOCOL handles a delivery end to end', async () => {
    let seenConfig: unknown = null;
    const probot: Probot = createProbot({
      env: { APP_ID: String(gh.appId), PRIVATE_KEY: gh.privateKeyPem, WEBHOOK_SECRET: gh.webhookSecret, GHE_HOST: gh.host, GHE_PROTOCOL: 'http', LOG_LEVEL: 'fatal' },
    });
    const middleware = await createNodeMiddleware(
      (app) => {
        app.on('issues.labeled', async (context) => {
          seenConfig = await context.config('lilypad.yml');
          await context.octokit.rest.issues.createComment(context.issue({ body: `Picked up by ${context.payload.sender.login}` }));
        });
      },
      { probot, webhooksPath: '/api/github/webhooks' },
    );
    const appServer = createServer((req, res) => {
      void middleware(req, res, () => {
        res.writeHead(404);
        res.end();
      });
    });
    await new Promise<void>((r) => appServer.listen(0, '127.0.0.1', () => r()));
    try {
      const url = `http://127.0.0.1:${(appServer.address() as AddressInfo).port}/api/github/webhooks`;
      const payload = gh.labelIssue('acme', 'widgets', 1, 'lilypad', 'mona');
      const res = await gh.sendWebhook(url, 'issues', payload);
      assert.equal(res.status, 200, res.body);
      assert.deepEqual(seenConfig, { label: 'lilypad', max_steps: 40 });
      const last = gh.comments('acme', 'widgets', 1).at(-1);
      assert.equal(last?.body, 'Picked up by mona');
      assert.equal(last?.user.login, 'lilypad[bot]');
      const forged = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': 'x', 'x-hub-signature-256': 'sha256=' + '0'.repeat(64) },
        body: JSON.stringify(payload),
      });
      assert.equal(forged.status, 400);
    } finally {
      await new Promise<void>((r) => appServer.close(() => r()));
    }
  });
});

describe('issue search and issue events', () => {
  let initech: number;
  const ISSUE_EVENT_KEYS = ['id', 'node_id', 'url', 'actor', 'event', 'commit_id', 'commit_url', 'created_at', 'performed_via_github_app'];

  /** [repo#number, …] of a search response's items. */
  const refs = (items: { repository_url: string; number: number }[]): string[] =>
    items.map((i) => `${i.repository_url.slice(`${gh.apiUrl}/repos/`.length)}#${i.number}`);

  const eventRows = (events: IssueEvent[]): string[] =>
    events.map((e) => [e.event, e.actor.login, e.label?.name].filter((x) => x !== undefined).join(' '));

  before(async () => {
    initech = gh.createInstallation({ login: 'initech', type: 'Organization' }).id;
    gh.createRepo('initech', 'tps', { files: { 'README.md': '# tps\n' } });
    gh.createRepo('initech', 'printer');
    gh.createRepo('hooli', 'open-source', { private: false });
    gh.createRepo('hooli', 'secret');
    gh.createIssue('initech', 'tps', { title: 'New TPS report cover sheets', body: 'Did you get the memo?', author: 'peter', labels: ['lilypad'] });
    gh.createIssue('initech', 'tps', { title: 'Stapler missing', author: 'milton', labels: ['bug', 'help wanted'] });
    gh.createIssue('initech', 'tps', { title: 'Printer jams', author: 'samir' });
    gh.createIssue('initech', 'printer', { title: 'PC load letter', author: 'michael', labels: ['lilypad'] });
    gh.createIssue('hooli', 'open-source', { title: 'Public lilypad issue', author: 'gavin', labels: ['lilypad'] });
    gh.createIssue('hooli', 'secret', { title: 'Secret lilypad issue', author: 'gavin', labels: ['lilypad'] });

    // A pull request in initech/tps (#4), from a branch pushed over git.
    const token = await mint(initech, { repositoryNames: ['tps'] });
    const work = path.join(tmpDir('standin-search-'), 'tps');
    await mustGit([...authHeader(token), 'clone', '--quiet', `${gh.origin}/initech/tps.git`, work]);
    await mustGit(['checkout', '--quiet', '-b', 'cover-sheets'], work);
    writeFileSync(path.join(work, 'COVER.md'), 'cover sheet\n');
    await mustGit(['add', 'COVER.md'], work);
    await mustGit(['commit', '--quiet', '-m', 'Add cover sheet'], work);
    await mustGit([...authHeader(token), 'push', '--quiet', 'origin', 'cover-sheets'], work);
    const pr = await tokenClient(token).rest.pulls.create({ owner: 'initech', repo: 'tps', title: 'Cover sheets', head: 'cover-sheets', base: 'main', body: 'Fixes #1' });
    assert.equal(pr.data.number, 4);
  });

  test('search/issues: qualifiers, GitHub’s response shape, newest first', async () => {
    const client = tokenClient(await mint(initech));
    const search = async (q: string, extra: { sort?: 'created' | 'updated' | 'comments'; order?: 'asc' | 'desc' } = {}): Promise<string[]> =>
      refs((await client.rest.search.issuesAndPullRequests({ q, ...extra })).data.items);

    const res = await client.rest.search.issuesAndPullRequests({ q: 'is:issue is:open label:lilypad org:initech' });
    assert.equal(res.status, 200);
    assert.equal(res.data.total_count, 2);
    assert.equal(res.data.incomplete_results, false);
    assert.deepEqual(refs(res.data.items), ['initech/printer#1', 'initech/tps#1'], 'newest first');
    const [first] = res.data.items;
    assert.ok(first);
    assert.equal(first.score, 1);
    assert.equal(first.repository_url, `${gh.apiUrl}/repos/initech/printer`);
    const { score, ...asIssue } = first;
    assert.equal(score, 1);
    const direct = await client.rest.issues.get({ owner: 'initech', repo: 'printer', issue_number: 1 });
    assert.deepEqual(asIssue, direct.data, 'items are the GET /repos/{o}/{r}/issues/{n} shape plus score');

    assert.deepEqual(await search('label:"help wanted"'), ['initech/tps#2']);
    assert.deepEqual(await search('label:bug label:"HELP WANTED" repo:initech/tps'), ['initech/tps#2'], 'every label qualifier must match (case-insensitively)');
    assert.deepEqual(await search('label:bug label:lilypad'), []);
    assert.deepEqual(await search('label:bug,lilypad repo:initech/tps'), ['initech/tps#2', 'initech/tps#1'], 'a comma list matches any');
    assert.deepEqual(await search('-label:lilypad repo:initech/tps is:issue'), ['initech/tps#3', 'initech/tps#2']);
    assert.deepEqual(await search('no:label repo:initech/tps'), ['initech/tps#4', 'initech/tps#3']);
    assert.deepEqual(await search('no:label repo:initech/tps is:issue'), ['initech/tps#3']);
    assert.deepEqual(await search('is:pr repo:initech/tps'), ['initech/tps#4']);
    const prItem = (await client.rest.search.issuesAndPullRequests({ q: 'is:pr org:initech' })).data.items[0];
    assert.equal(prItem?.pull_request?.url, `${gh.apiUrl}/repos/initech/tps/pulls/4`);
    assert.deepEqual(await search('user:initech is:issue'), await search('org:initech is:issue'));
    assert.deepEqual(await search('repo:initech/tps repo:initech/printer is:issue label:lilypad'), ['initech/printer#1', 'initech/tps#1'], 'repo: qualifiers add up');
    assert.deepEqual(await search('"cover sheets" repo:initech/tps'), ['initech/tps#4', 'initech/tps#1'], 'free text matches title or body');
    assert.deepEqual(await search('memo'), ['initech/tps#1']);
    assert.deepEqual(await search('org:initech is:issue', { sort: 'created', order: 'asc' }), ['initech/tps#1', 'initech/tps#2', 'initech/tps#3', 'initech/printer#1']);

    gh.closeIssue('initech', 'tps', 3, 'samir');
    assert.deepEqual(await search('repo:initech/tps is:closed'), ['initech/tps#3']);
    assert.deepEqual(await search('repo:initech/tps state:closed is:issue'), ['initech/tps#3']);
    assert.deepEqual(await search('repo:initech/tps state:open is:issue'), ['initech/tps#2', 'initech/tps#1']);

    // Public repositories of other accounts are searchable, private ones are not.
    assert.deepEqual(await search('label:lilypad is:open'), ['hooli/open-source#1', 'initech/printer#1', 'initech/tps#1']);

    // A label applied without a webhook is still found by search.
    assert.equal(gh.labelIssueSilently('initech', 'tps', 3, 'lilypad', 'peter'), undefined);
    assert.deepEqual(await search('label:lilypad repo:initech/tps'), ['initech/tps#3', 'initech/tps#1']);
  });

  test('search/issues: only what the token can see; validation errors; pagination', async () => {
    const printerOnly = tokenClient(await mint(initech, { repositoryNames: ['printer'] }));
    const { data } = await printerOnly.rest.search.issuesAndPullRequests({ q: 'org:initech' });
    assert.deepEqual(refs(data.items), ['initech/printer#1']);
    const hidden = await rejects(printerOnly.rest.search.issuesAndPullRequests({ q: 'repo:initech/tps' }), 422);
    assert.equal(errorBody(hidden).message, 'Validation Failed');
    assert.deepEqual(errorBody(hidden).errors, [
      {
        message: 'The listed users and repositories cannot be searched either because the resources do not exist or you do not have permission to view them.',
        resource: 'Search',
        field: 'q',
        code: 'invalid',
      },
    ]);
    await rejects(printerOnly.rest.search.issuesAndPullRequests({ q: 'repo:hooli/secret' }), 422);
    await rejects(printerOnly.rest.search.issuesAndPullRequests({ q: 'user:no-such-account' }), 422);
    const missing = await rejects(printerOnly.rest.search.issuesAndPullRequests({ q: '' }), 422);
    assert.deepEqual(errorBody(missing).errors, [{ resource: 'Search', field: 'q', code: 'missing' }]);

    const noIssues = tokenClient(await mint(initech, { permissions: { contents: 'read' } }));
    assert.equal((await noIssues.rest.search.issuesAndPullRequests({ q: 'org:initech' })).data.total_count, 0, 'no issues permission: nothing from the installation');
    const otherAccount = tokenClient(await mint(otherInstallation));
    assert.deepEqual(refs((await otherAccount.rest.search.issuesAndPullRequests({ q: 'label:lilypad' })).data.items), ['hooli/open-source#1']);
    const now = Math.floor(Date.now() / 1000);
    const jwt = signAppJwt(gh.privateKeyPem, { iat: now - 30, exp: now + 500, iss: APP_ID });
    const asApp = await fetch(`${gh.apiUrl}/search/issues?q=org%3Ainitech`, { headers: { authorization: `Bearer ${jwt}` } });
    assert.equal(asApp.status, 403, 'an app JWT cannot search');

    const client = tokenClient(await mint(initech));
    const page1 = await client.rest.search.issuesAndPullRequests({ q: 'org:initech', per_page: 2 });
    assert.equal(page1.data.total_count, 5);
    assert.equal(page1.data.items.length, 2);
    assert.match(page1.headers.link ?? '', /<[^>]*\/api\/v3\/search\/issues\?[^>]*page=2[^>]*>; rel="next"/);
    assert.match(page1.headers.link ?? '', /page=3[^>]*>; rel="last"/);
    const page3 = await client.rest.search.issuesAndPullRequests({ q: 'org:initech', per_page: 2, page: 3 });
    assert.deepEqual(refs(page3.data.items), ['initech/tps#1']);
    const all = await client.paginate(client.rest.search.issuesAndPullRequests, { q: 'org:initech', per_page: 2 });
    assert.deepEqual(refs(all), ['initech/tps#4', 'initech/printer#1', 'initech/tps#3', 'initech/tps#2', 'initech/tps#1']);
  });

  test('issues/{n}/events: labeled, unlabeled, closed, reopened, from helpers and the REST API', async () => {
    const client = tokenClient(await mint(initech));
    const issue = { owner: 'initech', repo: 'tps', issue_number: 2 };
    const listed = async (): Promise<IssueEvent[]> =>
      (await client.paginate(client.rest.issues.listEvents, { ...issue, per_page: 2 })) as unknown as IssueEvent[];
    assert.deepEqual(eventRows(await listed()), ['labeled milton bug', 'labeled milton help wanted'], 'initial labels: labeled by the author');

    await client.rest.issues.addLabels({ ...issue, labels: ['lilypad', 'bug'] });
    await client.rest.issues.removeLabel({ ...issue, name: 'help wanted' });
    await client.rest.issues.setLabels({ ...issue, labels: ['lilypad', 'triaged'] });
    await client.rest.issues.update({ ...issue, labels: ['triaged'] });
    await client.rest.issues.update({ ...issue, state: 'closed' });
    await client.rest.issues.update({ ...issue, state: 'closed' });
    await client.rest.issues.update({ ...issue, state: 'open' });
    gh.unlabelIssue('initech', 'tps', 2, 'triaged', 'mona');
    gh.unlabelIssue('initech', 'tps', 2, 'triaged', 'mona');
    gh.labelIssue('initech', 'tps', 2, 'lilypad', 'mona');
    gh.closeIssue('initech', 'tps', 2, 'milton');
    const deliveriesBefore = gh.deliveries.length;
    gh.labelIssueSilently('initech', 'tps', 2, 'urgent', 'milton');
    assert.equal(gh.deliveries.length, deliveriesBefore, 'labelIssueSilently delivers nothing');

    const events = await listed();
    assert.deepEqual(eventRows(events), [
      'labeled milton bug',
      'labeled milton help wanted',
      'labeled lilypad[bot] lilypad',
      'unlabeled lilypad[bot] help wanted',
      'unlabeled lilypad[bot] bug',
      'labeled lilypad[bot] triaged',
      'unlabeled lilypad[bot] lilypad',
      'closed lilypad[bot]',
      'reopened lilypad[bot]',
      'unlabeled mona triaged',
      'labeled mona lilypad',
      'closed milton',
      'labeled milton urgent',
    ]);
    assert.deepEqual(events, gh.issueEvents('initech', 'tps', 2), 'the inspection helper matches the REST API');
    assert.deepEqual(gh.issue('initech', 'tps', 2).labels.map((l) => l.name), ['lilypad', 'urgent']);

    const ids = events.map((e) => e.id);
    assert.deepEqual([...ids].sort((a, b) => a - b), ids, 'oldest first');
    for (const e of events) {
      const expectedKeys = e.label ? [...ISSUE_EVENT_KEYS, 'label'] : ISSUE_EVENT_KEYS;
      assert.deepEqual(Object.keys(e).sort(), [...expectedKeys].sort());
      assert.equal(e.url, `${gh.apiUrl}/repos/initech/tps/issues/events/${e.id}`);
      assert.equal(e.commit_id, null);
      assert.equal(e.commit_url, null);
      assert.equal(e.performed_via_github_app, null);
      assert.match(e.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      const typeName = { labeled: 'LabeledEvent', unlabeled: 'UnlabeledEvent', closed: 'ClosedEvent', reopened: 'ReopenedEvent' }[e.event];
      assert.equal(Buffer.from(e.node_id, 'base64').toString(), `0${typeName.length}:${typeName}${e.id}`);
    }
    const bot = events.find((e) => e.actor.login === 'lilypad[bot]');
    assert.equal(bot?.actor.type, 'Bot');
    assert.deepEqual(events.find((e) => e.label?.name === 'bug')?.label, { name: 'bug', color: 'd73a4a' });
    assert.deepEqual(events.find((e) => e.label?.name === 'triaged')?.label, { name: 'triaged', color: 'ededed' });

    const page = await client.rest.issues.listEvents({ ...issue, per_page: 5 });
    assert.equal(page.data.length, 5);
    assert.match(page.headers.link ?? '', /rel="next"/);
    assert.match(page.headers.link ?? '', /page=3[^>]*>; rel="last"/);
    assert.deepEqual((await client.rest.issues.listEvents({ owner: 'initech', repo: 'tps', issue_number: 3 })).data.map((e) => e.event), ['closed', 'labeled']);

    // A pull request's state changes are issue events too.
    await client.rest.pulls.update({ owner: 'initech', repo: 'tps', pull_number: 4, state: 'closed' });
    const prEvents = (await client.rest.issues.listEvents({ owner: 'initech', repo: 'tps', issue_number: 4 })).data as unknown as IssueEvent[];
    assert.deepEqual(eventRows(prEvents), ['closed lilypad[bot]']);
  });

  test('issues/{n}/events: authorisation', async () => {
    const printerOnly = tokenClient(await mint(initech, { repositoryNames: ['printer'] }));
    await rejects(printerOnly.rest.issues.listEvents({ owner: 'initech', repo: 'tps', issue_number: 1 }), 404);
    assert.deepEqual(
      (await printerOnly.rest.issues.listEvents({ owner: 'initech', repo: 'printer', issue_number: 1 })).data.map((e) => e.event),
      ['labeled'],
    );
    await rejects(printerOnly.rest.issues.listEvents({ owner: 'initech', repo: 'printer', issue_number: 99 }), 404);
    const noIssues = tokenClient(await mint(initech, { permissions: { contents: 'read' } }));
    const denied = await rejects(noIssues.rest.issues.listEvents({ owner: 'initech', repo: 'tps', issue_number: 1 }), 403);
    assert.equal(errorBody(denied).message, 'Resource not accessible by integration');
    assert.equal(denied.response?.headers['x-accepted-github-permissions'], 'issues=read; pull_requests=read');
    const publicRepo = await tokenClient(await mint(initech)).rest.issues.listEvents({ owner: 'hooli', repo: 'open-source', issue_number: 1 });
    assert.deepEqual(publicRepo.data.map((e) => [e.event, e.actor?.login]), [['labeled', 'gavin']]);
  });
});
