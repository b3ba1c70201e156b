import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { weakenedTests, type WeakenedTest } from '../../src/evidence/index.ts';
import { changeRepo, type ChangeRepo, type Changed } from '../support/change-diff.ts';

const repos: ChangeRepo[] = [];
after(() => repos.forEach((r) => r.remove()));

/** The weakened tests of the change from `base` to `change`, with the diff made by real git. */
function weakened(base: Record<string, string>, change: Record<string, Changed>): WeakenedTest[] {
  const r = changeRepo(base, change);
  repos.push(r);
  return weakenedTests(r.diff);
}

const PY = [
  'import pytest',
  'from calc import add, sub',
  '',
  '',
  'def test_add():',
  '    assert add(2, 3) == 5',
  '    assert add(0, 0) == 0',
  '',
  '',
  'def test_sub():',
  '    assert sub(3, 2) == 1',
  '',
  '',
  'class TestCalc:',
  '    def test_both(self):',
  '        assert add(1, 1) == 2',
  '        assert sub(1, 1) == 0',
  '',
].join('\n');
const py = (edit: (text: string) => string) => weakened({ 'tests/test_calc.py': PY, 'calc.py': 'def add(a, b):\n    return a - b\n' }, { 'tests/test_calc.py': edit(PY) });

describe('weakened tests: Python', () => {
  test('a deleted assertion is named with its test', () => {
    assert.deepEqual(py((t) => t.replace('    assert add(0, 0) == 0\n', '')), [{ file: 'tests/test_calc.py', test: 'test_add', what: 'deleted an assertion: `assert add(0, 0) == 0`' }]);
  });

  test('an edited assertion says what it became; a method inside a class is named', () => {
    assert.deepEqual(py((t) => t.replace('assert sub(1, 1) == 0', 'assert sub(1, 1) is not None')), [
      { file: 'tests/test_calc.py', test: 'test_both', what: 'edited an assertion: `assert sub(1, 1) == 0` became `assert sub(1, 1) is not None`' },
    ]);
  });

  test('an assertion commented out is deleted', () => {
    const w = py((t) => t.replace('    assert sub(3, 2) == 1', '    # assert sub(3, 2) == 1\n    pass'));
    assert.equal(w.length, 1);
    assert.match(w[0]!.what, /^deleted an assertion/);
  });

  test('assertions moved within the file or reformatted (black: wrapped, trailing comma, quotes) are not weakening', () => {
    assert.deepEqual(py((t) => t.replace('    assert add(2, 3) == 5\n    assert add(0, 0) == 0', '    assert add(0, 0) == 0\n    assert add(2, 3) == 5')), []);
    assert.deepEqual(py((t) => t.replace('    assert sub(3, 2) == 1\n', '').replace('        assert sub(1, 1) == 0\n', '        assert sub(1, 1) == 0\n        assert sub(3, 2) == 1\n')), []);
    const base = { 'tests/test_x.py': "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(f('a', 1), {'k': 'v'})\n" };
    const black = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(\n            f(\"a\", 1),\n            {\"k\": \"v\"},\n        )\n";
    assert.deepEqual(weakened(base, { 'tests/test_x.py': black }), []);
  });

  test('skips and expected failures are found, with the test they apply to', () => {
    const w = py((t) =>
      t
        .replace('def test_add():', '@pytest.mark.skip(reason="flaky")\ndef test_add():')
        .replace('def test_sub():\n', '@pytest.mark.xfail\ndef test_sub():\n')
        .replace('    def test_both(self):\n', '    def test_both(self):\n        pytest.skip("later")\n'),
    );
    assert.deepEqual(w, [
      { file: 'tests/test_calc.py', test: 'test_add', what: 'skipped it: `@pytest.mark.skip(reason="flaky")`' },
      { file: 'tests/test_calc.py', test: 'test_sub', what: 'marked it as expected to fail: `@pytest.mark.xfail`' },
      { file: 'tests/test_calc.py', test: 'test_both', what: 'skipped it: `pytest.skip("later")`' },
    ]);
    const ut = weakened({ 'test_u.py': 'import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertTrue(True)\n' }, { 'test_u.py': 'import unittest\n\n\nclass T(unittest.TestCase):\n    @unittest.skip("broken")\n    def test_a(self):\n        self.assertTrue(True)\n' });
    assert.deepEqual(ut, [{ file: 'test_u.py', test: 'test_a', what: 'skipped it: `@unittest.skip("broken")`' }]);
  });

  test('a deleted test function is one entry, not one per assertion; a test renamed in place or moved to another file is not deleted', () => {
    assert.deepEqual(py((t) => t.replace('def test_sub():\n    assert sub(3, 2) == 1\n\n\n', '')), [{ file: 'tests/test_calc.py', test: 'test_sub', what: 'deleted the test' }]);
    assert.deepEqual(py((t) => t.replace('def test_sub():', 'def test_subtracts():')), []);
    const moved = weakened({ 'tests/test_calc.py': PY, 'tests/test_sub.py': 'from calc import sub\n' }, { 'tests/test_calc.py': PY.replace('def test_sub():\n    assert sub(3, 2) == 1\n\n\n', ''), 'tests/test_sub.py': 'from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 2) == 1\n' });
    assert.deepEqual(moved, []);
    const toNewFile = weakened({ 'tests/test_calc.py': PY }, { 'tests/test_calc.py': PY.replace('def test_sub():\n    assert sub(3, 2) == 1\n\n\n', ''), 'tests/test_sub.py': 'from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 2) == 1\n' });
    assert.deepEqual(toNewFile, []);
  });

  test('the test is read from the hunk header when its definition is out of the context lines', () => {
    const long = ['def test_long():', ...Array.from({ length: 12 }, (_, i) => `    x${i} = ${i}`), '    assert x11 == 11', ''].join('\n');
    assert.deepEqual(weakened({ 'tests/test_long.py': long }, { 'tests/test_long.py': long.replace('    assert x11 == 11\n', '') }), [{ file: 'tests/test_long.py', test: 'test_long', what: 'deleted an assertion: `assert x11 == 11`' }]);
  });

  test('a deleted test file is listed with its tests; a test file moved elsewhere or test data deleted is not', () => {
    assert.deepEqual(weakened({ 'tests/test_calc.py': PY }, { 'tests/test_calc.py': null }), [{ file: 'tests/test_calc.py', what: 'deleted the test file (its tests: test_add, test_sub, test_both)' }]);
    assert.deepEqual(weakened({ 'tests/test_calc.py': PY }, { 'tests/test_calc.py': null, 'tests/unit/test_calc.py': PY }), []);
    assert.deepEqual(weakened({ 'tests/data/input.json': '{"a": 1}\n' }, { 'tests/data/input.json': null }), []);
  });

  test('a new test file or a new test that is skipped weakens nothing; assertions in source code are not tests', () => {
    assert.deepEqual(weakened({ 'calc.py': 'x = 1\n' }, { 'tests/test_new.py': '@pytest.mark.skip\ndef test_new():\n    assert False\n' }), []);
    assert.deepEqual(py((t) => `${t}\n\n@pytest.mark.xfail(strict=True)\ndef test_bug():\n    assert add(2, 2) == 4\n`), []);
    assert.deepEqual(weakened({ 'calc.py': 'def add(a, b):\n    assert isinstance(a, int)\n    return a + b\n' }, { 'calc.py': 'def add(a, b):\n    return a + b\n' }), []);
  });
});

describe('weakened tests: JavaScript and TypeScript', () => {
  const JS = [
    "import { add } from '../src/add.js';",
    '',
    "describe('add', () => {",
    "  it('adds', () => {",
    '    expect(add(1, 2)).toBe(3);',
    "    expect(add(0, 0)).toEqual(0);",
    '  });',
    '',
    "  test('negative', () => { expect(add(-1, -1)).toBe(-2); });",
    '});',
    '',
  ].join('\n');
  const js = (edit: (t: string) => string) => weakened({ 'test/add.test.js': JS }, { 'test/add.test.js': edit(JS) });

  test('a deleted expect() names its it()', () => {
    assert.deepEqual(js((t) => t.replace('    expect(add(0, 0)).toEqual(0);\n', '')), [{ file: 'test/add.test.js', test: 'adds', what: 'deleted an assertion: `expect(add(0, 0)).toEqual(0);`' }]);
  });

  test('it() made it.skip() or xit() is one skip, not also an edited assertion; .only is focusing', () => {
    assert.deepEqual(js((t) => t.replace("test('negative'", "test.skip('negative'")), [{ file: 'test/add.test.js', test: 'negative', what: "skipped it: `test.skip('negative', () => { expect(add(-1, -1)).toBe(-2); });`" }]);
    const x = js((t) => t.replace("it('adds'", "xit('adds'"));
    assert.equal(x.length, 1);
    assert.equal(x[0]!.test, 'adds');
    const only = js((t) => t.replace("it('adds'", "it.only('adds'"));
    assert.match(only[0]!.what, /^focused the file on one test/);
  });

  test('prettier splitting a chained expect over lines is not weakening', () => {
    assert.deepEqual(js((t) => t.replace('    expect(add(1, 2)).toBe(3);', '    expect(\n      add(1, 2),\n    )\n      .toBe(3)')), []);
  });

  test('an assertion whose expected value changed inside a multi-line call is an edit', () => {
    const base = { 'src/x.spec.ts': "it('parses', () => {\n  assert.deepStrictEqual(\n    parse('a=1'),\n    { a: 1 },\n  );\n});\n" };
    const w = weakened(base, { 'src/x.spec.ts': base['src/x.spec.ts'].replace('{ a: 1 }', '{ a: 2 }') });
    assert.deepEqual(w, [{ file: 'src/x.spec.ts', test: 'parses', what: "edited an assertion: `assert.deepStrictEqual( parse('a=1'), { a: 1 }, );` became `assert.deepStrictEqual( parse('a=1'), { a: 2 }, );`" }]);
  });
});

describe('weakened tests: Go, Rust, Java', () => {
  test('Go: t.Errorf deleted and t.Skip added, named by the func', () => {
    const GO = 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Errorf("Add(2, 3) = %d", got)\n\t}\n}\n\nfunc TestSub(t *testing.T) {\n\tif Sub(3, 2) != 1 {\n\t\tt.Fatal("bad")\n\t}\n}\n';
    const w = weakened({ 'calc/calc_test.go': GO }, { 'calc/calc_test.go': GO.replace('\t\tt.Errorf("Add(2, 3) = %d", got)\n', '').replace('func TestSub(t *testing.T) {\n', 'func TestSub(t *testing.T) {\n\tt.Skip("flaky")\n') });
    assert.deepEqual(w, [
      { file: 'calc/calc_test.go', test: 'TestAdd', what: 'deleted an assertion: `t.Errorf("Add(2, 3) = %d", got)`' },
      { file: 'calc/calc_test.go', test: 'TestSub', what: 'skipped it: `t.Skip("flaky")`' },
    ]);
  });

  test('Rust: #[ignore] and assert_eq! in a tests/ file and in a #[cfg(test)] module; a debug_assert! in library code is not a test', () => {
    const LIB = 'pub fn add(a: i32, b: i32) -> i32 {\n    debug_assert!(a >= 0);\n    a + b\n}\n\n\n\n\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(2, 3), 5);\n    }\n}\n';
    const w = weakened({ 'src/lib.rs': LIB }, { 'src/lib.rs': LIB.replace('    debug_assert!(a >= 0);\n', '').replace('    #[test]\n    fn adds', '    #[test]\n    #[ignore]\n    fn adds') });
    assert.deepEqual(w, [{ file: 'src/lib.rs', test: 'adds', what: 'disabled it: `#[ignore]`' }]);
    const API = 'use crate_x::add;\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n    assert!(add(0, 0) == 0);\n}\n';
    assert.deepEqual(weakened({ 'tests/api.rs': API }, { 'tests/api.rs': API.replace('    assert!(add(0, 0) == 0);\n', '') }), [{ file: 'tests/api.rs', test: 'adds', what: 'deleted an assertion: `assert!(add(0, 0) == 0);`' }]);
  });

  test('Java: an assertion deleted, @Disabled added, a @Test method deleted (a helper method is not a test)', () => {
    const JAVA = 'package com.example;\n\nimport org.junit.jupiter.api.Test;\nimport static org.junit.jupiter.api.Assertions.*;\n\nclass CalcTest {\n    @Test\n    void adds() {\n        assertEquals(5, Calc.add(2, 3));\n        assertThat(Calc.add(0, 0)).isZero();\n    }\n\n    @Test\n    void subtracts() {\n        assertEquals(1, Calc.sub(3, 2));\n    }\n\n    private int helper() {\n        return 1;\n    }\n}\n';
    const path = 'src/test/java/com/example/CalcTest.java';
    const w = weakened(
      { [path]: JAVA },
      { [path]: JAVA.replace('        assertThat(Calc.add(0, 0)).isZero();\n', '').replace('    @Test\n    void subtracts() {\n        assertEquals(1, Calc.sub(3, 2));\n    }\n\n', '').replace('    private int helper() {\n        return 1;\n    }\n', '').replace('    @Test\n    void adds', '    @Test\n    @Disabled("later")\n    void adds') },
    );
    assert.deepEqual(w, [
      { file: path, test: 'subtracts', what: 'deleted the test' },
      { file: path, test: 'adds', what: 'deleted an assertion: `assertThat(Calc.add(0, 0)).isZero();`' },
      { file: path, test: 'adds', what: 'disabled it: `@Disabled("later")`' },
    ]);
  });
});
