import type { Hunk } from './diff-files.ts';
import { definedName, isComment, type TestSyntax } from './test-syntax.ts';

/**
 * What one hunk of a test file does to its assertions, skips and test definitions, read from the
 * hunk's old side (context and removed lines) or new side (context and added lines). weakened.ts
 * compares the two sides.
 */

export interface SideLine {
  text: string;
  changed: boolean;
}

export interface Found {
  norm: string;
  shown: string;
  test: string | undefined;
  hunk: number;
}

/** The hunk as the old file (`-`) or the new file (`+`) reads it, with which lines the change wrote. */
export function side(h: Hunk, kind: '-' | '+'): SideLine[] {
  return h.lines.filter((l) => l.kind === ' ' || l.kind === kind).map((l) => ({ text: l.text, changed: l.kind === kind }));
}

/** Assertion statements (over several lines where brackets stay open) that contain a changed line. */
export function assertions(lines: SideLine[], syntax: TestSyntax, h: Hunk, hunk: number): Found[] {
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

export function skips(lines: SideLine[], syntax: TestSyntax, h: Hunk, hunk: number): Found[] {
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
export function changedDefinitions(old: SideLine[], now: SideLine[], syntax: TestSyntax): { deleted: string[]; added: string[] } {
  const defs = (lines: SideLine[]) => lines.flatMap((l, i) => (l.changed && isTestDefinition(lines, i, syntax) ? [definedName(syntax, l.text)!] : []));
  const removed = defs(old);
  const put = defs(now);
  const gone = removed.filter((name) => !put.includes(name));
  const added = put.filter((name) => !removed.includes(name));
  return { deleted: gone.slice(added.length), added: added.slice(gone.length) };
}

export function isTestDefinition(lines: SideLine[], i: number, syntax: TestSyntax): boolean {
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

// Reformatting (black, prettier, rustfmt, gofmt) changes whitespace, quotes, trailing commas and semicolons.
export function normalise(text: string): string {
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

export function shorten(line: string): string {
  return line.length > 120 ? `${line.slice(0, 117)}...` : line;
}
