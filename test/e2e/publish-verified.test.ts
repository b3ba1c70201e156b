// `publish: verified` through the app (`lilypad start` against the GitHub stand-in): a change whose
// evidence is not verified opens no pull request and pushes no branch; the status comment says what
// was tried, the evidence, and how to publish it anyway; `/lilypad publish` by someone without write
// access is refused, by a writer opens the kept change as a draft (a warning line at the top, the
// label lilypad:unverified, no second agent run). On an issue with nothing kept it says so.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startApp, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';

const OWNER = 'acme';
const REPO = 'gated';
const FILES: Record<string, string> = {
  'calc.py': 'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n',
  // The tests cover mul only: they pass before and after a fix of add, so nothing shows it fixed.
  'test_calc.py': 'import unittest\n\nfrom calc import mul\n\n\nclass MulTest(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n',
  '.gitignore': '__pycache__/\n',
  '.github/lilypad.yml': 'test: python3 -m unittest -v\npublish: verified\n',
};
const FIX_UNTESTED = [
  { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
  { content: 'add() returns the sum now.' },
];
const book: ScriptBook = { 'add() subtracts': FIX_UNTESTED };

describe('publish: verified, and /lilypad publish', () => {
  let app: AppHarness;
  before(async () => {
    app = await startApp({ book });
    app.gh.createInstallation({ login: OWNER, type: 'Organization' });
    app.gh.createUser('alice');
    app.gh.createUser('mallory');
    app.gh.createRepo(OWNER, REPO, { files: FILES });
    app.gh.addCollaborator(OWNER, REPO, 'alice', 'maintain');
    app.gh.addCollaborator(OWNER, REPO, 'mallory', 'triage');
  });
  after(async () => {
    await app?.stop();
  });
  const status = (n: number) => app.gh.comments(OWNER, REPO, n).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? '';
  const prs = (n: number) => app.gh.pulls(OWNER, REPO).filter((p) => p.head.ref === `lilypad/issue-${n}`);
  const agentRuns = () => app.model.chatRequests().filter((b) => b.messages.length === 2).length;

  test('an unverified change is kept, not published; a writer publishes it with /lilypad publish', async () => {
    const n = app.gh.createIssue(OWNER, REPO, { title: 'add() subtracts', body: 'add(2, 3) gives -1.', author: 'alice' }).number;
    await app.send('issues', app.gh.labelIssue(OWNER, REPO, n, 'lilypad', 'alice'));
    await waitFor(() => /Not published|Done|Failed|No change/.test(status(n)), 'the run to end', 180_000);
    const withheld = status(n);
    assert.match(withheld, /🔒 \*\*Not published\*\*.*`publish: verified`.*\*\*unverified\*\*/s);
    assert.match(withheld, /changed `calc\.py`/);
    assert.match(withheld, /Unverified/);
    assert.match(withheld, /comment `\/lilypad publish`/);
    assert.equal(prs(n).length, 0, 'no pull request');
    assert.equal(app.gh.branchSha(OWNER, REPO, `lilypad/issue-${n}`), null, 'no branch pushed');
    const runsBefore = agentRuns();
    assert.equal(runsBefore, 1);

    // Someone without write access cannot publish it.
    await app.send('issue_comment', app.gh.commentOnIssue(OWNER, REPO, n, '/lilypad publish', 'mallory'));
    await waitFor(() => app.gh.comments(OWNER, REPO, n).some((c) => c.body.includes('@mallory')), 'the refusal');
    assert.equal(prs(n).length, 0);

    await app.send('issue_comment', app.gh.commentOnIssue(OWNER, REPO, n, '/lilypad publish', 'alice'));
    await waitFor(() => /Done/.test(status(n)), 'the kept change to be published', 120_000);
    const [pr] = prs(n);
    assert.ok(pr, status(n));
    assert.equal(pr.draft, true);
    const body = pr.body ?? '';
    assert.match(body, /^> \[!WARNING\]\n> Published with `\/lilypad publish` by @alice, although the evidence is \*\*unverified\*\*/);
    assert.match(body, /### Evidence/);
    assert.match(body, /`\/lilypad publish` by @alice/, 'the Revisions table names the publication');
    assert.ok(pr.labels.some((l) => l.name === 'lilypad:unverified'), JSON.stringify(pr.labels));
    assert.match(app.gh.readFile(OWNER, REPO, `lilypad/issue-${n}`, 'calc.py') ?? '', /return a \+ b/);
    assert.equal(agentRuns(), runsBefore, 'no agent ran for the publication');

    // Published once: a second command finds nothing kept.
    await app.send('issue_comment', app.gh.commentOnIssue(OWNER, REPO, n, '/lilypad publish', 'alice'));
    await waitFor(() => app.gh.comments(OWNER, REPO, n).some((c) => /no change kept on this issue to publish/.test(c.body)), 'the reply that nothing is kept');
    assert.equal(prs(n).length, 1);
  });
});
