/**
 * The GitHub stand-in's review loop surface, through real clients: reviews and review comments over
 * REST, review threads over GraphQL (`/api/graphql`, through Octokit's own graphql()), reactions,
 * the webhook payloads of reviews, review comments, PR conversation comments and closed pull
 * requests, and the injected faults (secondary rate limits, 502 on git push) with real git.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createAppAuth } from '@octokit/auth-app';
import { request as octokitRequest } from '@octokit/request';
import { RequestError } from '@octokit/request-error';
import { Octokit } from '@octokit/rest';
import { startGitHubStandin, webhookExample } from '../support/github-standin/index.ts';
import type { GitHubStandin } from '../support/github-standin/index.ts';

let gh: GitHubStandin;
let installationId: number;
let app: Octokit;
let token: string;
let pr: number;
const tmpDirs: string[] = [];

const CALC = ['def add(a, b):', '    return a - b', '', '', 'def sub(a, b):', '    return a - b', ''].join('\n');
const CALC_FIXED = ['def add(a, b):', '    return a + b', '', '', 'def sub(a, b):', '    return a - b', '', 'def mul(a, b):', '    return a * b', ''].join('\n');

async function mint(): Promise<string> {
  const auth = createAppAuth({ appId: gh.appId, privateKey: gh.privateKeyPem, request: octokitRequest.defaults({ baseUrl: gh.apiUrl }) });
  return (await auth({ type: 'installation', installationId })).token;
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

function git(args: string[], cwd?: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'git',
      ['-c', 'credential.helper=', '-c', 'user.name=Test', '-c', 'user.email=test@localhost', ...args],
      { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir(), GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' }, timeout: 30_000 },
      (err, _stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr: String(stderr) }),
    );
  });
}
/** Top-level keys; `organization` is only there for organisation-owned repositories (the examples come from a user's). */
const payloadKeys = (p: object): string[] => Object.keys(p).filter((k) => k !== 'organization').sort();
const authHeader = (t: string): string[] => ['-c', `http.extraHeader=Authorization: Basic ${Buffer.from(`x-access-token:${t}`).toString('base64')}`];

before(async () => {
  gh = await startGitHubStandin({ appSlug: 'lilypad' });
  installationId = gh.createInstallation({ login: 'acme', type: 'Organization' }).id;
  gh.createRepo('acme', 'calc', { files: { 'calc.py': CALC, 'README.md': '# calc\n' } });
  gh.addCollaborator('acme', 'calc', 'alice', 'write');
  gh.createUser('mallory');
  gh.createUser('renovate[bot]', { type: 'Bot' });
  token = await mint();
  app = new Octokit({ baseUrl: gh.apiUrl, auth: token, log: { debug() {}, info() {}, warn() {}, error() {} } });
  gh.createBranch('acme', 'calc', 'lilypad/issue-1', { 'calc.py': CALC_FIXED }, { author: 'lilypad[bot]', message: 'Fix add' });
  const created = await app.request('POST /repos/{owner}/{repo}/pulls', { owner: 'acme', repo: 'calc', title: 'Fix add', head: 'lilypad/issue-1', base: 'main', draft: true });
  pr = created.data.number;
});

after(async () => {
  await gh.close();
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
});

