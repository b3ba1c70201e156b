import { diffFiles, type DiffFile, type Hunk } from './diff-files.ts';
import { isCodeFile, isTestFile } from './test-files.ts';
import { definedName, isComment, syntaxOf, type TestSyntax } from './test-syntax.ts';

export interface WeakenedTest {
  file: string;
  /** The test, where the diff shows its definition (in the hunk header or its lines). */
  test?: string;
  /** What the change did to it, in a few words, quoting the line. */
  what: string;
}

/**
 * What a change does to make tests ask less: assertions deleted or edited, skips, expected
 * failures and `.only` added, test functions and test files deleted. Read from the diff alone.
 *
 * Conservative, because a false flag costs a verified verdict: an assertion deleted and re-added
 * identically (ignoring whitespace, quote style, trailing commas and semicolons) anywhere in the
 * same file was moved or reformatted, not weakened; a test file deleted and re-added with the same
 * lines elsewhere was moved; a test renamed in place was not deleted; a test deleted from one file
 * and defined in another was moved. Source files are read only where they hold tests (Rust's
 * `#[cfg(test)]` modules); assertions in other source are the program's own checks.
 */
export function weakenedTests(diff: string | Buffer): WeakenedTest[] {
  const files = diffFiles(diff);
  const definedAnywhere = new Set<string>();
  for (const f of files) {
    const syntax = syntaxOf(f.path);
    if (!syntax) continue;
    for (const h of f.hunks) {
      for (const l of h.lines) {
        const name = l.kind === '+' ? definedName(syntax, l.text) : null;
        if (name !== null) definedAnywhere.add(name);
      }
    }
  }
  const out: WeakenedTest[] = [];
  const read: FileChanges[] = [];
  for (const f of files) {
    const syntax = syntaxOf(f.path);
    const testFile = isTestFile(f.path);
    if (f.binary || !syntax || (!testFile && !f.path.endsWith('.rs'))) continue;
    if (f.status === 'deleted') {
      if (testFile && isCodeFile(f.path) && !movedElsewhere(f, files)) out.push(deletedFile(f, syntax));
      continue;
    }
    read.push(readChanges(f, testFile ? f.hunks : f.hunks.filter(showsRustTests), syntax, definedAnywhere));
  }
  // An assertion put back unchanged was moved or reformatted: in its own file first, else in another
  // (a test moved between files takes its assertions along).
  for (const r of read) r.removed = r.removed.filter((x) => !take(r.added, (a) => a.norm === x.norm));
  for (const r of read) r.removed = r.removed.filter((x) => !read.some((o) => o !== r && take(o.added, (a) => a.norm === x.norm)));
  for (const r of read) out.push(...report(r));
  return out;
}

interface SideLine {
  text: string;
  changed: boolean;
}

interface Found {
  norm: string;
  shown: string;
  test: string | undefined;
  hunk: number;
}

interface FileChanges {
  file: string;
  /** Assertion statements the change touched, as they were and as they are. */
  removed: Found[];
  added: Found[];
  skipsAdded: Found[];
  skipsRemoved: Found[];
  deletedTests: string[];
  newTests: Set<string>;
  newFile: boolean;
}

function readChanges(f: DiffFile, hunks: Hunk[], syntax: TestSyntax, definedAnywhere: Set<string>): FileChanges {
  const r: FileChanges = { file: f.path, removed: [], added: [], skipsAdded: [], skipsRemoved: [], deletedTests: [], newTests: new Set(), newFile: f.status === 'added' };
  hunks.forEach((h, i) => {
    const old = side(h, '-');
    const now = side(h, '+');
    r.removed.push(...assertions(old, syntax, h, i));
    r.added.push(...assertions(now, syntax, h, i));
    r.skipsAdded.push(...skips(now, syntax, h, i));
    r.skipsRemoved.push(...skips(old, syntax, h, i));
    const defs = changedDefinitions(old, now, syntax);
    r.deletedTests.push(...defs.deleted.filter((name) => !definedAnywhere.has(name)));
    for (const name of defs.added) r.newTests.add(name);
  });
  return r;
}

