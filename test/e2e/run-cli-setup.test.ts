// `lilypad run` as a user runs it (bin/lilypad.js in a child process, the real sandbox image, the
// scripted model server): the README's quick start with `--test "python3 -m pytest -q"` on a
// repository without .gitignore, and `--setup` through the same egress proxy as the app's setup.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDockerClient, LABEL_RUN } from '../../src/sandbox/sandbox.ts';
import { makeRepo } from '../support/fixture-repo.ts';
import { runCli } from '../support/run-cli.ts';
import { startModelServer, type ModelServer, type ScriptedReply } from '../support/model-server.ts';

const docker = createDockerClient();

/** Everything Lilypad created for a run, the egress proxy and the setup network included. */
async function leftBehind(runId: string): Promise<number> {
  const filters = { label: [`${LABEL_RUN}=${runId}`] };
  return (await docker.listContainers({ all: true, filters })).length + (await docker.listNetworks({ filters })).length;
}

/** The README's example: calc with a bug, pytest tests, no .gitignore. */
const CALC: Record<string, string> = {
  'calc.py': 'def add(a, b):\n    return a - b\n',
  'test_calc.py': 'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n',
  'README.md': '# calc\n',
};

const bash = (command: string) => ({ name: 'Bash', arguments: { command } });

const FIX_AND_TEST: ScriptedReply[] = [
  { toolCalls: [bash('python3 -m pytest -q 2>&1 | tail -2')] },
  {
    toolCalls: [
      { name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } },
      { name: 'Write', arguments: { file_path: 'test_calc_more.py', content: 'from calc import add\n\n\ndef test_add_negative():\n    assert add(-1, -1) == -2\n' } },
      bash('python3 -m pytest -q 2>&1 | tail -1 && python3 -m unittest -q 2>&1 | tail -1'),
    ],
  },
  { content: 'add() returns the sum now; added a test for negative numbers.' },
];

