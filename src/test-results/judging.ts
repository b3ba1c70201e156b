/**
 * What `lilypad eval` judges with (moved from src/eval/test-results.ts): the three runners an eval
 * instance may name, the command that runs exactly the requested ids, and a three-state map
 * (an error counts as a failure, as SWE-bench counts it) in which ids in several forms are found.
 */
import { junitCases } from './junit.ts';
import { parsePytest } from './pytest.ts';
import { looksLikeTap, parseNodeSpec, parseTap } from './tap.ts';
import { cleanOutput, type OutcomeMap } from './types.ts';
import { normaliseUnittestId, parseUnittest } from './unittest.ts';

export { normaliseUnittestId };

export type TestFramework = 'pytest' | 'unittest' | 'node';
export type TestStatus = 'passed' | 'failed' | 'skipped';
export type TestStatusMap = Map<string, TestStatus>;

/** Guesses the runner from the command; null when the command does not say. */
export function detectFramework(command: string): TestFramework | null {
  if (/\bpytest\b|\bpy\.test\b/.test(command)) return 'pytest';
  if (/\bunittest\b|\bmanage\.py\s+test\b|runtests\.py/.test(command)) return 'unittest';
  if (/\bnode\b[^|;&]*--test\b/.test(command)) return 'node';
  return null;
}

export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The command that runs exactly these tests with output the parser understands: the test ids
 * (or, for node, the files named before `::` in them) and the runner's reporting flags appended to
 * the test command, or put where it says `{tests}`.
 */
export function buildTestCommand(testCommand: string, framework: TestFramework | null, ids: string[]): string {
  let command = testCommand;
  let args: string[];
  switch (framework) {
    case 'pytest':
      args = ['-rA', ...ids];
      break;
    case 'unittest':
      args = ['-v', ...ids.map(normaliseUnittestId)];
      break;
    case 'node': {
      // node --test takes files, not test names: run the files the ids name, report TAP.
      if (!/--test-reporter\b/.test(command)) command = command.replace(/\bnode(\s+(?:[^\s|;&]+\s+)*?)--test\b/, 'node$1--test --test-reporter=tap');
      args = [...new Set(ids.filter((id) => id.includes('::')).map((id) => id.slice(0, id.indexOf('::'))))];
      break;
    }
    default:
      args = [...ids];
  }
  const joined = args.map(shellQuote).join(' ');
  return command.includes('{tests}') ? command.replace('{tests}', joined) : joined ? `${command} ${joined}` : command;
}

function threeState(found: OutcomeMap): TestStatusMap {
  const map: TestStatusMap = new Map();
  for (const [id, outcome] of found.map) map.set(id, outcome === 'error' ? 'failed' : outcome);
  return map;
}

/**
 * Why a judging run's output names no test: without this, a runner eval cannot read (`go test`,
 * `cargo test`, a wrapper script) shows up only as "FAIL_TO_PASS tests fail", as if the fix were wrong.
 */
export function unreadOutputProblem(command: string, framework: TestFramework | null, results: TestStatusMap, output: string, exitCode: number | null): string | null {
  if (results.size > 0) return null;
  const runner = framework ?? 'not recognised from test_command';
  const start = cleanOutput(output).trim().split('\n').slice(0, 2).join(' | ').slice(0, 200);
  return (
    `no per-test result could be read from \`${command}\` (exit ${exitCode ?? 'none'}; runner: ${runner}); ` +
    'lilypad eval reads pytest, unittest -v, node --test (TAP or spec) and JUnit XML: make test_command one of these ' +
    '(or a command that prints JUnit XML, with {tests} where the ids go) and set test_framework if it is not recognised' +
    (start ? `; the output starts: ${start}` : '; the output was empty')
  );
}

/** Parses a run's output for per-test outcomes; ids are as the runner prints them. */
export function parseTestOutput(framework: TestFramework | null, output: string): TestStatusMap {
  const text = cleanOutput(output);
  const junit = parseJUnitForLookup(text);
  if (junit.size > 0) return junit;
  const node = (t: string) => (looksLikeTap(t) ? parseTap(t) : parseNodeSpec(t));
  switch (framework) {
    case 'pytest':
      return threeState(parsePytest(text));
    case 'unittest':
      return threeState(parseUnittest(text));
    case 'node':
      return threeState(node(text));
    default: {
      for (const parse of [parsePytest, parseUnittest, node]) {
        const found = parse(text);
        if (found.size > 0) return threeState(found);
      }
      return new Map();
    }
  }
}

// Each case under `classname.name`, under `name` and under its suites' path, so that ids in any of
// those forms are found.
function parseJUnitForLookup(text: string): TestStatusMap {
  const map: TestStatusMap = new Map();
  const record = (id: string, status: TestStatus) => {
    const prev = map.get(id);
    if (prev === 'failed' || (prev === 'passed' && status === 'skipped')) return;
    map.set(id, status);
  };
  for (const c of junitCases(text)) {
    const status: TestStatus = c.outcome === 'error' ? 'failed' : c.outcome;
    if (c.classname) record(`${c.classname}.${c.name}`, status);
    record(c.name, status);
    if (c.suites.length > 0) record([...c.suites, c.name].join(' > '), status);
  }
  return map;
}

/**
 * Looks up a requested id in what the runner printed. Tries the id as given, then the forms other
 * runners print: a pytest path id as JUnit's dotted `classname.name`, a unittest id in Django form.
 */
export function lookupStatus(results: TestStatusMap, id: string): TestStatus | undefined {
  const direct = results.get(id) ?? results.get(normaliseUnittestId(id));
  if (direct) return direct;
  const sep = id.indexOf('::');
  if (sep > 0) {
    const file = id.slice(0, sep).replace(/\.py$/, '').replace(/\//g, '.');
    const rest = id.slice(sep + 2).split('::');
    const name = rest.pop()!;
    const dotted = [file, ...rest].join('.');
    const hit = results.get(`${dotted}.${name}`);
    if (hit) return hit;
    // node ids: "file::suite > test": the runner prints names only.
    return results.get(id.slice(sep + 2));
  }
  return undefined;
}
