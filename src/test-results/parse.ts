import { parseCargo } from './cargo.ts';
import { parseGoJson, parseGoText } from './go.ts';
import { parseJest } from './jest.ts';
import { parseJUnit } from './junit.ts';
import { parsePytest } from './pytest.ts';
import { parseNodeSpec, parseTap } from './tap.ts';
import { cleanOutput, type OutcomeMap, type ResultFormat, type TestCaseResult, type TestRunner } from './types.ts';
import { parseUnittest } from './unittest.ts';

export type ParsedRun =
  | { parsed: true; format: ResultFormat; results: TestCaseResult[] }
  | { parsed: false; reason: string };

const PARSERS: Record<ResultFormat, (text: string) => OutcomeMap> = {
  junit: parseJUnit,
  pytest: parsePytest,
  unittest: parseUnittest,
  tap: parseTap,
  'node-spec': parseNodeSpec,
  'go-json': parseGoJson,
  'go-text': parseGoText,
  cargo: parseCargo,
  jest: parseJest,
};

/** The formats each runner prints, best first (what parseableCommand asks for comes first). */
const RUNNER_FORMATS: Partial<Record<TestRunner, ResultFormat[]>> = {
  pytest: ['pytest', 'junit'],
  unittest: ['unittest'],
  'node-test': ['tap', 'node-spec', 'junit'],
  jest: ['jest', 'junit'],
  go: ['go-json', 'go-text'],
  cargo: ['cargo'],
  maven: ['junit'],
  gradle: ['junit'],
};

/**
 * Per-test outcomes from a test run's output. The runner's own formats are tried first; a
 * wrapper (npm, make, tox) or an unknown runner gets whichever parser finds the most tests.
 * `parsed: false` says why nothing could be read: the caller falls back to the exit code.
 */
export function parseTestRun(runner: TestRunner | null, output: string): ParsedRun {
  const text = cleanOutput(output);
  for (const format of (runner && RUNNER_FORMATS[runner]) ?? []) {
    const found = PARSERS[format](text);
    if (found.size > 0) return { parsed: true, format, results: found.results() };
  }
  let best: { format: ResultFormat; found: OutcomeMap } | null = null;
  for (const [format, parse] of Object.entries(PARSERS) as Array<[ResultFormat, (t: string) => OutcomeMap]>) {
    const found = parse(text);
    if (found.size > 0 && (!best || found.size > best.found.size)) best = { format, found };
  }
  if (best) return { parsed: true, format: best.format, results: best.found.results() };
  const tail = text.trim().split('\n').slice(-1)[0]?.slice(0, 200) ?? '';
  return {
    parsed: false,
    reason: text.trim()
      ? `no per-test results in the output${runner ? ` of ${runner}` : ''} (it ends: ${JSON.stringify(tail)})`
      : 'the test command printed nothing',
  };
}
