import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { directoryReader, gitTreeReader, inferCommands, type InferredCommands } from '../../src/inference/index.ts';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'lilypad-infer-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;

/** A repository shaped like a real one of its ecosystem, as files in a fresh directory. */
function repo(files: Record<string, string>): string {
  const dir = path.join(tmp, `r${++n}`);
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    writeFileSync(path.join(dir, p), text);
  }
  return dir;
}
const V = '"$HOME/.lilypad-venv/bin/python"';

// What inference reads from a real git repository, and the commands it infers, run for real.
test('a git tree (bare repository, one commit) reads as the directory does; later commits do not leak in', async () => {
  const files = { 'pyproject.toml': '[project]\nname = "g"\n[project.optional-dependencies]\ndev = ["pytest"]\n', 'tests/test_g.py': 'def test_g(): pass\n' };
  const work = repo(files);
  const git = (...args: string[]) => execFileSync('git', ['-C', work, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'utf8' }).trim();
  git('init', '-q');
  git('add', '.');
  git('commit', '-q', '-m', 'base');
  const base = git('rev-parse', 'HEAD');
  writeFileSync(path.join(work, 'package.json'), '{"scripts":{"test":"jest"}}');
  git('add', '.');
  git('commit', '-q', '-m', 'later');
  const bare = path.join(tmp, `bare${++n}.git`);
  execFileSync('git', ['clone', '-q', '--bare', work, bare]);
  const fromTree: InferredCommands = await inferCommands(gitTreeReader(bare, base));
  rmSync(path.join(work, 'package.json'));
  const fromDir = await inferCommands(directoryReader(work));
  assert.deepEqual(fromTree, fromDir);
  assert.equal(fromTree.setup.commands[1], `${V} -m pip install -e '.[dev]'`);
  const reader = gitTreeReader(bare, base);
  assert.equal(await reader.readFile('package.json'), null, 'a file from a later commit is not there');
  assert.equal((await reader.readFile('tests/test_g.py', 5))?.length, 5, 'reads are capped');
  await assert.rejects(gitTreeReader(bare, 'f'.repeat(40)).listFiles(), /git ls-tree .* failed/);
});

// The inferred commands, run for real where the tools are here: the test command finds the tests.
const hasVenv = spawnSync('python3', ['-c', 'import venv, ensurepip'], { encoding: 'utf8' }).status === 0;
test('the inferred Python setup and test commands run, and leave nothing in the checkout', { skip: hasVenv ? false : 'python3 with venv is not installed' }, async () => {
  const dir = repo({
    'requirements.txt': '',
    'calc/__init__.py': 'def add(a, b):\n    return a + b\n',
    'tests/test_calc.py': 'import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n',
  });
  execFileSync('git', ['-C', dir, 'init', '-q']);
  execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'x']);
  execFileSync('git', ['-C', dir, 'add', '.']);
  const home = path.join(tmp, 'home');
  mkdirSync(home, { recursive: true });
  const r = await inferCommands(directoryReader(dir));
  // Only the venv creation: the empty requirements file needs no network.
  for (const c of r.setup.commands.slice(0, 1)) execFileSync('/bin/bash', ['-c', c], { cwd: dir, env: { ...process.env, HOME: home } });
  const res = spawnSync('/bin/bash', ['-c', `${r.test.command!} 2>&1`], { cwd: dir, env: { ...process.env, HOME: home }, encoding: 'utf8' });
  assert.equal(res.status, 0, res.stdout);
  assert.match(res.stdout, /Ran 1 test/);
  assert.equal(execFileSync('git', ['-C', dir, 'status', '--porcelain', '--untracked-files=all'], { encoding: 'utf8' }).replace(/^A .*\n/gm, ''), '', 'the checkout is as it was');
});
