import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fence, MACHINE_WRITTEN_NOTICE, quoteUntrusted, renderPullRequestBody, type PullRequestBodyInput } from '../../src/github/pull-request-body.ts';
import { renderStatus, STATUS_MARKER } from '../../src/github/status-comment.ts';
import { intentOf } from '../../src/pipeline/triggers.ts';
import type { IssueEventJob } from '../../src/store/jobs.ts';

const base: PullRequestBodyInput = {
  issueNumber: 7,
  issueTitle: 'add() is wrong',
  summary: 'Fixed add(). Thanks @octocat <!-- hidden -->',
  files: [
    { path: 'calc.py', added: 1, removed: 1 },
    { path: 'logo.png', added: null, removed: null },
  ],
  dropped: [{ path: '.github/workflows/ci.yml', reason: 'workflows are never published' }],
  tests: {
    before: { command: 'pytest -q', outcome: 'failed', exitCode: 1, durationMs: 2100, counts: { passed: 3, failed: 1 }, outputTail: '1 failed, 3 passed\n```' },
    after: { command: 'pytest -q', outcome: 'passed', exitCode: 0, durationMs: 1900, counts: { passed: 4 }, outputTail: '4 passed' },
  },
  run: { model: 'frognano-4b', steps: 12, promptTokens: 50000, completionTokens: 3000, seconds: 95, exitReason: 'agent', image: 'lilypad-sandbox:latest', runId: 'r1' },
  incomplete: false,
  warnings: [],
};