function report(r: FileChanges): WeakenedTest[] {
  const out: WeakenedTest[] = r.deletedTests.map((test) => ({ file: r.file, test, what: 'deleted the test' }));
  const gone = new Set(r.deletedTests);
  for (const x of r.removed) {
    if (x.test !== undefined && gone.has(x.test)) continue;
    const edit = take(r.added, (a) => a.hunk === x.hunk && a.test === x.test);
    out.push(withTest(r.file, x.test, edit ? `edited an assertion: \`${x.shown}\` became \`${edit.shown}\`` : `deleted an assertion: \`${x.shown}\``));
  }
  for (const s of r.skipsAdded) {
    if (take(r.skipsRemoved, (x) => x.norm === s.norm && x.test === s.test)) continue;
    // A test the change adds was not asking anything before (and a new file holds only such tests).
    if (r.newFile || (s.test !== undefined && r.newTests.has(s.test))) continue;
    out.push(withTest(r.file, s.test, `${skipWord(s.shown)}: \`${s.shown}\``));
  }
  return out;
}

function withTest(file: string, test: string | undefined, what: string): WeakenedTest {
  return test === undefined ? { file, what } : { file, test, what };
}

/** Removes and returns the first item that matches. */
function take<T>(list: T[], match: (item: T) => boolean): T | undefined {
  const i = list.findIndex(match);
  return i < 0 ? undefined : list.splice(i, 1)[0];
}

/** The hunk as the old file (`-`) or the new file (`+`) reads it, with which lines the change wrote. */
function side(h: Hunk, kind: '-' | '+'): SideLine[] {
  return h.lines.filter((l) => l.kind === ' ' || l.kind === kind).map((l) => ({ text: l.text, changed: l.kind === kind }));
}

/** Assertion statements (over several lines where brackets stay open) that contain a changed line. */
function assertions(lines: SideLine[], syntax: TestSyntax, h: Hunk, hunk: number): Found[] {
  const out: Found[] = [];
  for (let i = 0; i < lines.length; i++) {
    const at = isComment(lines[i]!.text) ? null : syntax.assertion.exec(lines[i]!.text);
    if (!at) continue;
    // From where the assertion starts: a one-line test (`it('x', () => { expect(...) })`) is more than its assertion.
    const first = definedName(syntax, lines[i]!.text) === null ? lines[i]!.text : lines[i]!.text.slice(at.index);
    let end = i;
    let depth = 0;
    for (; end < lines.length && end - i < 40; end++) {
      const t = end === i ? first : lines[end]!.text;
      depth += bracketDepth(t);
      const continues = depth > 0 || /\\\s*$/.test(t) || /^\s*\./.test(lines[end + 1]?.text ?? '');
      if (!continues) break;
    }
    end = Math.min(end, lines.length - 1);
    const statement = lines.slice(i, end + 1);
    if (statement.some((l) => l.changed)) {
      const texts = [first, ...statement.slice(1).map((l) => l.text)];
      out.push({ norm: normalise(texts.join('')), shown: shorten(texts.map((t) => t.trim()).join(' ')), test: enclosingTest(lines, i, syntax, h), hunk });
    }
    i = end;
  }
  return out;
}

function skips(lines: SideLine[], syntax: TestSyntax, h: Hunk, hunk: number): Found[] {
  const out: Found[] = [];
  lines.forEach((l, i) => {
    if (!l.changed || isComment(l.text) || !syntax.skip.test(l.text)) return;
    const test = syntax.prefix?.test(l.text) ? testBelow(lines, i, syntax) : enclosingTest(lines, i, syntax, h);
    out.push({ norm: normalise(l.text), shown: shorten(l.text.trim()), test, hunk });
  });
  return out;
}

/**
 * Tests whose definition line the change removed and did not put back in the same hunk under
 * another name (a rename in place), and tests it defines that were not there. Rust and JVM
 * definitions count only with their test marker.
 */
function changedDefinitions(old: SideLine[], now: SideLine[], syntax: TestSyntax): { deleted: string[]; added: string[] } {
  const defs = (lines: SideLine[]) => lines.flatMap((l, i) => (l.changed && isTestDefinition(lines, i, syntax) ? [definedName(syntax, l.text)!] : []));
  const removed = defs(old);
  const put = defs(now);
  const gone = removed.filter((name) => !put.includes(name));
  const added = put.filter((name) => !removed.includes(name));
  return { deleted: gone.slice(added.length), added: added.slice(gone.length) };
}

