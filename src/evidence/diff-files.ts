/**
 * A unified diff in git's format (`git diff --binary --no-renames`), cut into one section per file
 * and, for text files, into hunks. Pure: the text in, the pieces out; each section's text is kept
 * byte for byte so that pieces can be put back together into a patch `git apply` accepts.
 *
 * Give the diff as the Buffer git wrote when it may hold text that is not UTF-8 (a Latin-1 source
 * file): section texts are then Latin-1 strings, one character per byte (`Buffer.from(text,
 * 'latin1')` gives the bytes back), while paths and hunk lines are decoded as UTF-8 for reading.
 */

export interface DiffLine {
  kind: ' ' | '+' | '-';
  /** The line without its one-character prefix. */
  text: string;
}

export interface Hunk {
  /** What git printed after the second `@@`: the nearest enclosing function or class line, if any. */
  context: string;
  lines: DiffLine[];
}

export interface DiffFile {
  /** The file's path in the tree after the change, or before it for a deleted file. */
  path: string;
  status: 'added' | 'deleted' | 'modified';
  binary: boolean;
  /** The whole section, from its `diff --git` line, ending with a newline (Latin-1 for a Buffer diff). */
  text: string;
  hunks: Hunk[];
}

export class DiffFormatError extends Error {
  override name = 'DiffFormatError';
}

/** The files of a git diff, in the order they appear. An empty diff has none. */
export function diffFiles(diff: string | Buffer): DiffFile[] {
  // Line ends are kept as they are: a CRLF file's lines end in \r in its diff, and must still when applied.
  const bytes = Buffer.isBuffer(diff);
  const text = bytes ? diff.toString('latin1') : diff;
  const starts = [...text.matchAll(/^diff --git /gm)].map((m) => m.index);
  if (starts.length === 0) {
    if (text.trim() === '') return [];
    throw new DiffFormatError(`expected a diff in git's format (sections starting "diff --git a/... b/..."), got text starting ${JSON.stringify(text.slice(0, 60))}: make it with \`git diff --binary --no-renames\``);
  }
  return starts.map((start, i) => {
    let section = text.slice(start, starts[i + 1] ?? text.length);
    if (!section.endsWith('\n')) section += '\n';
    return readSection(section, bytes);
  });
}

function readSection(section: string, bytes: boolean): DiffFile {
  const decode = (s: string) => (bytes ? Buffer.from(s, 'latin1').toString('utf8') : s);
  const lines = section.split('\n');
  lines.pop();
  let oldPath: string | null = null;
  let newPath: string | null = null;
  let status: DiffFile['status'] = 'modified';
  let binary = false;
  const hunks: Hunk[] = [];
  let i = 1;
  for (; i < lines.length && !lines[i]!.startsWith('@@'); i++) {
    const line = lines[i]!;
    if (line.startsWith('new file mode')) status = 'added';
    else if (line.startsWith('deleted file mode')) status = 'deleted';
    else if (line.startsWith('--- ')) oldPath = sidePath(line.slice(4), 'a/', bytes);
    else if (line.startsWith('+++ ')) newPath = sidePath(line.slice(4), 'b/', bytes);
    else if (line.startsWith('Binary files ') || line === 'GIT binary patch') binary = true;
  }
  for (; i < lines.length; i++) {
    const head = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@ ?(.*)$/.exec(lines[i]!);
    if (!head) continue;
    let oldLeft = head[1] === undefined ? 1 : Number(head[1]);
    let newLeft = head[2] === undefined ? 1 : Number(head[2]);
    const hunk: Hunk = { context: decode(head[3] ?? ''), lines: [] };
    while ((oldLeft > 0 || newLeft > 0) && i + 1 < lines.length) {
      const raw = lines[++i]!;
      if (raw.startsWith('\\')) continue; // "\ No newline at end of file"
      const kind = raw === '' ? ' ' : raw[0];
      if (kind !== ' ' && kind !== '+' && kind !== '-') {
        i--;
        break;
      }
      hunk.lines.push({ kind, text: decode(raw.slice(1)) });
      if (kind !== '+') oldLeft--;
      if (kind !== '-') newLeft--;
    }
    hunks.push(hunk);
  }
  const path = (status === 'deleted' ? oldPath : newPath) ?? newPath ?? oldPath ?? headerPath(lines[0]!, bytes);
  return { path, status, binary, text: section, hunks };
}

// "--- a/x.py", "+++ /dev/null", "--- "a/caf\303\251.py"", or "--- a/with space.py\t".
function sidePath(raw: string, prefix: string, bytes: boolean): string | null {
  const value = raw.startsWith('"') ? unquote(raw, bytes).value : utf8(raw.replace(/\t$/, ''), bytes);
  if (value === '/dev/null') return null;
  return value.startsWith(prefix) ? value.slice(prefix.length) : value;
}

/** The path named by `diff --git a/P b/P` (binary and mode-only sections have no ---/+++ lines). */
function headerPath(header: string, bytes: boolean): string {
  const rest = header.slice('diff --git '.length);
  if (rest.startsWith('"')) {
    const a = unquote(rest, bytes);
    const b = rest.slice(a.length + 1);
    const newSide = b.startsWith('"') ? unquote(b, bytes).value : utf8(b, bytes);
    return newSide.replace(/^b\//, '');
  }
  // With renames off both sides name the same path, so the line is "a/" + P + " b/" + P.
  const n = (rest.length - 5) / 2;
  if (Number.isInteger(n) && rest.startsWith('a/') && rest.slice(2 + n) === ` b/${rest.slice(2, 2 + n)}`) return utf8(rest.slice(2, 2 + n), bytes);
  const m = /^a\/(.*?) b\/(.*)$/.exec(rest);
  if (!m) throw new DiffFormatError(`cannot read the path in ${JSON.stringify(header)}`);
  return utf8(m[2]!, bytes);
}

function utf8(s: string, bytes: boolean): string {
  return bytes ? Buffer.from(s, 'latin1').toString('utf8') : s;
}

const ESCAPES: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };

/** A path git quoted C-style (non-ASCII bytes as octal escapes); `length` counts the quotes. */
function unquote(raw: string, bytes: boolean): { value: string; length: number } {
  const out: number[] = [];
  let i = 1;
  for (; i < raw.length && raw[i] !== '"'; i++) {
    const c = raw[i]!;
    if (c !== '\\') {
      out.push(...(bytes ? [c.charCodeAt(0)] : Buffer.from(c, 'utf8')));
      continue;
    }
    const next = raw[++i] ?? '';
    if (/[0-7]/.test(next)) {
      out.push(parseInt(raw.slice(i, i + 3), 8));
      i += 2;
    } else out.push(ESCAPES[next] ?? next.charCodeAt(0));
  }
  return { value: Buffer.from(out).toString('utf8'), length: i + 1 };
}
