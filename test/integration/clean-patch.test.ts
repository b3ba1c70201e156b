// Clean patches: what the agent's own tool calls (a test run through Bash) and the setup commands
// write as a by-product never reaches the patch; the agent's new source and test files do. Real
// Docker sandbox, real git in it, the scripted model server driving the real agent loop through
// runSandboxSession, the one place every run (issue jobs, follow-ups, lilypad run, lilypad eval)
// takes its patch.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type Docker from 'dockerode';
import { ModelClient } from '../../src/agent/model-client.ts';
import { JsonlTrajectory } from '../../src/agent/trajectory.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { runSandboxSession, type SandboxSessionResult } from '../../src/pipeline/sandbox-session.ts';
import type { TestOutcome } from '../../src/test-results/test-outcome.ts';
import { makeRepo } from '../support/fixture-repo.ts';
import { startModelServer, type ModelServer, type ScriptedReply } from '../support/model-server.ts';
import { TEST_IMAGE, testDocker } from '../support/sandbox-harness.ts';

/** A Python project with no .gitignore at all: nothing keeps bytecode or caches out of `git add -A`. */
const PY_REPO: Record<string, string> = {
  'calc/__init__.py': '',
  'calc/ops.py': 'def add(a, b):\n    return a - b\n',
  'tests/__init__.py': '',
  'tests/test_ops.py': 'import unittest\n\nfrom calc.ops import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n',
  'README.md': '# calc\n',
};

const bash = (command: string) => ({ name: 'Bash', arguments: { command } });

let docker: Docker;
const servers: ModelServer[] = [];

async function session(repo: string, script: ScriptedReply[], opts: { setup?: string[]; testCommand?: string; onSetupOutcome?: (o: TestOutcome) => void } = {}): Promise<{ result: SandboxSessionResult; observations: string[] }> {
  const server = await startModelServer({ script });
  servers.push(server);
  const baseCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repo }).toString().trim();
  const observations: string[] = [];
  const trajectory = new JsonlTrajectory(path.join(mkdtempSync(path.join(os.tmpdir(), 'lilypad-clean-patch-')), 'trajectory.jsonl'), new SecretScanner([]), (r) => {
    for (const t of r.tools) observations.push(t.observation);
  });
  const result = await runSandboxSession({
    docker,
    checkoutDir: repo,
    baseCommit,
    sandbox: { image: TEST_IMAGE, workdir: '/testbed', memoryMb: 1024, cpus: 1, pids: 256 },
    runId: `test-clean-patch-${process.pid}-${Date.now().toString(36)}`,
    workerId: os.hostname(),
    setup: opts.setup ?? [],
    setupNetwork: null,
    setupTimeoutSeconds: 120,
    onSetupOutcome: opts.onSetupOutcome,
    testCommand: opts.testCommand,
    testTimeoutSeconds: 120,
    issue: { title: 'add() subtracts', body: 'add(2, 3) gives -1.' },
    model: 'frognano-4b',
    client: new ModelClient({ baseURL: server.url, timeoutMs: 30_000, maxRetries: 2, retryBaseMs: 5 }),
    budgets: { maxSteps: 20, maxContextTokens: 131072, maxTokensPerTurn: 8192, maxWallSeconds: 300, bashTimeoutCapSeconds: 300 },
    trajectory,
    phase: (_name, fn) => fn(),
  });
  await trajectory.close();
  return { result, observations };
}