function isTestDefinition(lines: SideLine[], i: number, syntax: TestSyntax): boolean {
  const line = lines[i]!.text;
  const name = definedName(syntax, line);
  if (name === null) return false;
  const prefixes: string[] = [];
  for (let j = i - 1; j >= 0 && syntax.prefix?.test(lines[j]!.text); j--) prefixes.push(lines[j]!.text);
  if (syntax.marker && !prefixes.some((p) => syntax.marker!.test(p))) return false;
  return syntax.isTest(name, line, prefixes);
}

/** The nearest test definition above line i that encloses it (less indented), or the hunk header's. */
function enclosingTest(lines: SideLine[], i: number, syntax: TestSyntax, h: Hunk): string | undefined {
  const own = definedName(syntax, lines[i]!.text);
  if (own !== null && syntax.isTest(own, lines[i]!.text, [])) return own;
  const indent = indentOf(lines[i]!.text);
  for (let j = i - 1; j >= 0; j--) {
    const t = lines[j]!.text;
    const name = definedName(syntax, t);
    if (name === null || indentOf(t) >= indent) continue;
    // Rust and JVM mark tests on a line above the definition, which the hunk may not show.
    return syntax.marker || isTestDefinition(lines, j, syntax) ? name : undefined;
  }
  const header = definedName(syntax, h.context);
  return header !== null && (syntax.marker || syntax.isTest(header, h.context, [])) ? header : undefined;
}

/** The test a decorator, attribute or annotation on line i applies to. */
function testBelow(lines: SideLine[], i: number, syntax: TestSyntax): string | undefined {
  for (let j = i + 1; j < lines.length; j++) {
    const t = lines[j]!.text;
    if (syntax.prefix?.test(t) || t.trim() === '' || isComment(t)) continue;
    const name = definedName(syntax, t);
    return name ?? undefined;
  }
  return undefined;
}

function showsRustTests(h: Hunk): boolean {
  const test = /#\[cfg\(test\)\]|#\[(?:\w+::)*test\b|\bmod tests?\b/;
  return test.test(h.context) || h.lines.some((l) => test.test(l.text));
}

function deletedFile(f: DiffFile, syntax: TestSyntax): WeakenedTest {
  const lines = f.hunks.flatMap((h) => side(h, '-'));
  const tests = lines.flatMap((l, i) => (isTestDefinition(lines, i, syntax) ? [definedName(syntax, l.text)!] : []));
  const listed = tests.length > 0 ? ` (its tests: ${tests.slice(0, 10).join(', ')}${tests.length > 10 ? `, and ${tests.length - 10} more` : ''})` : '';
  return { file: f.path, what: `deleted the test file${listed}` };
}

/** A deleted file whose lines another file of the change adds: moved, renames being off in the diff. */
function movedElsewhere(f: DiffFile, files: DiffFile[]): boolean {
  const content = (file: DiffFile, kind: '+' | '-') =>
    file.hunks
      .flatMap((h) => h.lines.filter((l) => l.kind === kind).map((l) => normalise(l.text)))
      .filter(Boolean)
      .sort()
      .join('\n');
  const mine = content(f, '-');
  return mine !== '' && files.some((g) => g.status === 'added' && content(g, '+') === mine);
}

function skipWord(line: string): string {
  if (/xfail|expectedFailure/.test(line)) return 'marked it as expected to fail';
  if (/\.only\b|\bf(it|describe)\s*\(|\bonly\s*:/.test(line)) return 'focused the file on one test (the others stop running)';
  if (/\btodo\b/i.test(line)) return 'made it a todo';
  if (/@(Disabled|Ignore)|#\[ignore/.test(line)) return 'disabled it';
  return 'skipped it';
}

// Reformatting (black, prettier, rustfmt, gofmt) changes whitespace, quotes, trailing commas and semicolons.
function normalise(text: string): string {
  return text.replace(/\s+/g, '').replace(/'/g, '"').replace(/;/g, '').replace(/,([)\]}])/g, '$1');
}

function bracketDepth(line: string): number {
  const code = line.replace(/"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`(?:\\.|[^`\\])*`/g, '""');
  let depth = 0;
  for (const c of code) {
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
  }
  return depth;
}

function indentOf(line: string): number {
  return /^\s*/.exec(line)![0].length;
}

function shorten(line: string): string {
  return line.length > 120 ? `${line.slice(0, 117)}...` : line;
}
