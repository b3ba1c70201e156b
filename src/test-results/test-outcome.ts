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
  /**
   * What the per-test parsers read in the whole output: the format and the count of each outcome,
   * or why nothing could be read (the run is then judged by its exit code). Absent for setup.
   */
  perTest?: PerTestSummary | undefined;
}

export type PerTestSummary =
  | { parsed: true; format: string; passed: number; failed: number; skipped: number; error: number }
  | { parsed: false; reason: string };

/** Counts read from a runner's summary line; a runner that does not print one leaves them out. */
export interface TestCounts {
  passed?: number;
  failed?: number;
  skipped?: number;
  errors?: number;
}
