import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { evidenceOf, failureOnBase, type EvidenceInput, type TestRunRecord, type WeakenedTest } from '../../src/evidence/index.ts';
import { parseTestRun, type TestRunner } from '../../src/test-results/index.ts';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/runner-output/${name}`, import.meta.url), 'utf8');

function run(runner: TestRunner, output: string, exitCode: number | null): TestRunRecord {
  return { run: parseTestRun(runner, output), exitCode, output };
}

/** pytest -rA output in the shape pytest 9 prints (see test/fixtures/runner-output/pytest9-rA.txt). */
function pytest(summary: string[], exitCode?: number): TestRunRecord {
  const text = [
    '============================= test session starts ==============================',
    'platform linux -- Python 3.11.7, pytest-9.0.3, pluggy-1.6.0',
    'rootdir: /src',
    `collected ${summary.length} items`,
    '',
    '=========================== short test summary info ============================',
    ...summary,
    `============================== ${summary.length} done in 0.05s ===============================`,
    '',
  ].join('\n');
  return run('pytest', text, exitCode ?? (summary.some((l) => /^(FAILED|ERROR)/.test(l)) ? 1 : 0));
}

const OLD = 'PASSED tests/test_calc.py::test_add';
const input = (over: Partial<EvidenceInput>): EvidenceInput => ({
  before: pytest([OLD]),
  after: pytest([OLD]),
  changeTestsOnBase: null,
  changeTestsWithChange: null,
  weakened: [],
  ...over,
});
const deletedAssertion: WeakenedTest = { file: 'tests/test_calc.py', test: 'test_sub', what: 'deleted an assertion: `assert sub(3, 2) == 1`' };

describe("evidence: issue 17's proof cases", () => {
  test('a fix with a new test that fails before and passes after is verified, the test named as a reproduction', () => {
    const e = evidenceOf(
      input({
        after: pytest([OLD, 'PASSED tests/test_calc.py::test_add_negative']),
        changeTestsOnBase: pytest(['FAILED tests/test_calc.py::test_add_negative - assert -5 == 1']),
        changeTestsWithChange: pytest(['PASSED tests/test_calc.py::test_add_negative']),
      }),
    );
    assert.equal(e.verdict, 'verified');
    assert.deepEqual(e.reproduction, ['tests/test_calc.py::test_add_negative']);
    assert.deepEqual([e.fixed, e.broken, e.still_failing, e.weakened], [[], [], [], []]);
  });

  test('a fix shown only by an existing test going from failing to passing is verified, the test named as fixed', () => {
    const e = evidenceOf(input({ before: pytest([OLD, 'FAILED tests/test_calc.py::test_sub - assert 5 == 1']), after: pytest([OLD, 'PASSED tests/test_calc.py::test_sub']) }));
    assert.equal(e.verdict, 'verified');
    assert.deepEqual(e.fixed, ['tests/test_calc.py::test_sub']);
    assert.deepEqual(e.reproduction, []);
    assert.ok(e.notes.some((n) => /no test files/.test(n)));
  });

  test('a change plus a test that passes on the base code too is unverified: the test does not show the issue', () => {
    const e = evidenceOf(
      input({
        after: pytest([OLD, 'PASSED tests/test_calc.py::test_new']),
        changeTestsOnBase: pytest(['PASSED tests/test_calc.py::test_new']),
        changeTestsWithChange: pytest(['PASSED tests/test_calc.py::test_new']),
      }),
    );
    assert.equal(e.verdict, 'unverified');
    assert.deepEqual(e.reproduction, []);
    assert.ok(e.notes.some((n) => /1 of the change's tests pass on the base code too, so they do not show the issue: tests\/test_calc.py::test_new/.test(n)));
  });

  test('a change that deletes an assertion to make a test pass is weakened, not verified (though the test went from failing to passing)', () => {
    const e = evidenceOf(
      input({
        before: pytest([OLD, 'FAILED tests/test_calc.py::test_sub - assert 5 == 1']),
        after: pytest([OLD, 'PASSED tests/test_calc.py::test_sub']),
        changeTestsOnBase: pytest([OLD, 'PASSED tests/test_calc.py::test_sub']),
        changeTestsWithChange: pytest([OLD, 'PASSED tests/test_calc.py::test_sub']),
        weakened: [deletedAssertion],
      }),
    );
    assert.equal(e.verdict, 'unverified');
    assert.deepEqual(e.weakened, [deletedAssertion]);
    // The weakened test passes on the base code now: it is not counted as fixed either.
    assert.deepEqual(e.fixed, []);
    assert.ok(e.notes.some((n) => /not counted as fixed/.test(n)));
  });

  test('weakening blocks verified even when another test reproduces the issue', () => {
    const e = evidenceOf(
      input({
        changeTestsOnBase: pytest(['FAILED tests/test_calc.py::test_new - assert 0 == 1']),
        changeTestsWithChange: pytest(['PASSED tests/test_calc.py::test_new']),
        weakened: [deletedAssertion],
      }),
    );
    assert.equal(e.verdict, 'unverified');
    assert.deepEqual(e.reproduction, ['tests/test_calc.py::test_new']);
    assert.ok(e.notes.includes('not verified: the change weakens 1 test(s)'));
  });

  test('a change that breaks another test is failing, even with a reproduction', () => {
    const e = evidenceOf(
      input({
        before: pytest([OLD, 'PASSED tests/test_other.py::test_mul']),
        after: pytest([OLD, 'FAILED tests/test_other.py::test_mul - assert 7 == 6', 'PASSED tests/test_calc.py::test_new']),
        changeTestsOnBase: pytest(['FAILED tests/test_calc.py::test_new - assert 0 == 1']),
        changeTestsWithChange: pytest(['PASSED tests/test_calc.py::test_new']),
      }),
    );
    assert.equal(e.verdict, 'failing');
    assert.deepEqual(e.broken, ['tests/test_other.py::test_mul']);
    assert.deepEqual(e.reproduction, ['tests/test_calc.py::test_new']);
  });
});

describe('evidence: why a test failed on the base code', () => {
  test('a new test file that does not import on the base code (collection error) is not a reproduction', () => {
    const e = evidenceOf(
      input({
        changeTestsOnBase: run('pytest', fixture('pytest9-rA-collection-error.txt'), 2),
        changeTestsWithChange: pytest(['PASSED tests/test_broken_import.py::test_uses_new']),
      }),
    );
    assert.equal(e.verdict, 'unverified');
    assert.deepEqual(e.reproduction, []);
    assert.ok(e.notes.some((n) => n.includes('tests/test_broken_import.py::test_uses_new is not counted as a reproduction: it did not run on the base code (on the base code tests/test_broken_import.py did not load')));
  });

  test('a test failing with ImportError, SyntaxError, NameError or a missing fixture is not a reproduction; AttributeError and a fixture that raises are', () => {
    const ids = ['imports', 'syntax', 'name', 'fixture', 'attribute', 'setup'].map((n) => `tests/test_new.py::test_${n}`);
    const e = evidenceOf(
      input({
        changeTestsOnBase: pytest([
          `FAILED ${ids[0]} - ImportError: cannot import name 'parse_date' from 'calc' (/src/calc.py)`,
          `FAILED ${ids[1]} - SyntaxError: invalid syntax`,
          `FAILED ${ids[2]} - NameError: name 'parse_date' is not defined`,
          `ERROR ${ids[3]}`,
          `FAILED ${ids[4]} - AttributeError: 'Calc' object has no attribute 'round'`,
          `ERROR ${ids[5]} - ValueError: negative amounts are not allowed`,
        ]),
        changeTestsWithChange: pytest(ids.map((id) => `PASSED ${id}`)),
      }),
    );
    assert.deepEqual(e.reproduction, [ids[4], ids[5]].sort());
    assert.equal(e.verdict, 'verified');
    for (const id of ids.slice(0, 3)) assert.ok(e.notes.some((n) => n.startsWith(`${id} is not counted`) && /the test's own code or imports/.test(n)), id);
    assert.ok(e.notes.some((n) => n.startsWith(`${ids[3]} is not counted`) && /does not say why/.test(n)));
  });

  test('unittest: an ERROR whose traceback ends in TypeError counts; a module that does not import does not; without the output an ERROR does not', () => {
    const base = run('unittest', fixture('unittest311-v.txt'), 1);
    const withChange = run('unittest', 'test_raises (test_shapes.ShapeTest.test_raises) ... ok\ntest_wrong (test_shapes.ShapeTest.test_wrong) ... ok\ntest_broken (test_broken.T.test_broken) ... ok\n\nRan 3 tests in 0.001s\n\nOK\n', 0);
    const e = evidenceOf(input({ before: withChange, after: withChange, changeTestsOnBase: base, changeTestsWithChange: withChange }));
    // test_raises errored with ValueError (the code under test raised), test_wrong failed an assertion.
    assert.deepEqual(e.reproduction, ['test_shapes.ShapeTest.test_raises', 'test_shapes.ShapeTest.test_wrong']);
    assert.ok(e.notes.some((n) => /^test_broken.T.test_broken is not counted as a reproduction: it did not run on the base code \(on the base code unittest.loader._FailedTest.test_broken did not load/.test(n)));
    const noOutput = evidenceOf(input({ before: withChange, after: withChange, changeTestsOnBase: { ...base, output: '' }, changeTestsWithChange: withChange }));
    assert.deepEqual(noOutput.reproduction, ['test_shapes.ShapeTest.test_wrong']);
  });

  test('go: a test in a package that does not build on the base code (it calls a function the change adds) is not a reproduction', () => {
    const base = run('go', fixture('go119-json.txt'), 1);
    const pass = (pkg: string, t: string) => `{"Action":"pass","Package":"${pkg}","Test":"${t}"}`;
    const withChange = run('go', [pass('example.com/gom/broken', 'TestBroken'), pass('example.com/gom/calc', 'TestWrong'), '{"Action":"pass","Package":"example.com/gom/calc"}'].join('\n'), 0);
    const e = evidenceOf(input({ changeTestsOnBase: base, changeTestsWithChange: withChange }));
    assert.ok(!e.reproduction.includes('example.com/gom/broken::TestBroken'));
    assert.ok(e.notes.some((n) => /example.com\/gom\/broken::TestBroken is not counted.*example.com\/gom\/broken did not load/.test(n)));
    // TestWrong failed on the base code and passes with the change: a reproduction.
    assert.deepEqual(e.reproduction, ['example.com/gom/calc::TestWrong']);
  });
});

test('failureOnBase: a result for a whole file, module, package or target never counts, in every format that has one', () => {
  const whole: Array<[string, Parameters<typeof failureOnBase>[2]]> = [
    ['tests/test_x.py', 'pytest'],
    ['unittest.loader._FailedTest.test_x', 'unittest'],
    ['__tests__/x.test.js', 'jest'],
    ['example.com/m/calc', 'go-json'],
    ['example.com/m/calc', 'go-text'],
    ['tests/api.rs', 'cargo'],
    ['test/x.test.mjs', 'tap'],
    ['test/x.test.ts', 'node-spec'],
  ];
  for (const [id, format] of whole) assert.deepEqual(failureOnBase(id, 'failed', format, new Map([[id, 'AssertionError']])).counts, false, `${format}: ${id}`);
  const single: Array<[string, Parameters<typeof failureOnBase>[2]]> = [
    ['tests/test_x.py::test_a', 'pytest'],
    ['x.T.test_a', 'unittest'],
    ['__tests__/x.test.js::adds', 'jest'],
    ['example.com/m/calc::TestAdd', 'go-json'],
    ['TestAdd', 'go-text'],
    ['tests/api.rs::adds', 'cargo'],
    ['adds', 'tap'],
    ['com.x.CalcTest.adds', 'junit'],
  ];
  for (const [id, format] of single) assert.deepEqual(failureOnBase(id, 'failed', format, new Map()).counts, true, `${format}: ${id}`);
});

describe('evidence: runs that cannot be read per test, and other edges', () => {
  const garbled = (exitCode: number): TestRunRecord => ({ run: parseTestRun('other', 'Segmentation fault (core dumped)\n'), exitCode, output: 'Segmentation fault (core dumped)\n' });

  test('before and after unreadable: exit codes only; a failing-then-passing command names no fixed test, a reproduction still verifies', () => {
    const e = evidenceOf(input({ before: garbled(1), after: garbled(0) }));
    assert.equal(e.verdict, 'unverified');
    assert.ok(e.notes.some((n) => /judged by exit codes/.test(n)));
    assert.ok(e.notes.some((n) => /no test can be named as fixed/.test(n)));
    const withRepro = evidenceOf(
      input({ before: garbled(1), after: garbled(0), changeTestsOnBase: pytest(['FAILED tests/test_new.py::test_a - assert 1 == 2']), changeTestsWithChange: pytest(['PASSED tests/test_new.py::test_a']) }),
    );
    assert.equal(withRepro.verdict, 'verified');
  });

  test('after unreadable and failing is failing; after readable with the command passing before names every failure as broken', () => {
    assert.equal(evidenceOf(input({ before: garbled(0), after: garbled(1) })).verdict, 'failing');
    assert.equal(evidenceOf(input({ before: garbled(1), after: garbled(1) })).verdict, 'failing');
    const e = evidenceOf(input({ before: garbled(0), after: pytest([OLD, 'FAILED tests/test_calc.py::test_sub - assert 0']) }));
    assert.equal(e.verdict, 'failing');
    assert.deepEqual(e.broken, ['tests/test_calc.py::test_sub']);
  });

  test("the change's own tests unreadable: no reproduction, said why; failing with the change is failing", () => {
    const e = evidenceOf(input({ changeTestsOnBase: garbled(1), changeTestsWithChange: garbled(0) }));
    assert.equal(e.verdict, 'unverified');
    assert.ok(e.notes.some((n) => /they failed on the base code \(exit code 1\) and pass with the change, but their output gives no per-test results/.test(n)));
    assert.equal(evidenceOf(input({ changeTestsOnBase: garbled(1), changeTestsWithChange: garbled(1) })).verdict, 'failing');
  });

  test('a test that failed before and still fails does not make a change failing; one the change adds that fails with it does', () => {
    const pre = 'FAILED tests/test_io.py::test_network - OSError: no network';
    const e = evidenceOf(
      input({
        before: pytest([OLD, pre]),
        after: pytest([OLD, pre, 'PASSED tests/test_calc.py::test_new']),
        changeTestsOnBase: pytest(['FAILED tests/test_calc.py::test_new - assert 0 == 1']),
        changeTestsWithChange: pytest(['PASSED tests/test_calc.py::test_new']),
      }),
    );
    assert.equal(e.verdict, 'verified');
    assert.deepEqual(e.still_failing, ['tests/test_io.py::test_network']);
    assert.ok(e.notes.some((n) => /failed before the change and still fail \(not counted against it\)/.test(n)));
    const own = evidenceOf(
      input({
        after: pytest([OLD, 'FAILED tests/test_calc.py::test_new - assert 0 == 1']),
        changeTestsOnBase: pytest(['FAILED tests/test_calc.py::test_new - assert 0 == 1']),
        changeTestsWithChange: pytest(['FAILED tests/test_calc.py::test_new - assert 0 == 1']),
      }),
    );
    assert.equal(own.verdict, 'failing');
    assert.deepEqual(own.still_failing, ['tests/test_calc.py::test_new']);
  });

  test("a test of the change's that passes on the base code and fails with the change is broken", () => {
    const e = evidenceOf(
      input({
        after: pytest([OLD, 'FAILED tests/test_calc.py::test_edge - assert 1 == 0']),
        changeTestsOnBase: pytest(['PASSED tests/test_calc.py::test_edge']),
        changeTestsWithChange: pytest(['FAILED tests/test_calc.py::test_edge - assert 1 == 0']),
      }),
    );
    assert.equal(e.verdict, 'failing');
    assert.deepEqual(e.broken, ['tests/test_calc.py::test_edge']);
  });

  test('an existing test the change modified, failing before and on the base code, passing after, is fixed (not a reproduction)', () => {
    const fail = 'FAILED tests/test_calc.py::test_sub - assert 5 == 1';
    const e = evidenceOf(
      input({ before: pytest([OLD, fail]), after: pytest([OLD, 'PASSED tests/test_calc.py::test_sub']), changeTestsOnBase: pytest([fail]), changeTestsWithChange: pytest(['PASSED tests/test_calc.py::test_sub']) }),
    );
    assert.equal(e.verdict, 'verified');
    assert.deepEqual([e.fixed, e.reproduction], [['tests/test_calc.py::test_sub'], []]);
  });

  test('an existing passing test the change strengthened (it now fails on the base code) is a reproduction', () => {
    const e = evidenceOf(
      input({ changeTestsOnBase: pytest(['FAILED tests/test_calc.py::test_add - assert -1 == 1']), changeTestsWithChange: pytest(['PASSED tests/test_calc.py::test_add']) }),
    );
    assert.deepEqual(e.reproduction, ['tests/test_calc.py::test_add']);
    assert.equal(e.verdict, 'verified');
  });

  test('the command passing before and failing after with no test failing is failing; tests newly skipped or gone are noted', () => {
    const e = evidenceOf(input({ before: pytest([OLD, 'PASSED tests/test_calc.py::test_sub', 'PASSED tests/test_calc.py::test_mul']), after: pytest([OLD, 'SKIPPED tests/test_calc.py::test_sub'], 1) }));
    assert.equal(e.verdict, 'failing');
    assert.ok(e.notes.some((n) => /passed before the change and are skipped after it: tests\/test_calc.py::test_sub/.test(n)));
    assert.ok(e.notes.some((n) => /passed before the change and did not run after it: tests\/test_calc.py::test_mul/.test(n)));
    assert.ok(e.notes.some((n) => /passed before the change and fails after it \(exit code 1\), though no test is reported failing/.test(n)));
  });

  test("where the change's tests could not be selected and (c) ran the whole suite, untouched tests are neither reproductions nor noted", () => {
    const suite = [OLD, 'PASSED tests/test_io.py::test_read'];
    const e = evidenceOf(
      input({
        before: pytest(suite),
        after: pytest([...suite, 'PASSED tests/test_calc.py::test_new']),
        changeTestsOnBase: pytest([...suite, 'FAILED tests/test_calc.py::test_new - assert 0 == 1']),
        changeTestsWithChange: pytest([...suite, 'PASSED tests/test_calc.py::test_new']),
      }),
    );
    assert.equal(e.verdict, 'verified');
    assert.deepEqual(e.reproduction, ['tests/test_calc.py::test_new']);
    assert.ok(!e.notes.some((n) => /pass on the base code too/.test(n)), e.notes.join('\n'));
  });

  test('a timed-out run after the change is failing', () => {
    const e = evidenceOf(input({ after: { run: { parsed: false, reason: 'the test command printed nothing' }, exitCode: null } }));
    assert.equal(e.verdict, 'failing');
    assert.ok(e.notes.some((n) => /it did not finish/.test(n)));
  });
});
