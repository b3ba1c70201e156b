import { diffFiles, type DiffFile, type Hunk } from './diff-files.ts';
import { isCodeFile, isTestFile } from './test-files.ts';
import { assertions, changedDefinitions, isTestDefinition, normalise, side, skips, type Found } from './test-changes.ts';
import { definedName, syntaxOf, type TestSyntax } from './test-syntax.ts';

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
 * identically (ignoring whitespace, quote style, trailing commas and semicolons), in the same file
 * or another, was moved or reformatted, not weakened; a skip added to a test the change adds (or in
 * a new file) weakens nothing; a test file deleted and re-added with the same
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
