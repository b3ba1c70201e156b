/**
 * The stand-in holds REST traffic to GitHub's published descriptions (conformance.ts): what it
 * refuses and records, what it lets through, and that a violation fails the very test that made it.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { APP_TOKEN_EXCEPTIONS, checkRequest, checkResponse } from '../support/github-standin/conformance.ts';
import { signAppJwt, startGitHubStandin, type GitHubStandin } from '../support/github-standin/index.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const q = (s = '') => new URLSearchParams(s);

describe('requests and answers held to the descriptions', () => {
  test('operation, path and query parameters', () => {
    assert.deepEqual(checkRequest({ method: 'GET', pathname: '/repos/a/b/issues/3/comments', query: q('per_page=100&page=2'), body: undefined, auth: 'installation' }), []);
    assert.match(checkRequest({ method: 'GET', pathname: '/repos/a/b/no-such-thing', query: q(), body: undefined, auth: 'installation' }).join('\n'), /api\.github\.com: no operation GET/);
    assert.match(checkRequest({ method: 'PUT', pathname: '/repos/a/b/issues/3', query: q(), body: undefined, auth: 'installation' }).join('\n'), /other methods/);
    assert.match(checkRequest({ method: 'GET', pathname: '/repos/a/b/issues/three', query: q(), body: undefined, auth: 'installation' }).join('\n'), /path parameter issue_number=three: must be integer/);
    assert.match(checkRequest({ method: 'GET', pathname: '/repos/a/b/pulls', query: q('state=merged'), body: undefined, auth: 'installation' }).join('\n'), /query parameter state=merged: must be equal to one of/);
    assert.match(checkRequest({ method: 'GET', pathname: '/repos/a/b/contents/src/x.py', query: q('per_page=5'), body: undefined, auth: 'installation' }).join('\n'), /query parameter per_page is not described/);
    assert.match(checkRequest({ method: 'GET', pathname: '/search/issues', query: q(), body: undefined, auth: 'installation' }).join('\n'), /required query parameter q is missing/);
  });

  test('the JSON body: its schema, and no property the description lacks', () => {
    const pr = { title: 't', head: 'lilypad/issue-1', base: 'main', body: 'b', draft: true };
    assert.deepEqual(checkRequest({ method: 'POST', pathname: '/repos/a/b/pulls', query: q(), body: pr, auth: 'installation' }), []);
    const extra = checkRequest({ method: 'POST', pathname: '/repos/a/b/pulls', query: q(), body: { ...pr, labels: ['x'] }, auth: 'installation' });
    assert.match(extra.join('\n'), /\(body\)\.labels is not in the description/);
    assert.equal(extra.length, 2, 'one line per description');
    assert.match(checkRequest({ method: 'POST', pathname: '/repos/a/b/pulls', query: q(), body: { ...pr, draft: 'yes' }, auth: 'installation' }).join('\n'), /body \/draft must be boolean/);
    assert.match(checkRequest({ method: 'POST', pathname: '/repos/a/b/issues/1/comments', query: q(), body: undefined, auth: 'installation' }).join('\n'), /the request body is required/);
    assert.match(checkRequest({ method: 'GET', pathname: '/repos/a/b', query: q(), body: { x: 1 }, auth: 'installation' }).join('\n'), /takes no JSON body/);
  });

  test('installation tokens only where the description allows GitHub Apps, with the commented exceptions', () => {
    // GET /repos/{owner}/{repo}/installation is for the app's JWT, not an installation token.
    assert.deepEqual(checkRequest({ method: 'GET', pathname: '/repos/a/b/installation', query: q(), body: undefined, auth: 'app' }), []);
    assert.match(checkRequest({ method: 'GET', pathname: '/repos/a/b/installation', query: q(), body: undefined, auth: 'installation' }).join('\n'), /not available to GitHub Apps/);
    const reply = { method: 'POST', pathname: '/repos/a/b/pulls/2/comments/9/replies', query: q(), body: { body: 'done' } } as const;
    assert.ok(APP_TOKEN_EXCEPTIONS.has('POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies'));
    assert.deepEqual(checkRequest({ ...reply, auth: 'installation' }), []);
  });

  test('answers: the response schema of the status given', () => {
    assert.match(checkResponse('GET', '/repos/a/b/issues/1', 200, { id: 1 }).join('\n'), /answer 200 \(body\) must have required property 'node_id'/);
    assert.match(checkResponse('POST', '/repos/a/b/issues/1/comments', 200, {}).join('\n'), /answered 200, which the description does not list/);
    assert.deepEqual(checkResponse('GET', '/repos/a/b/issues/1', 404, { message: 'Not Found', documentation_url: 'x' }), []);
  });
});

describe('a request that does not conform, through the running stand-in', () => {
  let gh: GitHubStandin;
  let token = '';
  before(async () => {
    gh = await startGitHubStandin({ appSlug: 'lilypad' });
    const inst = gh.createInstallation({ login: 'acme', type: 'Organization' });
    gh.createRepo('acme', 'widgets');
    gh.createIssue('acme', 'widgets', { title: 'One', author: 'acme' });
    const now = Math.floor(Date.now() / 1000);
    const jwt = signAppJwt(gh.privateKeyPem, { iat: now - 30, exp: now + 300, iss: gh.appId });
    const res = await fetch(`${gh.apiUrl}/app/installations/${inst.id}/access_tokens`, { method: 'POST', headers: { authorization: `Bearer ${jwt}` } });
    token = ((await res.json()) as { token: string }).token;
  });
  after(() => gh.close());

  test('is answered 422 with what is wrong, changes nothing, and is recorded', async () => {
    const res = await fetch(`${gh.apiUrl}/repos/acme/widgets/issues/1/comments`, { method: 'POST', headers: { authorization: `token ${token}` }, body: JSON.stringify({ body: 'hi', sticky: true }) });
    assert.equal(res.status, 422);
    assert.match(((await res.json()) as { message: string }).message, /\(body\)\.sticky is not in the description/);
    assert.equal(gh.comments('acme', 'widgets', 1).length, 0);
    const taken = gh.takeConformanceViolations();
    assert.equal(taken.length, 1);
    assert.match(taken[0]!, /^POST \/repos\/acme\/widgets\/issues\/1\/comments \{"body":"hi","sticky":true\}/);
    assert.deepEqual(gh.takeConformanceViolations(), [], 'taken once');
  });

  test('fails the test that sent it, not the one before or after (node --test in a child)', () => {
    const env = { ...process.env };
    delete env['NODE_TEST_CONTEXT']; // a run of its own, not a subtest of this one
    const file = 'test/fixtures/conformance/offending.test.ts';
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', file], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
    const out = run.stdout + run.stderr;
    assert.notEqual(run.status, 0, out);
    assert.match(out, /✔ conforming comment/);
    assert.match(out, /✖ offending comment[\s\S]*\(body\)\.sticky is not in the description/);
    assert.match(out, /✔ a later conforming comment/);
    assert.match(out, /ℹ fail 1\b/);
  });
});
