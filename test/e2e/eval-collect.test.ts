import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { z } from 'zod';
import { loadEnv } from '../../src/config/env.ts';
import { parseInstances } from '../../src/eval/instance.ts';
import { AppRepoAuth, RepoCache } from '../../src/eval/repo-source.ts';
import { startGitHubStandin, type GitHubStandin } from '../support/github-standin/index.ts';
import { runEvalCli } from '../fixtures/eval/cli.ts';
import { CALC_FILES, CALC_FIXED, CALC_TEST_WITH_ADD } from '../fixtures/eval/instances.ts';

const OWNER = 'acme';

/** Every file under `root`, recursively. */
const filesUnder = (root: string): string[] =>
  readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
const REPO = 'calc';

const skippedSchema = z.strictObject({
  issue: z.number().int(),
  instance_id: z.string(),
  html_url: z.string(),
  reason: z.string(),
  detail: z.string(),
  pull_request: z.number().int().optional(),
});

/**
 * A repository's history in the stand-in: issues fixed by merged pull requests (with and without
 * tests), one linked only to an unmerged pull request, one closed by hand. `lilypad eval collect`
 * runs as the GitHub App (a private repository, a read-only installation token over REST and git)
 * and its output is then validated by `lilypad eval run --validate`, which fetches the private
 * repository as the app too.
 */
