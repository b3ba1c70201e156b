import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { evidenceOf, rankAttempts, selectTestsCommand, splitPatch, weakenedTests, type Evidence, type TestRunRecord } from '../../src/evidence/index.ts';
import { parseableCommand, parseTestRun, type TestRunner } from '../../src/test-results/index.ts';
import { changeRepo, type ChangeRepo, type Changed } from '../support/change-diff.ts';

/**
 * The evidence core on real runs: real git makes and splits each change, the real runner (node's
 * own, Python's unittest) runs the four commands the sandbox phase will run, and the evidence is
 * read from their real output. What the lead's sandbox phase adds around this is the container.
 */
const repos: ChangeRepo[] = [];
after(() => repos.forEach((r) => r.remove()));

function runIn(dir: string, command: string): TestRunRecord & { output: string } {
  // Not this test runner's own environment: a node --test under NODE_TEST_CONTEXT reports to its parent, not to its output.
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', PYTHONDONTWRITEBYTECODE: '1' };
  const res = spawnSync('/bin/sh', ['-c', command], { cwd: dir, encoding: 'utf8', timeout: 60_000, env });
  const output = `${res.stdout}${res.stderr}`;
  return { run: parseTestRun(null, output), exitCode: res.status, output };
}

function evidenceFor(runner: TestRunner, command: string, base: Record<string, string>, change: Record<string, Changed>): { evidence: Evidence; patch: string } {
  const r = changeRepo(base, change);
  repos.push(r);
  const apply = (patch: Buffer) => patch.length > 0 && execFileSync('git', ['apply', '--binary', '-'], { cwd: r.dir, input: patch, stdio: 'pipe' });
  const reset = () => {
    r.git('reset', '-q', '--hard', 'HEAD');
    r.git('clean', '-qfdx');
  };
  const full = parseableCommand(runner, command);
  const split = splitPatch(r.bytes);
  const own = split.testFiles.length ? parseableCommand(runner, selectTestsCommand(runner, command, { files: split.testFiles, ids: [] }) ?? command) : null;
  const withRunner = (rec: TestRunRecord & { output: string }) => ({ ...rec, run: parseTestRun(runner, rec.output) });

  const before = withRunner(runIn(r.dir, full));
  apply(r.bytes);
  const afterRun = withRunner(runIn(r.dir, full));
  reset();
  let onBase: TestRunRecord | null = null;
  let withChange: TestRunRecord | null = null;
  if (own) {
    apply(split.tests);
    onBase = withRunner(runIn(r.dir, own));
    apply(split.code);
    withChange = withRunner(runIn(r.dir, own));
    reset();
  }
  const evidence = evidenceOf({ before, after: afterRun, changeTestsOnBase: onBase, changeTestsWithChange: withChange, weakened: weakenedTests(r.bytes) });
  return { evidence, patch: r.diff };
}

