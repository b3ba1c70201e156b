import { OutcomeMap, type TestCaseOutcome } from './types.ts';

const PYTEST_OUTCOME: Record<string, TestCaseOutcome> = {
  PASSED: 'passed',
  // As SWE-bench counts them: an expected failure passes, an unexpected pass fails.
  XFAIL: 'passed',
  XPASS: 'failed',
  FAILED: 'failed',
  ERROR: 'error',
  SKIPPED: 'skipped',
};

/** pytest's `-rA` short summary lines and `-v` lines; ids are pytest node ids (`path::Class::test[param]`). */
export function parsePytest(text: string): OutcomeMap {
  const map = new OutcomeMap();
  for (const line of text.split('\n')) {
    // -rA: "PASSED tests/test_x.py::test_a", "FAILED tests/test_x.py::test_b - AssertionError"
    let m = /^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+::\S.*?)(?:\s+-\s+.*)?$/.exec(line);
    if (m && !m[2]!.startsWith('[')) {
      map.record(m[2]!.trim(), PYTEST_OUTCOME[m[1]!]!);
      continue;
    }
    // A file that could not be collected (an import error): "ERROR tests/test_y.py - ImportError: ..."
    m = /^ERROR\s+([\w./-]+\.py)(?:\s+-\s+.*)?$/.exec(line);
    if (m) {
      map.record(m[1]!, 'error');
      continue;
    }
    // -v: "tests/test_x.py::test_a PASSED   [ 50%]"
    m = /^(\S+::\S.*?)\s+(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)(?:\s+\(.*\))?(?:\s+\[\s*\d+%\])?\s*$/.exec(line);
    if (m) map.record(m[1]!.trim(), PYTEST_OUTCOME[m[2]!]!);
  }
  return map;
}