describe('lilypad run: the quick start with pytest, and --setup', () => {
  const servers: ModelServer[] = [];
  after(async () => {
    for (const s of servers) await s.close();
  });
  const server = async (script: ScriptedReply[]) => {
    const s = await startModelServer({ script });
    servers.push(s);
    return s;
  };
  const issueFile = (dir: string) => {
    const f = path.join(dir, 'issue.md');
    writeFileSync(f, '# add() returns the wrong result\nadd(2, 3) gives -1.\n');
    return f;
  };

  test('the README example: --test "python3 -m pytest -q" on a repository without .gitignore; the patch has the fix and the new test, no bytecode', async () => {
    const model = await server(FIX_AND_TEST);
    const repo = makeRepo(CALC);
    const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-out-'));
    const run = await runCli(['--repo', repo, '--issue', issueFile(out), '--test', 'python3 -m pytest -q', '--out', out, '--base-url', model.url]);
    assert.equal(run.code, 0, run.stderr + run.stdout);

    const result = JSON.parse(readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.equal(result.exit_reason, 'agent');
    assert.equal(result.tests.before.outcome, 'failed');
    assert.equal(result.tests.before.counts.failed, 1, result.tests.before.outputTail);
    assert.equal(result.tests.after.outcome, 'passed');
    assert.equal(result.tests.after.counts.passed, 2, result.tests.after.outputTail);
    assert.deepEqual([...result.patch.files].sort(), ['calc.py', 'test_calc_more.py']);
    // No --setup: inferred from the repository (a Python project with tests: a venv and pytest).
    assert.equal(result.setup.source, 'inferred');
    assert.equal(result.setup.failed, null);

    const patch = readFileSync(path.join(out, 'patch.diff'));
    assert.doesNotMatch(patch.toString('latin1'), /__pycache__|\.pyc|pytest_cache|GIT binary patch/);
    assert.deepEqual([...patch.toString('utf8').matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1]).sort(), ['calc.py', 'test_calc_more.py']);
    execFileSync('git', ['apply', '--check', '-'], { cwd: repo, input: patch });

    // What was left out, and why, is in result.json and in the summary.
    const pycache = result.patch.left_out.find((g: { rule: string }) => g.rule === '__pycache__/');
    assert.ok(pycache && pycache.count >= 2, JSON.stringify(result.patch.left_out));
    assert.match(pycache.reason, /Python bytecode cache/);
    assert.ok(pycache.examples.some((p: string) => /^__pycache__\/calc\.cpython-\d+\.pyc$/.test(p)), JSON.stringify(pycache));
    assert.match(run.stdout, /left out of the patch: \d+ build leftover\(s\) \(`__pycache__\/`\); why: see result\.json/);
    // The agent saw the caches exactly as the reference would (nothing hid them from it).
    const steps = readFileSync(path.join(out, 'trajectory.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.match(steps[0].tools[0].observation, /1 failed/);
    assert.match(steps[1].tools[2].observation, /2 passed/);
    assert.equal(await leftBehind(run.runId), 0);
  });

  test('--setup commands run in order through the egress proxy before the tests; what they wrote stays out of the patch; result.json has them', async () => {
    // The agent also appends to the file setup wrote: still setup's, still left out.
    const model = await server([{ toolCalls: [bash('echo "# seen" >> settings.py')] }, ...FIX_AND_TEST]);
    // The tests need a module that only setup writes.
    const repo = makeRepo({ ...CALC, 'test_calc.py': 'from calc import add\nfrom settings import EXPECTED\n\n\ndef test_add():\n    assert add(2, 3) == EXPECTED\n' });
    const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-out-'));
    const run = await runCli([
      '--repo', repo, '--issue', issueFile(out), '--test', 'python3 -m pytest -q', '--out', out, '--base-url', model.url,
      '--setup', 'echo "EXPECTED = 5" > settings.py',
      '--setup', 'test -f settings.py && test -n "$HTTP_PROXY" && echo "proxy $HTTP_PROXY"',
    ]);
    assert.equal(run.code, 0, run.stderr + run.stdout);
    const result = JSON.parse(readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.equal(result.setup.network, 'egress proxy');
    assert.deepEqual(result.setup.commands.map((c: { command: string; outcome: string; exitCode: number }) => [c.command, c.outcome, c.exitCode]), [
      ['echo "EXPECTED = 5" > settings.py', 'passed', 0],
      ['test -f settings.py && test -n "$HTTP_PROXY" && echo "proxy $HTTP_PROXY"', 'passed', 0],
    ]);
    assert.match(result.setup.commands[1].outputTail, /^proxy http:\/\/[\d.]+:3128$/m);
    for (const c of result.setup.commands) assert.ok(typeof c.durationMs === 'number' && c.durationMs >= 0);
    assert.ok(typeof result.durations_ms.setup === 'number');
    // The baseline found the bug, not a missing module: setup ran first.
    assert.equal(result.tests.before.outcome, 'failed');
    assert.doesNotMatch(result.tests.before.outputTail, /ModuleNotFoundError|No module named/);
    assert.equal(result.tests.after.outcome, 'passed');
    assert.deepEqual([...result.patch.files].sort(), ['calc.py', 'test_calc_more.py']);
    const setupGroup = result.patch.left_out.find((g: { rule: string }) => g.rule === 'setup');
    assert.deepEqual(setupGroup?.examples, ['settings.py'], JSON.stringify(result.patch.left_out));
    assert.match(run.stdout, /setup \(echo "EXPECTED = 5" > settings\.py\): passed \(exit 0\)/);
    assert.match(run.stdout, /left out of the patch: .*1 file\(s\) of the setup commands' output/);
    assert.equal(await leftBehind(run.runId), 0, 'the proxy, its setup network and the sandbox are gone');
  });

  test('a failing --setup command stops the run with a clear message: which command, its exit code, its output; no tests, no agent', async () => {
    const model = await server(FIX_AND_TEST);
    const repo = makeRepo(CALC);
    const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-out-'));
    // With LILYPAD_SETUP_EGRESS=none there is no proxy: the check fails as it would without network.
    const run = await runCli(
      ['--repo', repo, '--title', 'fix add', '--test', 'python3 -m pytest -q', '--out', out, '--base-url', model.url, '--setup', 'echo one', '--setup', 'echo "checking the proxy"; test -n "$HTTP_PROXY" || exit 3', '--setup', 'echo never'],
      { LILYPAD_SETUP_EGRESS: 'none' },
    );
    assert.equal(run.code, 1, run.stderr + run.stdout);
    assert.match(run.stdout, /exit reason: error \(the setup command `echo "checking the proxy"; test -n "\$HTTP_PROXY" \|\| exit 3` failed \(exit 3\), so the run stopped before the tests and the agent\. Its output ended with:\n\n```text\nchecking the proxy\n```\)/);
    assert.match(run.stdout, /what to do: fix the `setup` commands/);
    assert.match(run.stdout, /setup \(echo one\): passed \(exit 0\)/);
    const result = JSON.parse(readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.equal(result.setup.network, 'none');
    assert.deepEqual(result.setup.commands.map((c: { outcome: string; exitCode: number }) => [c.outcome, c.exitCode]), [['passed', 0], ['failed', 3]]);
    assert.equal(result.tests.before, null);
    assert.equal(result.steps, 0);
    assert.equal(model.chatRequests().length, 0, 'the model was never asked');
    assert.equal(readFileSync(path.join(out, 'patch.diff'), 'utf8'), '');
    assert.equal(await leftBehind(run.runId), 0);
  });

  test('an empty --setup is a usage error', async () => {
    const repo = makeRepo(CALC);
    const run = await runCli(['--repo', repo, '--title', 'x', '--setup', '  ', '--base-url', 'http://127.0.0.1:9/v1']);
    assert.equal(run.code, 2, run.stderr + run.stdout);
    assert.match(run.stderr, /--setup number 1 is empty/);
  });
});
