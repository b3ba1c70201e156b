import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { compareRuns, parseableCommand, parseTestRun, type ParsedRun, type TestCaseOutcome } from '../../src/test-results/index.ts';

// Real output, captured on this project's development machine (test/fixtures/runner-output/README.md says how).
const fixture = (name: string) => readFileSync(new URL(`../fixtures/runner-output/${name}`, import.meta.url), 'utf8');

function outcomes(run: ParsedRun): Record<string, TestCaseOutcome> {
  assert.ok(run.parsed, run.parsed ? '' : run.reason);
  return Object.fromEntries(run.results.map((r) => [r.id, r.outcome]));
}

describe('per-test parsers on real output', () => {
  test('pytest -rA: passed, failed, error (a fixture and a module that does not import), xfail; skipped tests have no id there', () => {
    const run = parseTestRun('pytest', fixture('pytest9-rA.txt'));
    assert.deepEqual(outcomes(run), {
      'tests/test_calc.py::test_add': 'passed',
      'tests/test_calc.py::TestThing::test_param[1]': 'passed',
      'tests/test_calc.py::test_xfail': 'passed',
      'tests/test_broken_import.py': 'error',
      'tests/test_calc.py::test_uses_broken': 'error',
      'tests/test_calc.py::test_sub': 'failed',
      'tests/test_calc.py::TestThing::test_param[2]': 'failed',
    });
    assert.equal(run.parsed && run.format, 'pytest');
  });

  test('pytest -v: the skipped test is named', () => {
    const r = outcomes(parseTestRun('pytest', fixture('pytest9-v.txt')));
    assert.equal(r['tests/test_calc.py::test_skip'], 'skipped');
    assert.equal(r['tests/test_calc.py::test_uses_broken'], 'error');
    assert.equal(r['tests/test_calc.py::TestThing::test_param[2]'], 'failed');
    assert.equal(Object.keys(r).length, 8);
  });

  test('pytest interrupted by a collection error: the file is the one result', () => {
    assert.deepEqual(outcomes(parseTestRun('pytest', fixture('pytest9-rA-collection-error.txt'))), { 'tests/test_broken_import.py': 'error' });
  });

  test('unittest -v (3.11): ok, FAIL, ERROR, skipped, expected failure, a module that does not import', () => {
    assert.deepEqual(outcomes(parseTestRun('unittest', fixture('unittest311-v.txt'))), {
      'unittest.loader._FailedTest.test_broken': 'error',
      'test_shapes.ShapeTest.test_area': 'passed',
      'test_shapes.ShapeTest.test_known_bug': 'passed',
      'test_shapes.ShapeTest.test_later': 'skipped',
      'test_shapes.ShapeTest.test_raises': 'error',
      'test_shapes.ShapeTest.test_wrong': 'failed',
    });
  });

  const nodeExpected = {
    adds: 'passed',
    fails: 'failed',
    skipped: 'skipped',
    'todo later': 'skipped',
    'group > inner ok': 'passed',
    'group > inner bad': 'failed',
    'group > nested > deep': 'passed',
    'other file ok': 'passed',
  };

  test('node --test TAP (node 20): suites are not tests, subtests are "suite > test"', () => {
    const run = parseTestRun('node-test', fixture('node20-tap.txt'));
    assert.deepEqual(outcomes(run), nodeExpected);
    assert.equal(run.parsed && run.format, 'tap');
  });

  test('node --test spec reporter (node 20): the same ids', () => {
    const r = outcomes(parseTestRun('node-test', fixture('node20-spec.txt')));
    for (const [id, o] of Object.entries(nodeExpected)) assert.equal(r[id], o, id);
  });

  test("a linter's ✖ lines are not node tests (npm test running `xo && ava`): only lines that end with a duration are", () => {
    const xo = '\n> pkg@1.0.0 test\n> xo && ava\n\n  node_modules/@types/node/http2.d.ts:1064:20\n  ✖  1064:20   Cannot find name E.\n  ✖  1065:21   , expected.\n\n  2 errors\n';
    const alone = parseTestRun('npm', xo);
    assert.equal(alone.parsed, false, JSON.stringify(alone));
    const r = outcomes(parseTestRun('npm', `${xo}\n✔ adds (1.6ms)\n✖ fails (1.2ms)\n▶ group\n  ✔ inner (0.2ms)\n▶ group (0.4ms)\n`));
    assert.deepEqual(r, { adds: 'passed', fails: 'failed', 'group > inner': 'passed' });
  });

  test('TAP from other producers: no dash, no description, TODO', () => {
    const r = outcomes(parseTestRun(null, 'TAP version 13\n1..4\nok 1 first\nnot ok 2 - second\nok 3 # SKIP no db\nnot ok 4 - later # TODO\n'));
    assert.deepEqual(r, { first: 'passed', second: 'failed', '#3': 'skipped', later: 'skipped' });
  });

  test('go test -json (go 1.19): tests, subtests, a skip, and a package that does not build', () => {
    const run = parseTestRun('go', fixture('go119-json.txt'));
    assert.deepEqual(outcomes(run), {
      'example.com/gom/calc::TestAdd': 'passed',
      'example.com/gom/calc::TestWrong': 'failed',
      'example.com/gom/calc::TestSkipped': 'skipped',
      'example.com/gom/calc::TestTable/one': 'passed',
      'example.com/gom/calc::TestTable/two': 'failed',
      'example.com/gom/calc::TestTable': 'failed',
      'example.com/gom/broken': 'error',
    });
    assert.equal(run.parsed && run.format, 'go-json');
  });

  test('go test -v text gives the same ids', () => {
    const json = outcomes(parseTestRun('go', fixture('go119-json.txt')));
    const text = parseTestRun('make', fixture('go119-v.txt'));
    assert.deepEqual(outcomes(text), json);
    assert.equal(text.parsed && text.format, 'go-text');
  });

  test('cargo test: unit tests, an ignored one, an integration test of the same name, a doctest', () => {
    assert.deepEqual(outcomes(parseTestRun('cargo', fixture('cargo-test.txt'))), {
      'src/lib.rs::tests::slow': 'skipped',
      'src/lib.rs::tests::adds': 'passed',
      'src/lib.rs::tests::wrong': 'failed',
      'tests/api.rs::adds': 'passed',
      'doc::src/lib.rs - add (line 3)': 'passed',
    });
    assert.deepEqual(outcomes(parseTestRun('cargo', fixture('cargo-test-compile-error.txt'))), { 'tests/broken.rs': 'error' });
  });

  test('Maven Surefire report: failure, error and skipped kept apart', () => {
    assert.deepEqual(outcomes(parseTestRun('maven', fixture('surefire-TEST-com.example.CalcTest.xml'))), {
      'com.example.CalcTest.adds': 'passed',
      'com.example.CalcTest.later': 'skipped',
      'com.example.CalcTest.wrong': 'failed',
      'com.example.CalcTest.throwsError': 'error',
    });
  });

  test('jest --verbose and jest-junit (jest 29): the tree, todo, a suite that failed to run', () => {
    assert.deepEqual(outcomes(parseTestRun('jest', fixture('jest29-verbose.txt'))), {
      '__tests__/math.test.js::top level': 'passed',
      '__tests__/math.test.js::math > adds': 'passed',
      '__tests__/math.test.js::math > fails': 'failed',
      '__tests__/math.test.js::math > skipped one': 'skipped',
      '__tests__/math.test.js::math > write more': 'skipped',
      '__tests__/math.test.js::math > inner > deep ok': 'passed',
      '__tests__/other.test.js::other ok': 'passed',
      '__tests__/other.test.js::throws': 'failed',
      '__tests__/broken.test.js': 'error',
    });
    const junit = outcomes(parseTestRun('jest', fixture('jest29-junit.xml')));
    assert.equal(junit['math adds'], 'passed');
    assert.equal(junit['math fails'], 'failed');
    assert.equal(junit['math skipped one'], 'skipped');
    assert.equal(junit['top level'], 'passed');
  });

  test('an npm or make wrapper: the output is recognised by its shape', () => {
    const run = parseTestRun('npm', `> pkg@1.0.0 test\n> node --test\n\n${fixture('node20-tap.txt')}`);
    assert.equal(run.parsed && run.format, 'tap');
    assert.equal(parseTestRun('make', fixture('cargo-test.txt')).parsed, true);
  });

  test('nothing readable: parsed false with the reason', () => {
    const run = parseTestRun('maven', '[INFO] BUILD FAILURE\n');
    assert.equal(run.parsed, false);
    assert.match(!run.parsed ? run.reason : '', /no per-test results in the output of maven.*BUILD FAILURE/);
    assert.equal(parseTestRun(null, '').parsed, false);
  });
});