const patchPaths = (diff: Buffer) => [...diff.toString('utf8').matchAll(/^diff --git a\/(\S+) b\//gm)].map((m) => m[1]!).sort();

describe('clean patches', () => {
  before(async () => {
    docker = await testDocker();
  });
  after(async () => {
    for (const s of servers) await s.close();
  });

  test('a Python repository without .gitignore: the agent runs pytest and unittest, edits a source file and adds a test; the patch has both and no bytecode or cache', async () => {
    const repo = makeRepo(PY_REPO);
    const { result, observations } = await session(repo, [
      { toolCalls: [bash('python3 -m pytest -q 2>&1 | tail -3')] },
      {
        toolCalls: [
          { name: 'Edit', arguments: { file_path: 'calc/ops.py', old_string: 'return a - b', new_string: 'return a + b' } },
          {
            name: 'Write',
            arguments: { file_path: 'tests/test_more.py', content: 'import unittest\n\nfrom calc.ops import add\n\n\nclass MoreTest(unittest.TestCase):\n    def test_negative(self):\n        self.assertEqual(add(-2, -3), -5)\n' },
          },
        ],
      },
      { toolCalls: [bash('python3 -m pytest -q 2>&1 | tail -1; python3 -m unittest -q 2>&1 | tail -1; python3 -c "import calc.ops"')] },
      { toolCalls: [bash('find . -path ./.git -prune -o -type f -print | sort')] },
      { content: 'add() adds now; a new test covers negative numbers.' },
    ]);
    assert.equal(result.agent.exitReason, 'agent');
    // The tool calls really wrote the by-products into the checkout (the reference does the same):
    const listing = observations.at(-1)!;
    assert.match(listing, /\.\/calc\/__pycache__\/ops\.cpython-\d+\.pyc/);
    assert.match(listing, /\.\/tests\/__pycache__\/test_more\.cpython-\d+(-pytest-[\d.]+)?\.pyc/);
    assert.match(listing, /\.\/\.pytest_cache\//);
    assert.match(observations[3]!, /2 passed/, 'pytest ran in the default image');

    const patch = result.patch!;
    assert.deepEqual(patchPaths(patch.diff), ['calc/ops.py', 'tests/test_more.py']);
    assert.deepEqual([...patch.files].sort(), ['calc/ops.py', 'tests/test_more.py']);
    assert.doesNotMatch(patch.diff.toString('latin1'), /__pycache__|\.pyc|pytest_cache|GIT binary patch/);
    assert.match(patch.diff.toString('utf8'), /^\+\s+self\.assertEqual\(add\(-2, -3\), -5\)$/m);
    // .pytest_cache/ carries its own .gitignore (pytest writes one), so git never offers it; the bytecode is left out by rule.
    assert.deepEqual([...new Set(patch.leftOut.map((l) => l.rule))], ['__pycache__/'], JSON.stringify(patch.leftOut));
    assert.ok(patch.leftOut.some((l) => /^calc\/__pycache__\/ops\.cpython-\d+\.pyc$/.test(l.path)));
    assert.ok(patch.leftOut.some((l) => /^tests\/__pycache__\/test_more\.cpython-\d+-pytest-[\d.]+\.pyc$/.test(l.path)));

    // The patch applies to the base commit as it is.
    execFileSync('git', ['apply', '--check', '-'], { cwd: repo, input: patch.diff });
  });

  test('a repository that tracks build/ and node_modules/ keeps the agent’s changes there; its bytecode still stays out', async () => {
    const repo = makeRepo({
      ...PY_REPO,
      'setup.py': 'from setuptools import setup\nsetup(name="calc")\n',
      'build/release.sh': '#!/bin/sh\necho release\n',
      'node_modules/local-helper/index.js': 'module.exports = 1;\n',
    });
    const { result } = await session(repo, [
      {
        toolCalls: [
          { name: 'Edit', arguments: { file_path: 'build/release.sh', old_string: 'echo release', new_string: 'echo release v2' } },
          { name: 'Write', arguments: { file_path: 'build/notes.txt', content: 'how to release\n' } },
          { name: 'Edit', arguments: { file_path: 'node_modules/local-helper/index.js', old_string: '= 1', new_string: '= 2' } },
          { name: 'Write', arguments: { file_path: 'node_modules/local-helper/extra.js', content: 'module.exports = 3;\n' } },
          bash('python3 -m unittest -q 2>&1 | tail -1'),
        ],
      },
      { content: 'Updated the release script and the helper.' },
    ]);
    const patch = result.patch!;
    assert.deepEqual(patchPaths(patch.diff), ['build/notes.txt', 'build/release.sh', 'node_modules/local-helper/extra.js', 'node_modules/local-helper/index.js']);
    assert.ok(patch.leftOut.length > 0 && patch.leftOut.every((l) => l.rule === '__pycache__/'), JSON.stringify(patch.leftOut));
  });

  test('files the setup commands created stay out even when the agent edits them; a tracked file setup changed and the agent changed again is in', async () => {
    const repo = makeRepo(PY_REPO);
    const outcomes: TestOutcome[] = [];
    const { result } = await session(
      repo,
      [
        {
          toolCalls: [
            bash('cat generated/settings.py && echo "DEBUG = True" >> generated/settings.py && echo "# edited" >> README.md'),
            { name: 'Edit', arguments: { file_path: 'calc/ops.py', old_string: 'return a - b', new_string: 'return a + b' } },
          ],
        },
        { content: 'Done.' },
      ],
      {
        setup: ['mkdir -p generated && echo "VALUE = 1" > generated/settings.py', 'echo "setup was here" >> README.md && echo "# setup" >> tests/__init__.py && python3 -c "import calc.ops"'],
        testCommand: 'python3 -m pytest -q',
        onSetupOutcome: (o) => outcomes.push(o),
      },
    );
    assert.deepEqual(outcomes.map((o) => [o.command.slice(0, 8), o.outcome, o.exitCode]), [['mkdir -p', 'passed', 0], ['echo "se', 'passed', 0]]);
    assert.equal(result.tests!.before!.outcome, 'failed');
    assert.equal(result.tests!.after!.outcome, 'passed');
    const patch = result.patch!;
    assert.deepEqual(patchPaths(patch.diff), ['README.md', 'calc/ops.py']);
    // Reported: the setup file the agent edited. Not reported (never the agent's): tests/__init__.py, which only setup changed.
    const setupLeft = patch.leftOut.filter((l) => l.rule === 'setup');
    assert.deepEqual(setupLeft.map((l) => l.path), ['generated/settings.py'], JSON.stringify(patch.leftOut));
    assert.match(setupLeft[0]!.reason, /created by the setup commands/);
    assert.ok(!patch.leftOut.some((l) => l.path === 'tests/__init__.py'));
    assert.doesNotMatch(patch.diff.toString('latin1'), /__pycache__|generated\//);
  });
});