describe('reviews', () => {
  test('a submitted review: webhook payload in GitHub’s shape (lower-case state), REST list upper-case', async () => {
    const payload = gh.submitReview('acme', 'calc', pr, { author: 'alice', state: 'CHANGES_REQUESTED', body: 'add() still subtracts in one case' });
    assert.deepEqual(payloadKeys(payload), payloadKeys(webhookExample('pull_request_review', 'submitted') ?? {}));
    const review = payload.review as Record<string, unknown>;
    assert.equal(payload.action, 'submitted');
    assert.equal(review.state, 'changes_requested');
    assert.equal((review.user as { login: string }).login, 'alice');
    assert.equal(review.author_association, 'COLLABORATOR');
    assert.equal((payload.pull_request as { number: number }).number, pr);
    assert.equal(review.commit_id, gh.branchSha('acme', 'calc', 'lilypad/issue-1'));

    const list = await app.request('GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews', { owner: 'acme', repo: 'calc', pull_number: pr });
    const got = list.data.find((r) => r.id === review.id);
    assert.ok(got);
    assert.equal(got.state, 'CHANGES_REQUESTED');
    assert.equal(got.body, 'add() still subtracts in one case');
    assert.equal(got.node_id, review.node_id);
  });

  test('the app can comment but not approve its own pull request; REQUEST_CHANGES needs a body', async () => {
    const c = await app.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews', { owner: 'acme', repo: 'calc', pull_number: pr, event: 'COMMENT', body: 'noted' });
    assert.equal(c.data.state, 'COMMENTED');
    assert.equal(c.data.user?.login, 'lilypad[bot]');
    const e = await rejects(app.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews', { owner: 'acme', repo: 'calc', pull_number: pr, event: 'APPROVE' }), 422);
    assert.match(JSON.stringify(e.response?.data), /Can not approve your own pull request/);
    gh.createUser('carol');
    await rejects(app.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews', { owner: 'acme', repo: 'calc', pull_number: pr, event: 'NOPE' as 'COMMENT' }), 422);
    // Refused by the conformance check (the description lists the events), on purpose here.
    assert.match(gh.takeConformanceViolations().join('\n'), /\/event must be equal to one of the allowed values/);
  });
});

describe('review comments and threads', () => {
  let rootId: number;

  test('a comment on a line: diff_hunk ends at the line, position counts diff lines; REST and webhook agree', async () => {
    const payload = gh.commentOnLine('acme', 'calc', pr, { author: 'alice', path: 'calc.py', line: 9, body: 'mul needs a test' });
    assert.deepEqual(payloadKeys(payload), payloadKeys(webhookExample('pull_request_review_comment', 'created') ?? {}));
    const c = payload.comment as Record<string, unknown>;
    rootId = c.id as number;
    assert.equal(c.path, 'calc.py');
    assert.equal(c.line, 9);
    assert.equal(c.original_line, 9);
    assert.equal(c.side, 'RIGHT');
    assert.equal(typeof c.position, 'number');
    assert.equal(c.in_reply_to_id, undefined);
    const hunk = String(c.diff_hunk);
    assert.match(hunk, /^@@ -\d+(,\d+)? \+\d+(,\d+)? @@/);
    assert.ok(hunk.endsWith('+    return a * b'), hunk);
    const rest = await app.request('GET /repos/{owner}/{repo}/pulls/comments/{comment_id}', { owner: 'acme', repo: 'calc', comment_id: rootId });
    assert.equal(rest.data.diff_hunk, hunk);
    assert.equal(rest.data.pull_request_review_id, c.pull_request_review_id);
    // A line comment outside a review comes wrapped in a COMMENTED review with an empty body.
    const wrapper = gh.reviews('acme', 'calc', pr).find((r) => r.id === c.pull_request_review_id);
    assert.equal(wrapper?.state, 'COMMENTED');
    assert.equal(wrapper?.body, '');
  });

  test('replies (both REST forms) join the thread and point at its first comment; a line outside the diff is 422', async () => {
    const r1 = gh.replyToReviewComment(rootId, 'and one for negatives', 'mallory');
    const replyId = (r1.comment as { id: number }).id;
    const r2 = await app.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies', { owner: 'acme', repo: 'calc', pull_number: pr, comment_id: replyId, body: 'Added in abc1234.' });
    assert.equal(r2.status, 201);
    assert.equal(r2.data.in_reply_to_id, rootId);
    const r3 = await app.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/comments', { owner: 'acme', repo: 'calc', pull_number: pr, body: 'older form', in_reply_to: rootId } as never);
    assert.equal((r3.data as { in_reply_to_id?: number }).in_reply_to_id, rootId);
    const threads = gh.reviewThreads('acme', 'calc', pr);
    const t = threads.find((x) => x.rootCommentId === rootId);
    assert.equal(t?.commentIds.length, 4);

    const head = gh.branchSha('acme', 'calc', 'lilypad/issue-1') ?? '';
    const bad = await rejects(app.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/comments', { owner: 'acme', repo: 'calc', pull_number: pr, body: 'x', commit_id: head, path: 'README.md', line: 1 }), 422);
    assert.match(JSON.stringify(bad.response?.data), /pull_request_review_thread\.line/);
    const ok = await app.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/comments', { owner: 'acme', repo: 'calc', pull_number: pr, body: 'on the fix', commit_id: head, path: 'calc.py', line: 2 });
    assert.equal(ok.data.line, 2);
    assert.match(ok.data.diff_hunk, /\+ {4}return a \+ b$/);
  });

  test('outdating a thread nulls position and line over REST, keeps original_line', async () => {
    const p = gh.commentOnLine('acme', 'calc', pr, { author: 'alice', path: 'calc.py', line: 2, body: 'soon outdated' });
    const id = (p.comment as { id: number }).id;
    gh.outdateReviewThread(id);
    const list = await app.request('GET /repos/{owner}/{repo}/pulls/{pull_number}/comments', { owner: 'acme', repo: 'calc', pull_number: pr, per_page: 100 });
    const c = list.data.find((x) => x.id === id);
    assert.ok(c);
    assert.equal(c.position, null);
    assert.equal(c.line, null);
    assert.equal(c.original_line, 2);
    const current = list.data.find((x) => x.id === rootId);
    assert.equal(current?.line, 9);
  });

  test('GraphQL reviewThreads: resolution, outdating, bot logins without [bot], pagination', async () => {
    const bot = gh.commentOnLine('acme', 'calc', pr, { author: 'renovate[bot]', path: 'calc.py', line: 8, body: 'bot says hi' });
    const botId = (bot.comment as { id: number }).id;
    gh.resolveReviewThread(botId, 'alice');
    const query = `query($owner: String!, $name: String!, $number: Int!, $after: String) {
      repository(owner: $owner, name: $name) { pullRequest(number: $number) {
        reviewThreads(first: 2, after: $after) {
          nodes { id isResolved isOutdated path line comments(first: 10) { nodes { databaseId body author { __typename login } createdAt diffHunk outdated } } }
          pageInfo { hasNextPage endCursor }
        } } } }`;
    type Reply = { repository: { pullRequest: { reviewThreads: { nodes: Array<{ id: string; isResolved: boolean; isOutdated: boolean; path: string; line: number | null; comments: { nodes: Array<{ databaseId: number; author: { __typename: string; login: string } | null; outdated: boolean; diffHunk: string }> } }>; pageInfo: { hasNextPage: boolean; endCursor: string | null } } } } };
    const nodes: Reply['repository']['pullRequest']['reviewThreads']['nodes'] = [];
    let after: string | null = null;
    let pages = 0;
    for (;;) {
      const page: Reply = await app.graphql<Reply>(query, { owner: 'acme', name: 'calc', number: pr, after });
      pages++;
      nodes.push(...page.repository.pullRequest.reviewThreads.nodes);
      if (!page.repository.pullRequest.reviewThreads.pageInfo.hasNextPage) break;
      after = page.repository.pullRequest.reviewThreads.pageInfo.endCursor;
    }
    const expected = gh.reviewThreads('acme', 'calc', pr);
    assert.equal(nodes.length, expected.length);
    assert.ok(pages >= 2, 'paginated with first: 2');
    assert.deepEqual(nodes.map((n) => n.id), expected.map((t) => t.id));
    const resolved = nodes.find((n) => n.comments.nodes[0]?.databaseId === botId);
    assert.equal(resolved?.isResolved, true);
    assert.deepEqual(resolved?.comments.nodes[0]?.author, { __typename: 'Bot', login: 'renovate' });
    const outdated = nodes.filter((n) => n.isOutdated);
    assert.equal(outdated.length, 1);
    assert.equal(outdated[0]?.line, null);
    assert.equal(outdated[0]?.comments.nodes[0]?.outdated, true);
    const root = nodes.find((n) => n.comments.nodes[0]?.databaseId === rootId);
    assert.equal(root?.comments.nodes.length, 4);
    assert.equal(root?.isResolved, false);
    assert.equal(root?.line, 9);
    assert.ok(gh.requests.some((r) => r.method === 'POST' && r.path === '/api/graphql'), 'Octokit sent GraphQL to /api/graphql');
  });

  test('GraphQL refuses what it does not serve the way GitHub does; switched off it is a 404', async () => {
    const unknown = await app.request('POST /graphql', { baseUrl: gh.apiUrl.replace(/\/v3$/, ''), query: '{ viewer { login } }' });
    assert.equal(unknown.status, 200);
    assert.deepEqual((unknown.data as { errors: Array<{ extensions: { code: string } }> }).errors.map((e) => e.extensions.code), ['undefinedField']);
    assert.equal((unknown.data as { data?: unknown }).data, undefined);
    const noFirst = await app.graphql<{ repository: unknown }>('{ repository(owner: "acme", name: "calc") { pullRequest(number: 1) { reviewThreads { nodes { id } } } } }').catch((e: unknown) => e);
    assert.match(String((noFirst as Error).message), /You must provide a `first` or `last` value/);
    const missing = await app.graphql('{ repository(owner: "acme", name: "nope") { name } }').catch((e: unknown) => e);
    assert.match(String((missing as Error).message), /Could not resolve to a Repository with the name 'acme\/nope'/);

    gh.setGraphqlEnabled(false);
    try {
      await rejects(app.request('POST /graphql', { baseUrl: gh.apiUrl.replace(/\/v3$/, ''), query: '{ repository(owner: "acme", name: "calc") { name } }' }), 404);
    } finally {
      gh.setGraphqlEnabled(true);
    }
  });
});

describe('reactions', () => {
  test('eyes on a review comment and on an issue comment over REST; on a review only through GraphQL addReaction', async () => {
    const c = gh.commentOnLine('acme', 'calc', pr, { author: 'alice', path: 'calc.py', line: 9, body: '/lilypad add a test' });
    const commentId = (c.comment as { id: number }).id;
    const r = await app.request('POST /repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions', { owner: 'acme', repo: 'calc', comment_id: commentId, content: 'eyes' });
    assert.equal(r.status, 201);
    assert.deepEqual(gh.reviewCommentReactions(commentId).map((x) => [x.user.login, x.content]), [['lilypad[bot]', 'eyes']]);
    const again = await app.request('POST /repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions', { owner: 'acme', repo: 'calc', comment_id: commentId, content: 'eyes' });
    assert.equal(again.status, 200, 'the same reaction twice is 200, not a second one');

    const ic = gh.commentOnPullRequest('acme', 'calc', pr, '/lilypad also docs', 'alice');
    const icId = (ic.comment as { id: number }).id;
    await app.request('POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions', { owner: 'acme', repo: 'calc', comment_id: icId, content: 'eyes' });
    assert.deepEqual(gh.reactions(icId).map((x) => x.content), ['eyes']);

    const review = gh.submitReview('acme', 'calc', pr, { author: 'alice', state: 'COMMENTED', body: '/lilypad tidy up' }).review as { id: number; node_id: string };
    const res = await app.graphql<{ addReaction: { reaction: { content: string }; subject: { id: string } } }>(
      'mutation($id: ID!) { addReaction(input: { subjectId: $id, content: EYES }) { reaction { content } subject { id } } }',
      { id: review.node_id },
    );
    assert.deepEqual(res.addReaction, { reaction: { content: 'EYES' }, subject: { id: review.node_id } });
    assert.deepEqual(gh.reviewReactions(review.id).map((x) => [x.user.login, x.content]), [['lilypad[bot]', 'eyes']]);
  });
});

describe('webhook payloads of the review loop', () => {
  test('issue_comment on a pull request has issue.pull_request; pull_request.closed carries the merged state', async () => {
    const p = gh.commentOnPullRequest('acme', 'calc', pr, 'looks better', 'alice', { at: new Date('2024-05-01T00:00:00Z') });
    assert.deepEqual(payloadKeys(p), payloadKeys(webhookExample('issue_comment', 'created') ?? {}));
    const issue = p.issue as { number: number; pull_request?: { url: string } };
    assert.equal(issue.number, pr);
    assert.equal(issue.pull_request?.url, `${gh.apiUrl}/repos/acme/calc/pulls/${pr}`);
    assert.equal((p.comment as { created_at: string }).created_at, '2024-05-01T00:00:00Z');

    gh.createBranch('acme', 'calc', 'other', { 'other.txt': 'x\n' });
    const other = gh.createPullRequest('acme', 'calc', { head: 'other', title: 'Other', author: 'alice', draft: false });
    const closed = gh.closePullRequest('acme', 'calc', other.number, 'alice', { merged: true });
    assert.deepEqual(payloadKeys(closed), payloadKeys(webhookExample('pull_request', 'closed') ?? {}));
    assert.equal(closed.action, 'closed');
    assert.equal(closed.number, other.number);
    const pull = closed.pull_request as { state: string; merged: boolean; merged_at: string | null };
    assert.equal(pull.state, 'closed');
    assert.equal(pull.merged, true);
    assert.ok(pull.merged_at);
    assert.equal(gh.readFile('acme', 'calc', 'main', 'other.txt'), 'x\n');
  });
});

describe('injected faults', () => {
  test('secondary rate limit: 403 with retry-after and GitHub’s message (remaining stays above 0), then the 429 form', async () => {
    const matchComments = (r: { method: string; path: string }): boolean => r.method === 'POST' && r.path === `/repos/acme/calc/issues/${pr}/comments`;
    const handle = gh.rateLimitApiRequests({ match: matchComments, times: 1, retryAfterSeconds: 7 });
    const e = await rejects(app.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', { owner: 'acme', repo: 'calc', issue_number: pr, body: 'one' }), 403);
    assert.equal(e.response?.headers['retry-after'], '7');
    assert.ok(Number(e.response?.headers['x-ratelimit-remaining']) > 0);
    assert.match(String((e.response?.data as { message: string }).message), /^You have exceeded a secondary rate limit/);
    assert.equal(handle.hits, 1);
    const ok = await app.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', { owner: 'acme', repo: 'calc', issue_number: pr, body: 'two' });
    assert.equal(ok.status, 201, 'the rule retired after its one failure');

    gh.rateLimitApiRequests({ match: (r) => r.method === 'GET' && r.path === '/repos/acme/calc/pulls/' + pr + '/reviews', status: 429, times: 2 });
    const t1 = await rejects(app.request('GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews', { owner: 'acme', repo: 'calc', pull_number: pr }), 429);
    assert.equal(t1.response?.headers['retry-after'], '1');
    await rejects(app.request('GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews', { owner: 'acme', repo: 'calc', pull_number: pr }), 429);
    assert.equal((await app.request('GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews', { owner: 'acme', repo: 'calc', pull_number: pr })).status, 200);
  });

  test('HTTP 502 on git push, n times; fetches are untouched; then the push goes through', async () => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'standin-push-'));
    tmpDirs.push(work);
    const t = await mint();
    assert.equal((await git([...authHeader(t), 'clone', '--quiet', `${gh.origin}/acme/calc.git`, work])).code, 0);
    writeFileSync(path.join(work, 'NEW.md'), 'new\n');
    assert.equal((await git(['add', 'NEW.md'], work)).code, 0);
    assert.equal((await git(['commit', '--quiet', '-m', 'new'], work)).code, 0);
    const handle = gh.failGitPushes({ times: 2 });
    for (let i = 0; i < 2; i++) {
      const push = await git([...authHeader(t), 'push', 'origin', 'HEAD:refs/heads/pushed'], work);
      assert.notEqual(push.code, 0);
      assert.match(push.stderr, /502/);
    }
    assert.equal(handle.hits, 2);
    assert.equal(gh.branchSha('acme', 'calc', 'pushed'), null, 'nothing arrived');
    assert.equal((await git([...authHeader(t), 'fetch', '--quiet', 'origin'], work)).code, 0, 'fetches are not failed');
    const push = await git([...authHeader(t), 'push', '--quiet', 'origin', 'HEAD:refs/heads/pushed'], work);
    assert.equal(push.code, 0, push.stderr);
    assert.ok(gh.branchSha('acme', 'calc', 'pushed'));
    assert.deepEqual(gh.requests.filter((r) => r.kind === 'git' && r.path.endsWith('git-receive-pack') && r.method === 'POST').map((r) => r.status), [502, 502, 200]);
  });
});