describe('parseableCommand', () => {
  test('the runner flags go right after the runner, once', () => {
    const pytestFlags = '-rA -p no:cacheprovider --continue-on-collection-errors';
    assert.equal(parseableCommand('pytest', 'python3 -m pytest tests -x'), `python3 -m pytest ${pytestFlags} tests -x`);
    assert.equal(parseableCommand('pytest', 'cd src && "$HOME/.venv/bin/python" -m pytest -q | tee out'), `cd src && "$HOME/.venv/bin/python" -m pytest ${pytestFlags} -q | tee out`);
    assert.equal(parseableCommand('pytest', `pytest ${pytestFlags}`), `pytest ${pytestFlags}`);
    assert.equal(parseableCommand('unittest', 'python -m unittest discover -s tests'), 'python -m unittest discover -v -s tests');
    assert.equal(parseableCommand('unittest', 'python -m unittest'), 'python -m unittest -v');
    assert.equal(parseableCommand('unittest', 'python3 -m unittest -q'), 'python3 -m unittest -v', 'a quiet run names no test: -q gives way to -v');
    assert.equal(parseableCommand('unittest', 'python manage.py test'), 'python manage.py test -v 2');
    assert.equal(parseableCommand('go', 'go test -race ./...'), 'go test -json -race ./...');
    assert.equal(parseableCommand('node-test', 'node --test test/'), 'node --test --test-reporter=tap test/');
    assert.equal(parseableCommand('node-test', 'node --test --test-reporter=spec'), 'node --test --test-reporter=spec');
    assert.equal(parseableCommand('jest', 'npm test'), 'npm test -- --verbose');
    assert.equal(parseableCommand('jest', 'npx jest --ci'), 'npx jest --verbose --ci');
    assert.equal(parseableCommand('cargo', 'cargo test --offline -q'), 'cargo test --offline -q -- --format=pretty');
    assert.equal(parseableCommand('cargo', 'cargo test --offline'), 'cargo test --offline');
    assert.equal(parseableCommand('make', 'make test'), 'make test');
    assert.equal(parseableCommand(null, 'pytest'), 'pytest');
  });
});

