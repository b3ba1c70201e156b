/** Per-test results of any runner Lilypad knows: parsers, the flags that make output parseable, before/after comparison. */
export { parseCargo } from './cargo.ts';
export { compareRuns, type RunComparison } from './compare.ts';
export { parseGoJson, parseGoText } from './go.ts';
export { parseJest } from './jest.ts';
export { junitCases, parseJUnit, type JUnitCase } from './junit.ts';
export { parseTestRun, type ParsedRun } from './parse.ts';
export { JUNIT_REPORTS, parseableCommand } from './parseable.ts';
export { parsePytest } from './pytest.ts';
export { parseNodeSpec, parseTap } from './tap.ts';
export { cleanOutput, OutcomeMap, type ResultFormat, type TestCaseOutcome, type TestCaseResult, type TestRunner } from './types.ts';
export { parseUnittest } from './unittest.ts';
export * from './judging.ts';
