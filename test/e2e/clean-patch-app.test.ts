// The app's issue job on a Python repository without .gitignore: the agent runs the tests through
// Bash (bytecode everywhere), fixes the code and adds a test. The draft pull request has the fix and
// the test, no bytecode, and its body says what was left out and why.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startApp, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';

const OWNER = 'acme';
const REPO = 'pycalc';

const book: ScriptBook = {
  'add() subtracts': [
    { toolCalls: [{ name: 'Bash', arguments: { command: 'python3 -m pytest -q 2>&1 | tail -1' } }] },
    {
      toolCalls: [
        { name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } },
        { name: 'Write', arguments: { file_path: 'test_negative.py', content: 'from calc import add\n\n\ndef test_negative():\n    assert add(-1, -2) == -3\n' } },
        { name: 'Bash', arguments: { command: 'python3 -m pytest -q 2>&1 | tail -1; python3 -m unittest -q 2>&1 | tail -1' } },
      ],
    },
    { content: 'add() adds; a new test covers negative numbers.' },
  ],
};

describe('clean patches in the app', () => {
  let app: AppHarness;
  before(async () => {
    app = await startApp({ book });
    app.gh.createInstallation({ login: OWNER, type: 'Organization' });
    app.gh.createUser('alice');
    app.gh.createRepo(OWNER, REPO, {
      files: {
        'calc.py': 'def add(a, b):\n    return a - b\n',
        'test_calc.py': 'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n',
        '.github/lilypad.yml': 'test: python3 -m pytest -q\n',
      },
    });
    app.gh.addCollaborator(OWNER, REPO, 'alice', 'maintain');
  });
  after(async () => {
    await app?.stop();
  });

  test('the pull request has the fix and the new test, no bytecode, and says what was left out', async () => {
    const n = app.gh.createIssue(OWNER, REPO, { title: 'add() subtracts', body: 'add(2, 3) gives -1.', author: 'alice' }).number;
    await app.send('issues', app.gh.labelIssue(OWNER, REPO, n, 'lilypad', 'alice'));
    await waitFor(() => /Done/.test(app.gh.comments(OWNER, REPO, n).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? ''), 'the run to finish', 180_000);
    const pr = app.gh.pulls(OWNER, REPO).find((p) => p.head.ref === `lilypad/issue-${n}`)!;
    const body = pr.body ?? '';
    const branch = `lilypad/issue-${n}`;
    assert.equal(app.gh.readFile(OWNER, REPO, branch, 'calc.py'), 'def add(a, b):\n    return a + b\n');
    assert.match(app.gh.readFile(OWNER, REPO, branch, 'test_negative.py') ?? '', /def test_negative/);
    assert.equal(app.gh.readFile(OWNER, REPO, branch, '__pycache__/calc.cpython-311.pyc'), null);
    assert.match(body, /### Files changed\n\n- `calc.py` \(\+1 −1\)\n- `test_negative.py` \(\+5 −0\)\n\n/);
    assert.match(body, /### Left out as by-products\n\n- \d+ file\(s\), a build leftover \(`__pycache__\/`: Python bytecode cache, written whenever Python code runs\); the repository tracks no such path: `__pycache__\/calc\.cpython-\d+\.pyc`/);
    assert.doesNotMatch(body, /### Left out of this pull request/);
    assert.match(body, /\*\*After the change:\*\* ✅ passed/);
  });
});