describe('evidence from real runs of node --test', () => {
  const ADD = 'export function add(a, b) {\n  return a - b;\n}\n';
  const FIXED = 'export function add(a, b) {\n  return a + b;\n}\n';
  const TEST = "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { add } from '../src/add.js';\n\ntest('adds zero', () => {\n  assert.equal(add(0, 0), 0);\n});\n";
  const OTHER = "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\nimport { add } from '../src/add.js';\n\ntest('adds to itself', () => {\n  assert.equal(add(4, 0), 4);\n});\n";
  const base = { 'package.json': '{"type":"module"}\n', 'src/add.js': ADD, 'test/add.test.js': TEST, 'test/other.test.js': OTHER };
  const newTest = "\ntest('adds positives', () => {\n  assert.equal(add(2, 3), 5);\n});\n";

  test('best of 3 on real runs: the fix with a reproduction is verified and wins over a smaller change with no test and a change that breaks a test', () => {
    const verified = evidenceFor('node-test', 'node --test', base, { 'src/add.js': FIXED, 'test/add.test.js': TEST + newTest });
    assert.equal(verified.evidence.verdict, 'verified', JSON.stringify(verified.evidence));
    assert.deepEqual(verified.evidence.reproduction, ['adds positives']);

    const untested = evidenceFor('node-test', 'node --test', base, { 'src/add.js': FIXED });
    assert.equal(untested.evidence.verdict, 'unverified');

    const breaking = evidenceFor('node-test', 'node --test', base, { 'src/add.js': 'export function add(a, b) {\n  return 0;\n}\n' });
    assert.equal(breaking.evidence.verdict, 'failing');
    assert.deepEqual(breaking.evidence.broken, ['adds to itself']);

    const ranked = rankAttempts([
      { index: 0, patch: untested.patch, testsPassed: true, evidence: untested.evidence },
      { index: 1, patch: verified.patch, testsPassed: true, evidence: verified.evidence },
      { index: 2, patch: breaking.patch, testsPassed: false, evidence: breaking.evidence },
    ]);
    assert.equal(ranked.winner, 1);
    assert.equal(ranked.summary, 'attempt 2 of 3: the only verified attempt');
  });

  test('deleting the assertion of a failing test makes it pass, and is weakened, not verified', () => {
    const failingBase = { ...base, 'test/add.test.js': TEST + newTest };
    const cheat = evidenceFor('node-test', 'node --test', failingBase, { 'test/add.test.js': TEST + newTest.replace('  assert.equal(add(2, 3), 5);\n', '') });
    assert.equal(cheat.evidence.verdict, 'unverified');
    assert.deepEqual(cheat.evidence.weakened, [{ file: 'test/add.test.js', test: 'adds positives', what: 'deleted an assertion: `assert.equal(add(2, 3), 5);`' }]);
    assert.deepEqual(cheat.evidence.fixed, []);
  });

  test('a new test that passes on the base code too is not evidence', () => {
    const e = evidenceFor('node-test', 'node --test', base, { 'src/add.js': FIXED, 'test/zero.test.js': TEST.replace("'adds zero'", "'zero again'") });
    assert.equal(e.evidence.verdict, 'unverified');
    assert.ok(e.evidence.notes.some((n) => /pass on the base code too, so they do not show the issue: zero again/.test(n)), e.evidence.notes.join('\n'));
  });
});

const hasPython = spawnSync('python3', ['--version']).status === 0;

describe('evidence from real runs of python unittest', { skip: hasPython ? false : 'python3 is not installed' }, () => {
  const CALC = 'def add(a, b):\n    return a - b\n';
  const TEST = 'import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n';
  const base = { 'calc.py': CALC, 'test_calc.py': TEST };
  const command = 'python3 -m unittest';

  test('a fix whose new test fails on the base code with an assertion is verified', () => {
    const { evidence } = evidenceFor('unittest', command, base, { 'calc.py': 'def add(a, b):\n    return a + b\n', 'test_calc.py': `${TEST}\n    def test_positive(self):\n        self.assertEqual(add(2, 3), 5)\n` });
    assert.equal(evidence.verdict, 'verified', JSON.stringify(evidence));
    assert.deepEqual(evidence.reproduction, ['test_calc.AddTest.test_positive']);
  });

  test('a new test module that imports what the change adds fails on the base code only by the import: not a reproduction', () => {
    const { evidence } = evidenceFor('unittest', command, base, {
      'calc.py': 'def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n',
      'test_mul.py': 'import unittest\n\nfrom calc import mul\n\n\nclass MulTest(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n',
    });
    assert.deepEqual(evidence.reproduction, []);
    assert.equal(evidence.verdict, 'unverified');
    assert.ok(evidence.notes.some((n) => /^test_mul.MulTest.test_mul is not counted as a reproduction: it did not run on the base code \(on the base code unittest.loader._FailedTest.test_mul did not load/.test(n)), evidence.notes.join('\n'));
  });

  test('a test that fails on the base code with a TypeError from the code under test is a reproduction', () => {
    const { evidence } = evidenceFor('unittest', command, { ...base, 'calc.py': 'def add(a, b):\n    return a + b\n' }, {
      'calc.py': 'def add(a, b):\n    return int(a) + int(b)\n',
      'test_calc.py': `${TEST}\n    def test_strings(self):\n        self.assertEqual(add("2", 3), 5)\n`,
    });
    assert.deepEqual(evidence.reproduction, ['test_calc.AddTest.test_strings']);
    assert.equal(evidence.verdict, 'verified');
  });
});