test('the pull request body has summary, files, left-out files, tests, run, notice and a closing reference', () => {
  const body = renderPullRequestBody(base);
  assert.match(body, /### Summary\n\nFixed add\(\)\. Thanks `@octocat`$/m);
  assert.doesNotMatch(body, /hidden/);
  assert.match(body, /- `calc.py` \(\+1 −1\)/);
  assert.match(body, /- `logo.png` \(binary\)/);
  assert.match(body, /### Left out of this pull request\n\n- `.github\/workflows\/ci.yml`: workflows are never published/);
  assert.match(body, /\*\*Before the change:\*\* ❌ failed \(exit 1, 2 s\) — 3 passed, 1 failed/);
  assert.match(body, /\*\*After the change:\*\* ✅ passed \(exit 0, 2 s\) — 4 passed/);
  assert.match(body, /<details><summary>Output \(last lines\)<\/summary>\n\n````text\n1 failed, 3 passed\n```\n````/);
  assert.match(body, /\| `frognano-4b` \| 12 \| 50000 \/ 3000 \| 1 min 35 s \| `agent` \| `lilypad-sandbox:latest` \|/);
  assert.ok(body.includes(MACHINE_WRITTEN_NOTICE));
  assert.match(body, /Closes #7$/);
  assert.doesNotMatch(body, /Incomplete/);
});

test('an incomplete run says so first; no test command says nothing was run', () => {
  const body = renderPullRequestBody({ ...base, incomplete: true, tests: null, run: { ...base.run, exitReason: 'max_turns' } });
  assert.match(body, /^> \[!WARNING\]\n> \*\*Incomplete\.\*\* The run stopped because the budget ran out \(`max_turns`\)/);
  assert.match(body, /No test command is configured/);
});

test('fences cannot be broken out of, untrusted text cannot ping people', () => {
  assert.equal(fence('a ```` b'), '`````text\na ```` b\n`````');
  assert.equal(quoteUntrusted('cc @org/team and @bob, mail me@x.org'), 'cc `@org/team` and `@bob`, mail me@x.org');
});

test('status comments carry the marker and say what to do', () => {
  const failed = renderStatus({ state: 'failed', what: 'setup failed', todo: 'fix setup' }, 'alice');
  assert.ok(failed.startsWith(STATUS_MARKER));
  assert.match(failed, /❌ \*\*Failed\*\* \(requested by @alice\): setup failed\n\nWhat to do: fix setup/);
  assert.match(renderStatus({ state: 'queued', position: 2 }), /Queued\*\*: position 2 in the queue/);
  assert.match(renderStatus({ state: 'cancelled', by: 'bob', why: 'the label was removed' }), /Cancelled\*\* by @bob: the label was removed/);
  assert.match(renderStatus({ state: 'done', prUrl: 'u', prNumber: 3, incomplete: true, updated: false, exitReason: 'max_time' }), /Done, incomplete.*max_time.*#3/);
});

const evt = (over: Partial<IssueEventJob>): IssueEventJob => ({
  installationId: 1,
  repoId: 2,
  owner: 'o',
  repo: 'r',
  issueNumber: 3,
  deliveryId: 'd',
  kind: 'labeled',
  sender: { login: 'alice', type: 'User' },
  receivedAt: '',
  ...over,
});

test('intents: the trigger label starts, its removal, close and /lilypad cancel stop, anything else is ignored', () => {
  assert.deepEqual(intentOf(evt({ label: 'LilyPad' }), 'lilypad'), { kind: 'trigger', label: 'lilypad' });
  assert.deepEqual(intentOf(evt({ label: 'bug' }), 'lilypad'), { kind: 'ignore' });
  assert.equal(intentOf(evt({ kind: 'unlabeled', label: 'lilypad' }), 'lilypad').kind, 'cancel');
  assert.equal(intentOf(evt({ kind: 'closed' }), 'lilypad').kind, 'cancel');
  assert.equal(intentOf(evt({ kind: 'comment', commentBody: '/lilypad' }), 'x').kind, 'trigger');
  assert.equal(intentOf(evt({ kind: 'comment', commentBody: '  /lilypad cancel please' }), 'x').kind, 'cancel');
  assert.equal(intentOf(evt({ kind: 'comment', commentBody: '/lilypadding' }), 'x').kind, 'ignore');
  assert.equal(intentOf(evt({ kind: 'comment', commentBody: 'please /lilypad' }), 'x').kind, 'ignore');
});

test('the run page is linked from the status (once running) and from the pull request body, when run pages are on', () => {
  const url = 'https://lilypad.example.test/runs/run-1-abc';
  assert.match(renderStatus({ state: 'running', step: 3 }, 'alice', undefined, url), /\[See the run\]\(https:\/\/lilypad\.example\.test\/runs\/run-1-abc\)/);
  assert.doesNotMatch(renderStatus({ state: 'queued', position: 1 }, 'alice', undefined, url), /See the run/);
  assert.doesNotMatch(renderStatus({ state: 'running', step: 3 }, 'alice'), /See the run/);
  const withLink = renderPullRequestBody({ ...base, run: { ...base.run, runUrl: url } });
  assert.ok(withLink.includes(`[the run page](${url})`));
  assert.ok(!renderPullRequestBody(base).includes('the run page'));
});

test('follow-up status replies carry their own marker and name the commit', () => {
  const text = renderStatus({ state: 'revised', sha: 'abcdef1234567890', commitUrl: 'http://x/commit/abcdef1', incomplete: false, exitReason: 'agent', threads: 2 }, 'walt', 'followup-1');
  assert.ok(text.startsWith('<!-- lilypad:followup -->'));
  assert.match(text, /Done.*`abcdef1`.*replied in 2 review thread/);
  assert.ok(!text.includes(STATUS_MARKER));
});

test('the Revisions section is added before the closing notice, then replaced in place', async () => {
  const { renderRevisions, withRevisions } = await import('../../src/github/revisions.ts');
  const row = { trigger: 'label by @alice', sha: '1111111aaaa', testsBefore: '❌ failed', testsAfter: '✅ passed', steps: 3, tokens: 900, seconds: 12 };
  const body = renderPullRequestBody(base);
  const once = withRevisions(body, renderRevisions([row], (s) => `http://x/commit/${s}`));
  assert.ok(once.indexOf('### Revisions') < once.indexOf(MACHINE_WRITTEN_NOTICE));
  const twice = withRevisions(once, renderRevisions([row, { ...row, trigger: 'review by @walt', sha: '2222222bbbb' }], (s) => `http://x/commit/${s}`));
  assert.equal(twice.match(/### Revisions/g)?.length, 1);
  assert.match(twice, /\| 2 \| review by @walt \| \[`2222222`\]/);
});

test('/lilypad commands on a pull request: ci, cancel, or instructions', async () => {
  const { parseCommand } = await import('../../src/pipeline/triggers.ts');
  assert.deepEqual(parseCommand('/lilypad ci'), { kind: 'ci' });
  assert.deepEqual(parseCommand('  /lilypad cancel please'), { kind: 'cancel' });
  assert.deepEqual(parseCommand('/lilypad rename x to total'), { kind: 'revise', instructions: 'rename x to total' });
  assert.deepEqual(parseCommand('/lilypad'), { kind: 'revise', instructions: '' });
  assert.deepEqual(parseCommand('/lilypad ci is flaky, please retry the fetch'), { kind: 'revise', instructions: 'ci is flaky, please retry the fetch' });
  assert.equal(parseCommand('please /lilypad'), null);
  assert.equal(parseCommand('/lilypadding'), null);
});

test('tests that did not run say why in an attempt row or a revision, where that is known', async () => {
  const { testWord } = await import('../../src/github/revisions.ts');
  assert.equal(testWord(null, 'no change'), 'not run: no change');
  assert.equal(testWord(null), 'not run');
  assert.equal(testWord({ command: 't', outcome: 'passed', exitCode: 0, durationMs: 1, counts: null, outputTail: '' }, 'no change'), '✅ passed');
});