describe('lilypad eval collect', () => {
  let gh: GitHubStandin;
  let dir: string;
  let mainBeforeFix: string;
  let appEnv: Record<string, string>;
  const file = (name: string, content: string) => ({ [name]: content });

  before(async () => {
    gh = await startGitHubStandin();
    gh.createInstallation({ login: OWNER, type: 'Organization' });
    gh.createUser('alice');
    gh.createRepo(OWNER, REPO, { files: { ...CALC_FILES, '.github/lilypad.yml': 'test: python3 -m unittest\n' } });

    appEnv = { APP_ID: String(gh.appId), PRIVATE_KEY: gh.privateKeyPem, GHE_HOST: gh.host, GHE_PROTOCOL: 'http' };
    dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-collect-test-'));

    // (a) #1, fixed by #2: the fix in calc.py and a failing-then-passing test in test_calc.py.
    // main moves on before the merge, so the pull request's base is not main's tip at merge time.
    gh.createIssue(OWNER, REPO, { title: 'add() returns the wrong result', body: 'add(2, 3) gives -1 instead of 5.', author: 'alice' });
    mainBeforeFix = gh.branchSha(OWNER, REPO, 'main')!;
    gh.createBranch(OWNER, REPO, 'fix-add', { 'calc.py': CALC_FIXED, 'test_calc.py': CALC_TEST_WITH_ADD }, { message: 'Fix add()' });
    gh.createPullRequest(OWNER, REPO, { head: 'fix-add', title: 'Fix add()', body: 'Fixes #1', author: 'alice', draft: false });
    gh.setFile(OWNER, REPO, 'README.md', '# calc\n\nA calculator.\n');
    gh.mergePullRequest(OWNER, REPO, 2, 'alice');

    // (b) #3, referenced only by #4, which stays open; the issue was closed by hand.
    gh.createIssue(OWNER, REPO, { title: 'mul() is slow', body: 'It could be faster.', author: 'alice' });
    gh.createBranch(OWNER, REPO, 'faster-mul', { 'calc.py': `${CALC_FIXED}\n# faster\n` });
    gh.createPullRequest(OWNER, REPO, { head: 'faster-mul', title: 'Faster mul()', body: 'Fixes #3', author: 'alice', draft: false });
    gh.closeIssue(OWNER, REPO, 3, 'alice');

    // (c) #5, fixed by #6, which changes no test; #6 also mentions #1 (a second merged pull request
    // referencing #1 that did not close it).
    gh.createIssue(OWNER, REPO, { title: 'there is no sub()', body: 'Please add sub().', author: 'alice' });
    gh.createBranch(OWNER, REPO, 'add-sub', { 'calc.py': `${CALC_FIXED}\n\ndef sub(a, b):\n    return a - b\n` });
    gh.createPullRequest(OWNER, REPO, { head: 'add-sub', title: 'Add sub()', body: 'Fixes #5. Written after the fix for #1.', author: 'alice', draft: false });
    gh.mergePullRequest(OWNER, REPO, 6, 'alice');

    // (d) #7, "fixed" by #8: a docstring, and a test that passed before the change already.
    gh.createIssue(OWNER, REPO, { title: 'mul() lacks a test for negatives', body: 'Is mul(-2, 3) right?', author: 'alice' });
    const calcNow = gh.readFile(OWNER, REPO, 'main', 'calc.py')!;
    const testNow = gh.readFile(OWNER, REPO, 'main', 'test_calc.py')!;
    gh.createBranch(OWNER, REPO, 'mul-neg', {
      ...file('calc.py', calcNow.replace('def mul(a, b):\n', 'def mul(a, b):\n    """The product of a and b."""\n')),
      ...file('test_calc.py', testNow.replace('    def test_mul(self):', '    def test_mul_negative(self):\n        self.assertEqual(mul(-2, 3), -6)\n\n    def test_mul(self):')),
    });
    gh.createPullRequest(OWNER, REPO, { head: 'mul-neg', title: 'Document mul()', body: 'Closes #7', author: 'alice', draft: false });
    gh.mergePullRequest(OWNER, REPO, 8, 'alice', { method: 'squash' });

    // (e) #9, closed by hand, never referenced.
    gh.createIssue(OWNER, REPO, { title: 'Question about div()', body: 'Will there be one?', author: 'alice' });
    gh.closeIssue(OWNER, REPO, 9, 'alice');
  });
  after(async () => {
    await gh?.close();
  });

  test('the stand-in records the history as GitHub does: merge commits, closing commits, cross-references, closed issues by since', () => {
    const [fix] = gh.pulls(OWNER, REPO).filter((p) => p.number === 2);
    assert.equal(fix!.merged_at !== null, true);
    assert.match(fix!.merge_commit_sha ?? '', /^[0-9a-f]{40}$/);
    const closed = gh.issueEvents(OWNER, REPO, 1).filter((e) => e.event === 'closed');
    assert.deepEqual(closed.map((e) => e.commit_id), [fix!.merge_commit_sha]);
    assert.deepEqual(gh.issueEvents(OWNER, REPO, 3).filter((e) => e.event === 'closed').map((e) => e.commit_id), [null]);
    assert.equal(gh.issue(OWNER, REPO, 5).state, 'closed');
    assert.equal(gh.issue(OWNER, REPO, 7).state, 'closed');
    assert.equal(gh.pulls(OWNER, REPO).find((p) => p.number === 4)!.state, 'open');
  });

  test('collects the issue fixed with a new failing test, skips the rest with reasons; eval run --validate accepts the output', async () => {
    const out = path.join(dir, 'calc.jsonl');
    const requestsBefore = gh.requests.length;
    const run = await runEvalCli(['collect', '--repo', `${OWNER}/${REPO}`, '--out', out], appEnv);
    assert.equal(run.code, 0, run.stderr + run.stdout);
    assert.match(run.stdout, /^1 instance\(s\) written to .*calc\.jsonl from 5 closed issue\(s\)$/m);
    assert.match(run.stdout, /^4 skipped \(.*\): .*calc\.skipped\.jsonl$/m);

    // (a): one instance, with the pull request's base, its fix and its tests apart, and the tests found by running them.
    const loaded = parseInstances(readFileSync(out, 'utf8'));
    assert.deepEqual(loaded.problems, []);
    assert.equal(loaded.instances.length, 1);
    const inst = loaded.instances[0]!;
    assert.equal(inst.instance_id, 'acme__calc-1');
    assert.equal(inst.repo, 'acme/calc');
    assert.equal(inst.base_commit, mainBeforeFix);
    assert.equal(inst.problem_statement, 'add() returns the wrong result\nadd(2, 3) gives -1 instead of 5.');
    assert.deepEqual(inst.FAIL_TO_PASS, ['test_calc.CalcTest.test_add']);
    assert.deepEqual(inst.PASS_TO_PASS, ['test_calc.CalcTest.test_mul']);
    assert.equal(inst.test_command, 'python3 -m unittest');
    assert.deepEqual([...inst.patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1]), ['calc.py']);
    assert.match(inst.patch, /^-    return a - b\n\+    return a \+ b$/m);
    assert.deepEqual([...inst.test_patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1]), ['test_calc.py']);
    assert.match(inst.test_patch, /^\+    def test_add\(self\):$/m);
    assert.equal((inst as Record<string, unknown>)['pull_number'], 2);
    assert.doesNotMatch(inst.patch + inst.test_patch, /README/, 'main moving on after the branch point is not part of the change');

    // Everything else, with why, on stderr and in the skipped file.
    const skipped = readFileSync(path.join(dir, 'calc.skipped.jsonl'), 'utf8').trim().split('\n').map((l) => skippedSchema.parse(JSON.parse(l)));
    const why = Object.fromEntries(skipped.map((s) => [s.issue, s.reason]));
    assert.deepEqual(why, { 3: 'pr_not_merged', 5: 'no_test_changes', 7: 'no_fail_to_pass', 9: 'no_linked_pr' });
    assert.match(skipped.find((s) => s.issue === 3)!.detail, /#4 \(open\)/);
    assert.match(skipped.find((s) => s.issue === 5)!.detail, /#6 changes no test file \(calc\.py\)/);
    assert.match(skipped.find((s) => s.issue === 7)!.detail, /no test fails with the test changes only and passes with the fix/);
    assert.equal(skipped.find((s) => s.issue === 7)!.pull_request, 8);
    assert.match(run.stderr, /skipped #3 \(pr not merged\)/);
    assert.match(run.stderr, /skipped #9 \(no linked pr\): no pull request references the issue/);
    assert.match(run.stderr, /#1 → acme__calc-1 \(FAIL_TO_PASS 1, PASS_TO_PASS 1\)/);

    // As the app: one installation token, read-only, for this repository, sent as a header (never in
    // a URL), on every REST and git request; revoked at the end.
    const mine = gh.requests.slice(requestsBefore);
    const tokens = gh.tokens();
    assert.equal(tokens.length, 1);
    const [token] = tokens;
    assert.deepEqual(token!.repositories, [REPO]);
    assert.deepEqual(token!.permissions, { contents: 'read', issues: 'read', pull_requests: 'read', metadata: 'read' });
    assert.ok(token!.expiresAt.getTime() <= Date.now(), 'the token was revoked');
    const git = mine.filter((r) => r.kind === 'git');
    assert.ok(git.length > 0);
    for (const r of mine) {
      assert.ok(!r.path.includes(token!.token), `no token in ${r.path}`);
      if (r.kind === 'git' || (r.path.startsWith('/api/v3/repos/') && !r.path.endsWith('/installation'))) assert.equal(r.token, token!.token, `${r.method} ${r.path} used the token`);
    }
    assert.ok(mine.some((r) => r.path.startsWith(`/api/v3/repos/${OWNER}/${REPO}/issues?`) && /state=closed/.test(r.path)));

    // The output is what `lilypad eval run` takes; the repository stays private. Without the app's
    // credentials the anonymous clone fails and says what to set.
    const anonymous = await runEvalCli(['run', '--instances', out, '--validate', '--out', path.join(dir, 'validate-anonymous')], { GHE_HOST: gh.host, GHE_PROTOCOL: 'http' });
    assert.equal(anonymous.code, 1, anonymous.stderr + anonymous.stdout);
    assert.match(anonymous.stderr, /acme__calc-1: could not be validated: could not fetch acme\/calc \(http:\/\/[^)]+\/acme\/calc\.git\): .*if it is a private repository, set APP_ID and PRIVATE_KEY \(or PRIVATE_KEY_PATH\) of a GitHub App installed on it/s);
    assert.match(anonymous.stdout, /^validation: 0 of 0 instance\(s\) valid; 1 could not be validated/m);

    // With them, it fetches the repository as the app and validates the instance: one new token,
    // read-only, restricted to this repository, on every git request (as a header, never in a URL),
    // in no file or output, revoked at the end.
    const runFrom = gh.requests.length;
    const earlier = new Set(gh.tokens().map((t) => t.token));
    const validateOut = path.join(dir, 'validate');
    const validate = await runEvalCli(['run', '--instances', out, '--validate', '--out', validateOut], appEnv);
    assert.equal(validate.code, 0, validate.stderr + validate.stdout);
    assert.match(validate.stdout, /^validation: 1 of 1 instance\(s\) valid$/m);
    const runTokens = gh.tokens().filter((t) => !earlier.has(t.token));
    assert.equal(runTokens.length, 1);
    const [runToken] = runTokens;
    assert.deepEqual(runToken!.repositories, [REPO]);
    assert.deepEqual(runToken!.permissions, { contents: 'read', metadata: 'read' });
    assert.ok(runToken!.expiresAt.getTime() <= Date.now(), 'the token was revoked');
    const runRequests = gh.requests.slice(runFrom);
    const runGit = runRequests.filter((r) => r.kind === 'git');
    assert.ok(runGit.length > 0);
    for (const r of runGit) {
      assert.equal(r.token, runToken!.token, `${r.method} ${r.path} carried the token`);
      assert.ok(r.status < 400, `${r.method} ${r.path} answered ${r.status}`);
    }
    const header = Buffer.from(`x-access-token:${runToken!.token}`).toString('base64');
    for (const r of runRequests) assert.ok(!r.path.includes(runToken!.token), `no token in ${r.path}`);
    for (const text of [validate.stdout, validate.stderr, ...filesUnder(validateOut).map((f) => readFileSync(f, 'latin1'))]) {
      assert.ok(!text.includes(runToken!.token) && !text.includes(header), 'the token is in no output and no file');
    }
  });

  test("eval run's owner/name source: as the app where it is installed, anonymous for a public repository where it is not, what to do for a private one", async () => {
    gh.createRepo('outsider', 'open', { private: false });
    gh.createRepo('outsider', 'closed');
    const earlier = new Set(gh.tokens().map((t) => t.token));
    const repos = new RepoCache(mkdtempSync(path.join(os.tmpdir(), 'lilypad-eval-repos-')), { host: gh.host, protocol: 'http' }, AppRepoAuth.fromEnv(loadEnv({ ...appEnv, LILYPAD_DATA_DIR: dir })));
    try {
      const mine = await repos.checkout(`${OWNER}/${REPO}`, mainBeforeFix);
      assert.equal(mine.baseCommit, mainBeforeFix);
      await mine.dispose();
      const open = await repos.checkout('outsider/open', gh.branchSha('outsider', 'open', 'main')!);
      await open.dispose();
      await assert.rejects(repos.checkout('outsider/closed', gh.branchSha('outsider', 'closed', 'main')!), /could not fetch outsider\/closed .*the GitHub App \d+ is not installed on outsider\/closed: install it on the repository/s);
    } finally {
      await repos.close();
    }
    const minted = gh.tokens().filter((t) => !earlier.has(t.token));
    assert.deepEqual(minted.map((t) => t.repositories), [[REPO]], 'a token only for the repository the app is installed on');
    assert.ok(minted.every((t) => t.expiresAt.getTime() <= Date.now()), 'revoked by close()');
  });

  test('--since leaves out issues not updated since; a repository the app is not installed on is an actionable error', async () => {
    const out = path.join(dir, 'later.jsonl');
    const later = await runEvalCli(['collect', '--repo', `${OWNER}/${REPO}`, '--out', out, '--since', new Date(Date.now() + 3_600_000).toISOString()], appEnv);
    assert.equal(later.code, 0, later.stderr);
    assert.match(later.stdout, /^0 instance\(s\) written .* from 0 closed issue\(s\)$/m);
    assert.equal(readFileSync(out, 'utf8'), '');

    const missing = await runEvalCli(['collect', '--repo', 'nobody/nothing', '--out', path.join(dir, 'x.jsonl')], appEnv);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /not installed on nobody\/nothing/);
    const noCreds = await runEvalCli(['collect', '--repo', `${OWNER}/${REPO}`, '--out', path.join(dir, 'y.jsonl')], { GHE_HOST: gh.host, GHE_PROTOCOL: 'http' });
    assert.equal(noCreds.code, 1);
    assert.match(noCreds.stderr, /set APP_ID and PRIVATE_KEY/);
  });
});
