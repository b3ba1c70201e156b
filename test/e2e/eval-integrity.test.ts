/**
 * Eval integrity: the agent's checkout holds the base commit and its history, and nothing newer.
 * The source repository has the gold fix merged on its default branch after the base, a tag and a
 * branch at the fix, and a note; a scripted agent asks git for everything it can find.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { judgePatch } from '../../src/eval/judge.ts';
import { parseInstances } from '../../src/eval/instance.ts';
import { RepoCache } from '../../src/eval/repo-source.ts';
import { createDockerClient } from '../../src/sandbox/sandbox.ts';
import { startModelServer, type ModelServer } from '../support/model-server.ts';
import { runEvalCli } from '../fixtures/eval/cli.ts';
import { CALC_FILES, CALC_FIXED, CALC_TEST_WITH_ADD, diffOf, writeInstances } from '../fixtures/eval/instances.ts';
import { makeRepo } from '../support/fixture-repo.ts';

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@localhost', ...args], { cwd, stdio: 'pipe' }).toString().trim();

const PROBE = [
  'git log --all --format=%H%n%s',
  'git rev-list --all',
  'git tag',
  'git branch -a',
  'git reflog --all',
  'git notes list 2>&1',
  'git cat-file --batch-all-objects --batch-check',
  'git fsck --lost-found 2>&1',
  'cat .git/packed-refs 2>&1; ls .git/refs/*; cat .git/FETCH_HEAD 2>&1',
].join('; echo ===; ');

const servers: ModelServer[] = [];
after(async () => {
  for (const s of servers) await s.close();
});

test('the agent sees no commit, ref, tag, reflog entry, note or object from after the base commit', async () => {
  const repo = makeRepo(CALC_FILES);
  const base = git(repo, 'rev-parse', 'HEAD');
  const gold = diffOf(repo, { 'calc.py': CALC_FIXED });
  const testPatch = diffOf(repo, { 'test_calc.py': CALC_TEST_WITH_ADD });
  // The upstream history after the base: the merged fix, a tag and a branch at it, a note.
  writeFileSync(path.join(repo, 'calc.py'), CALC_FIXED);
  git(repo, 'commit', '-qam', 'GOLD FIX: add() adds');
  const fix = git(repo, 'rev-parse', 'HEAD');
  git(repo, 'tag', '-a', 'v2.0', '-m', 'release with the fix');
  git(repo, 'branch', 'fix-branch');
  git(repo, 'notes', 'add', '-m', 'NOTE ABOUT THE FIX', fix);
  const fixObjects = git(repo, 'rev-list', '--objects', `${base}..${fix}`).split('\n').map((l) => l.split(' ')[0]!);

  const server = await startModelServer({
    script: ({ body }) => (body.messages.some((m) => m.role === 'tool') ? { content: 'Looked around.' } : { toolCalls: [{ name: 'Bash', arguments: { command: PROBE } }] }),
  });
  servers.push(server);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-eval-integrity-'));
  const file = writeInstances(dir, [
    {
      instance_id: 'integrity-1',
      repo,
      base_commit: base,
      problem_statement: 'add() returns the wrong result\nadd(2, 3) gives -1.',
      patch: gold,
      test_patch: testPatch,
      FAIL_TO_PASS: ['test_calc.CalcTest.test_add'],
      PASS_TO_PASS: ['test_calc.CalcTest.test_mul'],
      test_command: 'python3 -m unittest',
    },
  ]);
  const run = await runEvalCli(['run', '--instances', file, '--endpoint', `local=${server.url}`, '--out', path.join(dir, 'out')]);
  assert.equal(run.code, 0, run.stderr);
  const toolMsg = server
    .chatRequests()
    .flatMap((b) => b.messages)
    .find((m) => m.role === 'tool');
  const seen = String(toolMsg?.content ?? '');
  assert.match(seen, new RegExp(base), 'the probe ran and saw the base commit');
  for (const sha of [fix, ...fixObjects]) assert.ok(!seen.includes(sha), `object ${sha} from after the base is visible:\n${seen}`);
  assert.doesNotMatch(seen, /GOLD FIX|v2\.0|fix-branch|NOTE ABOUT THE FIX|origin/);
});

test('the judge never follows a symlink the model patch made out of its checkout', async () => {
  // The base has no tests/ directory; the instance's test_patch adds tests/test_add.py. The model's
  // patch turns tests/ into a symlink to a directory on the eval host holding a file of that name.
  const repo = makeRepo(CALC_FILES);
  const base = git(repo, 'rev-parse', 'HEAD');
  const victim = mkdtempSync(path.join(os.tmpdir(), 'lilypad-judge-victim-'));
  writeFileSync(path.join(victim, 'test_add.py'), 'precious\n');
  writeFileSync(path.join(victim, 'keep.txt'), 'precious too\n');
  const testPatch = diffOf(repo, { 'tests/test_add.py': 'import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n' });
  const work = mkdtempSync(path.join(os.tmpdir(), 'lilypad-judge-patch-'));
  git(work, 'clone', '-q', repo, 'w');
  const w = path.join(work, 'w');
  symlinkSync(victim, path.join(w, 'tests'));
  git(w, 'add', '-A');
  const evil = git(w, 'diff', '--cached', '--binary', 'HEAD') + '\n';
  const [inst] = parseInstances(
    JSON.stringify({ instance_id: 'symlink-1', repo, base_commit: base, problem_statement: 'add', patch: '', test_patch: testPatch, FAIL_TO_PASS: ['tests.test_add.T.test_add'], PASS_TO_PASS: [], test_command: 'python3 -m unittest' }),
  ).instances;
  const repos = new RepoCache(mkdtempSync(path.join(os.tmpdir(), 'lilypad-judge-repos-')), { protocol: 'https' });
  const sandbox = { image: 'lilypad-sandbox:latest', workdir: '/testbed', memoryMb: 512, cpus: 1, pids: 256, testTimeoutSeconds: 60 };
  const res = await judgePatch({ instance: inst!, patch: evil, repos, docker: createDockerClient(), sandbox, runId: `eval-symlink-${process.pid}`, labels: {} });
  assert.equal(res.report.patch_successfully_applied, true);
  assert.equal(readFileSync(path.join(victim, 'test_add.py'), 'utf8'), 'precious\n');
  assert.equal(readFileSync(path.join(victim, 'keep.txt'), 'utf8'), 'precious too\n');
  assert.equal(res.error, undefined, 'the test patch applied in place of the symlink');
});
