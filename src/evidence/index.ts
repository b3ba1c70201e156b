/** The evidence a change carries (issue 17): its tests split out, weakened tests, the verdict, attempts ranked by it, and the command that runs just some tests. */
export { diffFiles, DiffFormatError, type DiffFile, type DiffLine, type Hunk } from './diff-files.ts';
export { failureOnBase, failureReasons, isWholeFileResult, type BaseFailure } from './base-failures.ts';
export { rankAttempts, type AttemptRank, type RankCandidate, type Ranking, type RankStep } from './rank.ts';
export { selectTestsCommand, type TestTargets } from './select-tests.ts';
export { splitPatch, type SplitPatch } from './split-patch.ts';
export { isCodeFile, isTestFile } from './test-files.ts';
export { evidenceOf, type Evidence, type EvidenceInput, type TestRunRecord, type Verdict } from './verdict.ts';
export { weakenedTests, type WeakenedTest } from './weakened.ts';
