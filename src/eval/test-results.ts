/**
 * Per-test outcomes from a test run's output, for judging. Three runners are understood:
 * pytest (`-rA` summary lines and `-v` lines, or JUnit XML), unittest (`-v` lines and the
 * FAIL:/ERROR: headers) and `node --test` (TAP, the spec reporter, or JUnit XML).
 */
export type TestFramework = 'pytest' | 'unittest' | 'node';
export type TestStatus = 'passed' | 'failed' | 'skipped';

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

/** unittest ids as SWE-bench writes them for Django, `test_x (pkg.mod.Class)`, become `pkg.mod.Class.test_x`. */
export function normaliseUnittestId(id: string): string {
  const m = /^(\S+) \(([\w.]+)\)$/.exec(id.trim());
  if (!m) return id.trim();
  const [, name, where] = m;
  return where!.endsWith(`.${name}`) ? where! : `${where}.${name}`;
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

export type TestStatusMap = Map<string, TestStatus>;

/** Parses a run's output for per-test outcomes; ids are as the runner prints them. */
export function parseTestOutput(framework: TestFramework | null, output: string): TestStatusMap {
  const text = output.replace(/\r\n?/g, '\n').replace(/\x1b\[[0-9;]*m/g, '');
  const junit = parseJUnit(text);
  if (junit.size > 0) return junit;
  switch (framework) {
    case 'pytest':
      return parsePytest(text);
    case 'unittest':
      return parseUnittest(text);
    case 'node':
      return parseNodeTest(text);
    default: {
      // Unknown runner: whichever parser finds something.
      for (const parse of [parsePytest, parseUnittest, parseNodeTest]) {
        const found = parse(text);
        if (found.size > 0) return found;
      }
      return new Map();
    }
  }
}

// A later, worse outcome for the same id wins (a test that passed and then errored in teardown failed).
function record(map: TestStatusMap, id: string, status: TestStatus): void {
  const prev = map.get(id);
  if (prev === 'failed') return;
  if (prev === 'passed' && status === 'skipped') return;
  map.set(id, status);
}

const PYTEST_STATUS: Record<string, TestStatus> = {
  PASSED: 'passed',
  XFAIL: 'passed',
  FAILED: 'failed',
  ERROR: 'failed',
  XPASS: 'failed',
  SKIPPED: 'skipped',
};

export function parsePytest(text: string): TestStatusMap {
  const map: TestStatusMap = new Map();
  for (const line of text.split('\n')) {
    // -rA summary: "PASSED tests/test_x.py::test_a", "FAILED tests/test_x.py::test_b - AssertionError"
    let m = /^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+::\S.*?)(?:\s+-\s+.*)?$/.exec(line);
    if (m && !m[2]!.startsWith('[')) {
      record(map, m[2]!.trim(), PYTEST_STATUS[m[1]!]!);
      continue;
    }
    // -v: "tests/test_x.py::test_a PASSED   [ 50%]"
    m = /^(\S+::\S.*?)\s+(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)(?:\s+\(.*\))?(?:\s+\[\s*\d+%\])?\s*$/.exec(line);
    if (m) record(map, m[1]!.trim(), PYTEST_STATUS[m[2]!]!);
  }
  return map;
}

const UNITTEST_RESULT = /^(ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$/;

function unittestStatus(word: string): TestStatus {
  if (word === 'ok' || word === 'expected failure') return 'passed';
  if (word.startsWith('skipped')) return 'skipped';
  return 'failed';
}

export function parseUnittest(text: string): TestStatusMap {
  const map: TestStatusMap = new Map();
  const lines = text.split('\n');
  // "test_add (test_calc.AddTest.test_add) ... ok" (3.11+), "test_add (test_calc.AddTest) ... ok" (older);
  // a docstring puts its first line between the id and " ... ".
  const head = /^(\w+) \(([\w.]+)\)/;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const m = head.exec(line);
    if (m) {
      const id = normaliseUnittestId(`${m[1]} (${m[2]})`);
      let rest = line.slice(m[0].length);
      if (!rest.includes(' ... ') && i + 1 < lines.length && lines[i + 1]!.includes(' ... ')) rest = lines[++i]!;
      const sep = rest.lastIndexOf(' ... ');
      if (sep >= 0) {
        const word = rest.slice(sep + 5).trim();
        if (UNITTEST_RESULT.test(word)) record(map, id, unittestStatus(word));
      }
      continue;
    }
    const failure = /^(FAIL|ERROR): (\w+) \(([\w.]+)\)/.exec(line);
    if (failure) record(map, normaliseUnittestId(`${failure[2]} (${failure[3]})`), 'failed');
  }
  return map;
}

const FILE_NAME = /\.(?:[cm]?js|[cm]?ts|jsx|tsx)$/;

/** TAP (`--test-reporter=tap`, node's default before 19.9 without a TTY) or the spec reporter's ✔/✖ lines. */
export function parseNodeTest(text: string): TestStatusMap {
  const map: TestStatusMap = new Map();
  const lines = text.split('\n');
  if (lines.some((l) => /^TAP version \d+/.test(l) || /^\s*(?:not )?ok \d+ - /.test(l))) {
    // Names of open subtests by indentation level: "# Subtest: name" precedes its result line.
    const stack: string[] = [];
    for (const line of lines) {
      const sub = /^(\s*)# Subtest: (.*)$/.exec(line);
      if (sub) {
        const depth = sub[1]!.length / 4;
        stack.length = depth;
        stack[depth] = sub[2]!;
        continue;
      }
      const res = /^(\s*)(not ok|ok) \d+ - (.*?)(?:\s+#\s+(SKIP|TODO)\b.*)?$/.exec(line);
      if (!res) continue;
      const depth = res[1]!.length / 4;
      const names = [...stack.slice(0, depth), res[3]!.replace(/\\#/g, '#')];
      // node 18 wraps each file's tests in a subtest named by the file's path.
      if (names.length > 1 && FILE_NAME.test(names[0]!)) names.shift();
      else if (names.length === 1 && FILE_NAME.test(names[0]!) && lines.some((l) => l.startsWith('    # Subtest: '))) continue;
      const status: TestStatus = res[4] ? 'skipped' : res[2] === 'ok' ? 'passed' : 'failed';
      record(map, names.join(' > '), status);
    }
    return map;
  }
  const stack: string[] = [];
  for (const line of lines) {
    // The reporter repeats failures at the end without their suites: the first listing is enough.
    if (/^✖ failing tests:/.test(line)) break;
    const m = /^(\s*)(✔|✖|﹣|▶)\s+(.*?)(?:\s+\([\d.]+m?s\))?(?:\s+#\s+(SKIP|TODO).*)?$/.exec(line);
    if (!m) continue;
    const depth = Math.floor(m[1]!.length / 2);
    if (m[2] === '▶') {
      stack.length = depth;
      stack[depth] = m[3]!;
      continue;
    }
    stack.length = depth;
    const name = [...stack, m[3]!].join(' > ');
    record(map, name, m[2] === '✔' ? (m[4] ? 'skipped' : 'passed') : m[2] === '﹣' ? 'skipped' : 'failed');
  }
  return map;
}

const XML_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
const unescapeXml = (s: string) => s.replace(/&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);/g, (_, e: string) => XML_ENTITIES[e] ?? String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)));

/**
 * JUnit XML (pytest --junitxml, node --test-reporter=junit) printed into the output. Each case is
 * recorded under `classname.name` and under `name`, so that ids in either form are found.
 */
export function parseJUnit(text: string): TestStatusMap {
  const map: TestStatusMap = new Map();
  if (!text.includes('<testcase')) return map;
  const attrOf = (attrs: string, name: string) => {
    const a = new RegExp(`\\b${name}="([^"]*)"`).exec(attrs);
    return a ? unescapeXml(a[1]!) : undefined;
  };
  // Nested <testsuite>s are node's describe() blocks: their names prefix the case's, as in TAP.
  const suites: string[] = [];
  const re = /<testsuite\b([^>]*?)(\/?)>|<\/testsuite>|<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g;
  for (const m of text.matchAll(re)) {
    if (m[0].startsWith('</testsuite')) {
      suites.pop();
      continue;
    }
    if (m[0].startsWith('<testsuite')) {
      if (m[2] !== '/') suites.push(attrOf(m[1]!, 'name') ?? '');
      continue;
    }
    const attrs = m[3]!;
    const name = attrOf(attrs, 'name');
    if (!name) continue;
    const body = m[5] ?? '';
    const status: TestStatus = /<(failure|error)\b/.test(body) ? 'failed' : /<skipped\b/.test(body) ? 'skipped' : 'passed';
    const classname = attrOf(attrs, 'classname');
    if (classname) record(map, `${classname}.${name}`, status);
    record(map, name, status);
    const named = suites.filter(Boolean);
    if (named.length > 0) record(map, [...named, name].join(' > '), status);
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
