import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isTestFile } from '../../src/evidence/index.ts';

describe('test files per ecosystem', () => {
  const cases: Array<[string, boolean]> = [
    // Python
    ['tests/test_calc.py', true],
    ['test_calc.py', true],
    ['pkg/calc_test.py', true],
    ['tests/helpers.py', true],
    ['test/data/input.json', true],
    ['conftest.py', true],
    ['src/pkg/conftest.py', true],
    ['app/tests.py', true],
    ['calc.py', false],
    ['src/pkg/testing_utils.py', false],
    ['src/contest.py', false],
    ['docs/testing.md', false],
    // JavaScript and TypeScript
    ['src/math.test.ts', true],
    ['src/math.spec.js', true],
    ['lib/math.test.mjs', true],
    ['ui/Button.test.tsx', true],
    ['src/__tests__/math.js', true],
    ['src/__tests__/__snapshots__/math.js.snap', true],
    ['test/math.js', true],
    ['spec/math.js', true],
    ['src/math.js', false],
    ['src/testing.js', false],
    // Go
    ['calc/calc_test.go', true],
    ['calc/testdata/golden.txt', true],
    ['calc/calc.go', false],
    // Rust: integration tests are test files; unit tests live in the source they test (source)
    ['tests/api.rs', true],
    ['crates/core/tests/api.rs', true],
    ['src/lib.rs', false],
    // JVM
    ['src/test/java/com/example/CalcTest.java', true],
    ['src/test/resources/data.csv', true],
    ['module/src/test/kotlin/com/x/Helper.kt', true],
    ['src/main/java/com/example/CalcTests.java', true],
    ['src/main/java/com/example/Calc.java', false],
    ['src/main/java/com/example/Contest.java', false],
  ];
  for (const [p, expected] of cases) {
    test(`${p} is ${expected ? '' : 'not '}a test file`, () => assert.equal(isTestFile(p), expected));
  }
});
