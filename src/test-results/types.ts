/** How one test ended. `error`: the runner could not run it to a verdict (fixture, import, setup). */
export type TestCaseOutcome = 'passed' | 'failed' | 'skipped' | 'error';

export interface TestCaseResult {
  id: string;
  outcome: TestCaseOutcome;
}

/**
 * The test runners Lilypad knows. `npm`, `make` and `tox` wrap another runner whose output is
 * recognised by its shape; `other` is a command Lilypad only judges by its exit code.
 */
export type TestRunner =
  | 'pytest'
  | 'unittest'
  | 'node-test'
  | 'npm'
  | 'jest'
  | 'vitest'
  | 'mocha'
  | 'go'
  | 'cargo'
  | 'maven'
  | 'gradle'
  | 'make'
  | 'tox'
  | 'other';

/** The output formats the parsers read. */
export type ResultFormat = 'pytest' | 'unittest' | 'tap' | 'node-spec' | 'go-json' | 'go-text' | 'cargo' | 'junit' | 'jest';

// Worse outcomes win when one id is reported twice (a test that passed and then errored in
// teardown did not pass); a pass beats a skip (pytest reports a skipped subtest beside its parent).
const RANK: Record<TestCaseOutcome, number> = { skipped: 0, passed: 1, failed: 2, error: 3 };

/** Per-test outcomes in the order first seen; a later, worse report for an id wins. */
export class OutcomeMap {
  readonly map = new Map<string, TestCaseOutcome>();

  record(id: string, outcome: TestCaseOutcome): void {
    const prev = this.map.get(id);
    if (prev === undefined || RANK[outcome] > RANK[prev]) this.map.set(id, outcome);
  }

  get size(): number {
    return this.map.size;
  }

  results(): TestCaseResult[] {
    return [...this.map].map(([id, outcome]) => ({ id, outcome }));
  }
}

/** Output as the parsers expect it: LF line ends, no colour codes. */
export function cleanOutput(output: string): string {
  return output.replace(/\r\n?/g, '\n').replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
}