describe('compareRuns', () => {
  const run = (entries: Record<string, TestCaseOutcome>): ParsedRun => ({ parsed: true, format: 'pytest', results: Object.entries(entries).map(([id, outcome]) => ({ id, outcome })) });

  test('every category, and tests seen on one side only', () => {
    const c = compareRuns(run({ a: 'failed', b: 'passed', c: 'error', d: 'passed', e: 'skipped', gone: 'passed' }), run({ a: 'passed', b: 'error', c: 'failed', d: 'passed', e: 'passed', added: 'passed' }));
    assert.deepEqual(
      { fixed: c.fixed, broken: c.broken, still: c.still_failing, both: c.passed_both, skipped: c.skipped, before: c.only_before, after: c.only_after },
      { fixed: ['a'], broken: ['b'], still: ['c'], both: ['d'], skipped: ['e'], before: ['gone'], after: ['added'] },
    );
    assert.equal(c.counts.fixed, 1);
    assert.deepEqual(c.counts.before, { passed: 3, failed: 1, skipped: 1, error: 1 });
    assert.equal(c.fallback, null);
  });

  test('a side that could not be parsed, or ran no test, is the fallback marker', () => {
    const c = compareRuns(run({ a: 'passed' }), parseTestRun('maven', '[INFO] BUILD FAILURE'));
    assert.match(c.fallback?.reason ?? '', /^per-test results could not be compared \(after: no per-test results in the output of maven/);
    assert.deepEqual(c.fixed, []);
    assert.match(compareRuns(run({}), run({ a: 'passed' })).fallback?.reason ?? '', /before: no tests ran/);
  });
});
