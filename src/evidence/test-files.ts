/**
 * Which files of a change are tests, the way each ecosystem's own runner finds them. Decided from
 * the path alone, so that the same answer holds for a file added, changed or deleted.
 *
 * Everything under a test directory counts (`tests/`, `test/`, `__tests__/`, `spec/`, Go's
 * `testdata/`, jest's `__snapshots__/`, Maven and Gradle's `src/test/`), data files included:
 * a test's fixtures belong with the test when the test is run against the base code.
 *
 * Rust keeps unit tests in the source file they test (`#[cfg(test)] mod tests` in `src/lib.rs`):
 * such a file is source, not a test file, because reverting it to run its tests on the base code
 * would revert the fix too. Its tests still count as fixed or broken from the runs before and
 * after the change, and weakened assertions in them are still found (see weakened.ts); only the
 * integration tests under `tests/` can be reproductions.
 */

const TEST_DIRS = new Set(['tests', 'test', '__tests__', 'spec', 'testdata', '__snapshots__']);

const TEST_NAMES: RegExp[] = [
  // Python: pytest's default patterns, unittest's `test*.py` as Django names it, pytest's conftest.
  /^test_.*\.py$/,
  /_test\.py$/,
  /^(tests?|conftest)\.py$/,
  // JavaScript and TypeScript: jest, vitest, mocha and node's runner conventions.
  /\.(test|spec)\.[cm]?[jt]sx?$/,
  // Go.
  /_test\.go$/,
  // JVM: Surefire's and Gradle's default includes, Spock's specifications.
  /(Test|Tests|TestCase)\.(java|kt|scala|groovy)$/,
  /Spec\.groovy$/,
];

/** Is this path (repository-relative, `/`-separated) a test file or test data? */
export function isTestFile(path: string): boolean {
  const parts = path.split('/');
  const name = parts.pop() ?? '';
  if (parts.some((dir) => TEST_DIRS.has(dir))) return true;
  return TEST_NAMES.some((re) => re.test(name));
}

// Source code, as opposed to data and documentation: a deleted test data file is not a deleted test.
const CODE = /\.(py|[cm]?[jt]sx?|go|rs|java|kt|scala|groovy)$/;

export function isCodeFile(path: string): boolean {
  return CODE.test(path);
}
