import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { compareRuns, parseableCommand, parseTestRun, type ParsedRun, type TestCaseOutcome } from '../../src/test-results/index.ts';

// The parseable commands run for real, in a shell, with the runners themselves (node, python) or a
// stand-in: what the parsers read is what the runners print with the flags added.
const fixture = (name: string) => readFileSync(new URL(`../fixtures/runner-output/${name}`, import.meta.url), 'utf8');

function outcomes(run: ParsedRun): Record<string, TestCaseOutcome> {
  assert.ok(run.parsed, run.parsed ? '' : run.reason);
  return Object.fromEntries(run.results.map((r) => [r.id, r.outcome]));
}

describe('parseable commands, run for real', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'lilypad-parseable-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  // Without NODE_TEST_CONTEXT, which would make a nested node --test report to this runner instead.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_TEST_CONTEXT'));
  const bash = (command: string, cwd: string) => spawnSync('/bin/bash', ['-c', `( ${command}\n) 2>&1`], { cwd, encoding: 'utf8', env });

  test('node --test, run for real with the added reporter, parses; the exit status is the runner\'s', () => {
    const dir = path.join(tmp, 'node');
    mkdirSync(path.join(dir, 'test'), { recursive: true });
    writeFileSync(path.join(dir, 'test', 'a.test.mjs'), "import test from 'node:test';\nimport assert from 'node:assert';\ntest('ok one', () => {});\ntest('bad one', () => assert.equal(1, 2));\n");
    const res = bash(parseableCommand('node-test', 'node --test'), dir);
    assert.equal(res.status, 1);
    assert.deepEqual(outcomes(parseTestRun('node-test', res.stdout)), { 'ok one': 'passed', 'bad one': 'failed' });
  });

  test('Maven/Gradle: stale reports are removed, this run\'s are printed, the exit status is kept', () => {
    const dir = path.join(tmp, 'mvn');
    mkdirSync(path.join(dir, 'mod', 'target', 'surefire-reports'), { recursive: true });
    writeFileSync(path.join(dir, 'mod', 'target', 'surefire-reports', 'TEST-old.xml'), '<testsuite><testcase classname="Old" name="stale"/></testsuite>');
    // A stand-in for mvn that writes a report as Surefire does and fails.
    const fake = `mkdir -p mod/target/surefire-reports && cat > mod/target/surefire-reports/TEST-com.example.CalcTest.xml <<'XML'\n${fixture('surefire-TEST-com.example.CalcTest.xml')}\nXML\nexit 1`;
    const res = bash(parseableCommand('maven', fake), dir);
    assert.equal(res.status, 1);
    const r = outcomes(parseTestRun('maven', res.stdout));
    assert.equal(r['Old.stale'], undefined, 'a report from an earlier run is not this run\'s');
    assert.equal(r['com.example.CalcTest.throwsError'], 'error');
    assert.equal(r['com.example.CalcTest.adds'], 'passed');
  });

  const hasPytest = spawnSync('python3', ['-c', 'import pytest'], { encoding: 'utf8' }).status === 0;
  test('pytest and unittest, run for real before and after a fix, compared', { skip: hasPytest ? false : 'python3 with pytest is not installed' }, () => {
    const dir = path.join(tmp, 'py');
    mkdirSync(dir, { recursive: true });
    const writeCalc = (body: string) => writeFileSync(path.join(dir, 'calc.py'), body);
    writeFileSync(
      path.join(dir, 'test_calc.py'),
      'import unittest\nfrom calc import add, sub\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n',
    );
    writeCalc('def add(a, b):\n    return a - b\n\ndef sub(a, b):\n    return a - b\n');
    const runBoth = () => ({
      pytest: parseTestRun('pytest', bash(parseableCommand('pytest', 'python3 -m pytest'), dir).stdout),
      unittest: parseTestRun('unittest', bash(parseableCommand('unittest', 'python3 -m unittest'), dir).stdout),
    });
    const before = runBoth();
    // The "fix" repairs add and breaks sub.
    writeCalc('def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a + b\n');
    const afterFix = runBoth();
    const prefix = { pytest: 'test_calc.py::T::', unittest: 'test_calc.T.' };
    for (const runner of ['pytest', 'unittest'] as const) {
      const c = compareRuns(before[runner], afterFix[runner]);
      const p = prefix[runner];
      assert.equal(c.fallback, null);
      assert.deepEqual(c.fixed, [`${p}test_add`], runner);
      assert.deepEqual(c.broken, [`${p}test_sub`], runner);
      assert.deepEqual(c.passed_both, [`${p}test_zero`], runner);
      assert.deepEqual(c.counts.after, { passed: 2, failed: 1, skipped: 0, error: 0 });
    }
    assert.equal(execFileSync('ls', ['-a', dir], { encoding: 'utf8' }).includes('.pytest_cache'), false, 'no pytest cache written into the checkout');
  });
});
