/**
 * How tests, assertions and skips are written in each language Lilypad runs tests for: the
 * patterns weakened.ts reads a diff's lines with. Line-based on purpose (a diff holds fragments,
 * not files a parser would accept); each pattern is anchored on the forms the frameworks document,
 * so that an unrelated line is not taken for an assertion.
 */

export type TestLanguage = 'python' | 'js' | 'go' | 'rust' | 'jvm';

export interface TestSyntax {
  /** A line that begins an assertion statement. */
  assertion: RegExp;
  /** A line that skips, expects to fail, disables or focuses a test. */
  skip: RegExp;
  /** Decorators, attributes or annotations: they apply to the definition below them. */
  prefix: RegExp | null;
  /** A function, method or test block; the name is in the group `name`. */
  definition: RegExp;
  /** Whether a definition is a test, from its name, its line and the prefix lines above it. */
  isTest(name: string, line: string, prefixes: string[]): boolean;
  /** Lines above a definition that mark it a test (Rust's `#[test]`, JUnit's `@Test`). */
  marker: RegExp | null;
}

const PYTHON: TestSyntax = {
  assertion: /^\s*(?:assert\b|(?:with\s+)?self\.(?:assert|fail)\w*\s*\(|(?:with\s+)?pytest\.(?:raises|warns|deprecated_call|fail)\s*\(|(?:[\w.]+\.)?assert_\w+\s*\()/,
  skip: /@pytest\.mark\.(?:skip|skipif|xfail)\b|@(?:unittest\.)?(?:skip|skipIf|skipUnless|expectedFailure)\b|\bpytest\.(?:skip|xfail|importorskip)\s*\(|\bself\.skipTest\s*\(|\braise\s+(?:unittest\.)?SkipTest\b/,
  prefix: /^\s*@/,
  definition: /^\s*(?:async\s+)?def\s+(?<name>\w+)\s*\(/,
  isTest: (name) => name.startsWith('test'),
  marker: null,
};

const JS_TEST_CALL = /\b(?<kind>x|f)?(?<fn>it|test|specify|describe|context|suite)(?:\.\w+(?:\([^)]*\))?)*\s*\(\s*(?<q>['"`])(?<name>(?:\\.|(?!\k<q>).)*)\k<q>/;

const JS: TestSyntax = {
  assertion: /\bexpect\s*\(|\bexpect\.(?:assertions|hasAssertions)\s*\(|(?:^|[^.\w])assert(?:\.\w+)*\s*\(|\.should\b|\bt\.assert\.\w+\s*\(|\bt\.(?:ok|notOk|equal|notEqual|deepEqual|notDeepEqual|strictEqual|notStrictEqual|same|notSame|is|not|true|false|truthy|falsy|throws|throwsAsync|notThrows|notThrowsAsync|rejects|doesNotThrow|match|like|snapshot)\s*\(/,
  skip: /\b(?:it|test|describe|context|suite|specify)\.(?:skip|todo|only)\b|\b(?:xit|xtest|xdescribe|xcontext|xspecify|fit|fdescribe)\s*\(|\bt\.(?:skip|todo)\s*\(|\bthis\.skip\s*\(|\b(?:it|test|describe|suite)\s*\(.*\{\s*(?:skip|todo|only)\s*:\s*(?:true|['"`])/,
  prefix: null,
  definition: JS_TEST_CALL,
  isTest: (_name, line) => {
    const fn = JS_TEST_CALL.exec(line)?.groups?.fn;
    return fn === 'it' || fn === 'test' || fn === 'specify';
  },
  marker: null,
};

const GO: TestSyntax = {
  assertion: /\bt\.(?:Error|Errorf|Fatal|Fatalf|Fail|FailNow)\s*\(|\b(?:assert|require)\.\w+\s*\(/,
  skip: /\bt\.(?:Skip|Skipf|SkipNow)\s*\(/,
  prefix: null,
  definition: /^func\s+(?:\([^)]*\)\s*)?(?<name>\w+)\s*[[(]/,
  isTest: (name) => /^(Test|Example|Fuzz)/.test(name),
  marker: null,
};

const RUST_MARKER = /^\s*#\[(?:\w+::)*(?:test|rstest|test_case)\b/;

const RUST: TestSyntax = {
  assertion: /\b(?:debug_)?assert(?:_eq|_ne|_matches)?!\s*[([{]|\bprop_assert\w*!/,
  skip: /#\[ignore\b/,
  prefix: /^\s*#\[/,
  definition: /^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(?<name>\w+)/,
  isTest: (_name, _line, prefixes) => prefixes.some((p) => RUST_MARKER.test(p)),
  marker: RUST_MARKER,
};

const JVM_MARKER = /^\s*@(?:Test|ParameterizedTest|RepeatedTest|TestFactory|TestTemplate)\b/;
// Words a statement starts with that the method pattern would otherwise read as a return type or a name.
const NOT_METHODS = new Set(['if', 'for', 'while', 'switch', 'catch', 'synchronized', 'return', 'new', 'else', 'throw', 'case', 'yield', 'await']);

const JVM: TestSyntax = {
  assertion: /^\s*assert\b|\b(?:Assert\.|Assertions\.)?assert\w*\s*\(|\bfail\s*\(|\bverify\s*\(/,
  skip: /@(?:Disabled\w*|Ignore)\b/,
  prefix: /^\s*@/,
  definition: /^\s*(?:(?:public|protected|private|internal|static|final|override|suspend|abstract)\s+)*(?:fun\s+(?<kname>`[^`]+`|\w+)|(?<type>void|[\w<>[\]?,.]+)\s+(?<name>\w+))\s*\((?!.*;\s*$)/,
  isTest: (name, _line, prefixes) => !NOT_METHODS.has(name) && (prefixes.some((p) => JVM_MARKER.test(p)) || /^test/.test(name)),
  marker: JVM_MARKER,
};

const BY_EXTENSION: Array<[RegExp, TestSyntax]> = [
  [/\.py$/, PYTHON],
  [/\.[cm]?[jt]sx?$/, JS],
  [/\.go$/, GO],
  [/\.rs$/, RUST],
  [/\.(java|kt|scala|groovy)$/, JVM],
];

export function syntaxOf(path: string): TestSyntax | null {
  return BY_EXTENSION.find(([re]) => re.test(path))?.[1] ?? null;
}

/** The name a definition line declares, or null when the line declares none. */
export function definedName(syntax: TestSyntax, line: string): string | null {
  const g = syntax.definition.exec(line)?.groups;
  if (!g) return null;
  const name = g.name ?? g.kname;
  if (!name || NOT_METHODS.has(name) || (g.type !== undefined && NOT_METHODS.has(g.type))) return null;
  return name.replace(/^`|`$/g, '');
}

const COMMENT = /^\s*(#(?!\[)|\/\/|\/\*|\*)/;

export function isComment(line: string): boolean {
  return COMMENT.test(line);
}
