/**
 * How one run of a repository's test command ended, as the pipeline records it and the pull
 * request body, the revision record and the run page show it.
 */
export interface TestOutcome {
  command: string;
  /** passed: exit 0; failed: non-zero exit; timed_out: killed at the time limit; error: could not run. */
  outcome: 'passed' | 'failed' | 'timed_out' | 'error';
  exitCode: number | null;
  durationMs: number;
  counts: TestCounts | null;
  /** The last lines of stdout and stderr, for humans. */
  outputTail: string;
}

/** Counts read from a runner's summary line; a runner that does not print one leaves them out. */
export interface TestCounts {
  passed?: number;
  failed?: number;
  skipped?: number;
  errors?: number;
}
