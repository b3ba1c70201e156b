import { compilePathGlobs } from '../config/globs.ts';

/**
 * Which changed files of a pull request are tests (its `test_patch`) and which are the fix (its
 * `patch`). Patterns are picomatch globs with the path rules of `exclude_paths` (src/config/globs.ts):
 * a pattern without `/` matches a name at any depth, a trailing `/` names a directory and covers
 * everything below it.
 */
export const DEFAULT_TEST_PATTERNS: readonly string[] = [
  // Directories that hold tests (and their fixtures and helpers), at any depth.
  'test/',
  'tests/',
  'testing/',
  '__tests__/',
  'spec/',
  'specs/',
  // Test files by name, wherever they are.
  'test_*.py',
  '*_test.py',
  'conftest.py',
  '*_test.go',
  '*.test.*',
  '*.spec.*',
  '*_spec.rb',
  '*Test.java',
  '*Tests.java',
  '*Test.kt',
  '*Tests.cs',
];

export interface TestFileClassifier {
  readonly patterns: readonly string[];
  /** Splits paths into test files and the rest, keeping their order. */
  split(paths: readonly string[]): { tests: string[]; other: string[] };
}

export function testFileClassifier(patterns: readonly string[] = DEFAULT_TEST_PATTERNS): TestFileClassifier {
  const globs = compilePathGlobs(patterns);
  return {
    patterns,
    split(paths) {
      const hits = globs.firstMatches(paths);
      const tests: string[] = [];
      const other: string[] = [];
      paths.forEach((p, i) => (hits[i]! >= 0 ? tests : other).push(p));
      return { tests, other };
    },
  };
}
