import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { buildTestCommand, detectFramework, lookupStatus, parseTestOutput } from '../../src/test-results/judging.ts';

// Real output, captured from pytest 9, Python 3.11's unittest and node 18 / node 20 (test/fixtures/eval).
const fixture = (name: string) => readFileSync(new URL(`../fixtures/eval/${name}`, import.meta.url), 'utf8');

describe('per-test outcomes', () => {
  test('pytest -rA summary lines', () => {
    const r = parseTestOutput('pytest', fixture('pytest-rA.txt'));
    assert.equal(r.get('tests/test_x.py::test_a'), 'passed');
    assert.equal(r.get('tests/test_x.py::test_b'), 'failed');
    assert.equal(r.get('tests/test_x.py::TestK::test_c[a b]'), 'passed', 'a parametrised id with a space');
    assert.equal(r.get('tests/test_x.py::TestK::test_xf'), 'passed', 'XFAIL counts as passing, as in SWE-bench');
    assert.equal(r.get('tests/test_x.py::test_d'), 'failed', 'ERROR (a broken fixture) is a failure');
  });

  test('pytest -v lines, skipped with a reason', () => {
    const r = parseTestOutput('pytest', fixture('pytest-v.txt'));
    assert.equal(r.get('tests/test_x.py::TestK::test_skip'), 'skipped');
    assert.equal(r.get('tests/test_x.py::TestK::test_c[1]'), 'passed');
    assert.equal(r.get('tests/test_x.py::test_b'), 'failed');
    assert.equal(r.size, 7);
  });

  test('pytest JUnit XML: a path id is found through its dotted classname', () => {
    const r = parseTestOutput('pytest', fixture('pytest-junit.xml'));
    assert.equal(lookupStatus(r, 'tests/test_x.py::test_b'), 'failed');
    assert.equal(lookupStatus(r, 'tests/test_x.py::TestK::test_c[1]'), 'passed');
    assert.equal(lookupStatus(r, 'tests/test_x.py::TestK::test_skip'), 'skipped');
    assert.equal(lookupStatus(r, 'tests/test_x.py::test_d'), 'failed');
  });

  test('unittest -v: ok, FAIL, ERROR, skipped, expected failure, a docstring on its own line', () => {
    const r = parseTestOutput('unittest', fixture('unittest-v.txt'));
    assert.equal(r.get('test_m.T.test_ok'), 'passed');
    assert.equal(r.get('test_m.T.test_doc'), 'passed');
    assert.equal(r.get('test_m.T.test_fail'), 'failed');
    assert.equal(r.get('test_m.T.test_err'), 'failed');
    assert.equal(r.get('test_m.T.test_skip'), 'skipped');
    assert.equal(r.get('test_m.T.test_xf'), 'passed');
    // SWE-bench's Django-style id finds the same test.
    assert.equal(lookupStatus(r, 'test_fail (test_m.T)'), 'failed');
    // Older Pythons print "name (module.Class)".
    const old = parseTestOutput('unittest', 'test_ok (test_m.T) ... ok\ntest_bad (test_m.T) ... FAIL\n');
    assert.equal(old.get('test_m.T.test_ok'), 'passed');
    assert.equal(old.get('test_m.T.test_bad'), 'failed');
  });

  test('node --test TAP (node 18): nested subtests named "suite > test"', () => {
    const r = parseTestOutput('node', fixture('node18-tap.txt'));
    assert.equal(r.get('adds'), 'passed');
    assert.equal(r.get('group > inner ok'), 'passed');
    assert.equal(r.get('group > inner bad'), 'failed');
    assert.equal(r.get('fails'), 'failed');
    assert.equal(lookupStatus(r, 'test/a.test.js::group > inner ok'), 'passed');
  });

  test('node --test spec reporter (node 20) and JUnit reporter give the same names', () => {
    const spec = parseTestOutput('node', fixture('node20-spec.txt'));
    const junit = parseTestOutput('node', fixture('node20-junit.xml'));
    for (const r of [spec, junit]) {
      assert.equal(r.get('adds'), 'passed');
      assert.equal(r.get('group > inner ok'), 'passed');
      assert.equal(r.get('group > inner bad'), 'failed');
      assert.equal(r.get('fails'), 'failed');
    }
  });

  test('an unknown runner: whichever parser recognises the output', () => {
    assert.equal(parseTestOutput(null, fixture('unittest-v.txt')).get('test_m.T.test_ok'), 'passed');
    assert.equal(parseTestOutput(null, 'nothing useful here').size, 0);
  });
});

describe('the judging command', () => {
  test('the runner is recognised from the test command', () => {
    assert.equal(detectFramework('python3 -m pytest -q'), 'pytest');
    assert.equal(detectFramework('python -m unittest'), 'unittest');
    assert.equal(detectFramework('./tests/runtests.py --verbosity 2'), 'unittest');
    assert.equal(detectFramework('node --test'), 'node');
    assert.equal(detectFramework('make check'), null);
  });

  test('test ids and reporting flags are appended, quoted for the shell', () => {
    assert.equal(buildTestCommand('python3 -m pytest', 'pytest', ['t/test_a.py::test_x[a b]', 't/test_a.py::test_y']), "python3 -m pytest -rA 't/test_a.py::test_x[a b]' t/test_a.py::test_y");
    assert.equal(buildTestCommand('python3 -m unittest', 'unittest', ['test_add (calc.T)', 'calc.T.test_mul']), 'python3 -m unittest -v calc.T.test_add calc.T.test_mul');
    assert.equal(buildTestCommand('node --test', 'node', ['test/a.test.js::adds', 'test/a.test.js::group > x', 'no-file']), 'node --test --test-reporter=tap test/a.test.js');
    assert.equal(buildTestCommand('cd src && python3 -m pytest {tests} -x', 'pytest', ["it's"]), "cd src && python3 -m pytest -rA 'it'\\''s' -x");
  });
});
