import { normaliseUnittestId, type ResultFormat, type TestCaseOutcome } from '../test-results/index.ts';

/**
 * Whether a test that did not pass on the base code failed for a reason that can show an issue:
 * issue 17 asks that a reproduction fail "for the reason the issue gives (not a syntax or import
 * error)". The rule, from what runners print:
 *
 * 1. A result for a whole file, module, package or build target never counts: the file did not
 *    parse, import or compile (pytest's collection error, unittest's `_FailedTest`, jest's "Test
 *    suite failed to run", a Go package or Rust target that did not build, a node test file that
 *    did not load). Its tests never ran; a test that imports a function the change adds lands here.
 * 2. A test whose failure the runner names as a syntax, import or name error (SyntaxError,
 *    ImportError, ModuleNotFoundError, NameError, ReferenceError, a missing pytest fixture, a
 *    module not found) does not count: that is the test's own code failing, not the code under
 *    test behaving as the issue says. Other exceptions (AttributeError, TypeError, an assertion)
 *    count: a wrong type or a missing attribute is how many bugs show.
 * 3. A test the runner reports as `error` (not `failed`) counts only when the output says why and
 *    rule 2 does not apply; without the output the error is not evidence.
 * 4. Every other failure counts.
 */
export type BaseFailure = { counts: true } | { counts: false; why: string };

const OWN_CODE_ERROR = /^(?:[\w.]+\.)?(?:SyntaxError|IndentationError|TabError|ImportError|ModuleNotFoundError|NameError|ReferenceError)\b|fixture '[^']*' not found|Cannot find module|ERR_MODULE_NOT_FOUND|NoClassDefFoundError|ClassNotFoundException/;

const SCRIPT_FILE = /\.[cm]?[jt]sx?$/;

/** Is this result for a whole file, module, package or build target rather than one test? */
export function isWholeFileResult(id: string, format: ResultFormat): boolean {
  switch (format) {
    case 'pytest':
    case 'jest':
    case 'cargo':
    case 'go-json':
      return !id.includes('::');
    case 'go-text':
      return !id.includes('::') && !/^(Test|Example|Fuzz|Benchmark)/.test(id);
    case 'unittest':
      return /^unittest\.loader\.(_FailedTest|ModuleImportFailure)\./.test(id);
    case 'tap':
    case 'node-spec':
      return SCRIPT_FILE.test(id);
    case 'junit':
      return false;
  }
}

export function failureOnBase(id: string, outcome: TestCaseOutcome, format: ResultFormat, reasons: Map<string, string>): BaseFailure {
  if (isWholeFileResult(id, format)) return { counts: false, why: 'its file did not load on the base code (a syntax, import or build error), so no test in it ran' };
  const reason = reasons.get(id);
  if (reason !== undefined && OWN_CODE_ERROR.test(reason)) return { counts: false, why: `on the base code it failed with ${JSON.stringify(reason)}, an error in the test's own code or imports rather than the behaviour the issue describes` };
  if (outcome === 'error' && reason === undefined) return { counts: false, why: 'it errored on the base code and the output does not say why' };
  return { counts: true };
}

/** Why each failing test failed, where the runner prints it on a line of its own (pytest, unittest). */
export function failureReasons(format: ResultFormat, output: string): Map<string, string> {
  const text = output.replace(/\r\n?/g, '\n');
  if (format === 'pytest') return pytestReasons(text);
  if (format === 'unittest') return unittestReasons(text);
  return new Map();
}

// -rA's summary: "FAILED tests/test_x.py::test_a - ImportError: cannot import name 'f' from 'lib'".
function pytestReasons(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^(?:FAILED|ERROR)\s+(\S+::\S.*?)\s+-\s+(.+)$/.exec(line);
    if (m) out.set(m[1]!.trim(), m[2]!.trim());
  }
  return out;
}

// unittest lists each failure under "ERROR: test_x (mod.Class.test_x)" and a dashed line; the
// traceback's last line is the exception.
function unittestReasons(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const head = /^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)/.exec(lines[i]!);
    if (!head) continue;
    let last = '';
    let j = i + 1;
    if (/^-{20,}$/.test(lines[j] ?? '')) j++;
    for (; j < lines.length && !/^(=|-){20,}$/.test(lines[j]!); j++) if (lines[j]!.trim()) last = lines[j]!.trim();
    if (last) out.set(normaliseUnittestId(`${head[1]} (${head[2]})`), last);
    i = j - 1;
  }
  return out;
}
