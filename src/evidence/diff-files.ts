/**
 * A unified diff in git's format (`git diff --binary --no-renames`), cut into one section per file
 * and, for text files, into hunks. Pure: the text in, the pieces out; each section's text is kept
 * byte for byte so that pieces can be put back together into a patch `git apply` accepts.
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
  /** The whole section, from its `diff --git` line, ending with a newline. */
  text: string;
  hunks: Hunk[];
}

export class DiffFormatError extends Error {
  override name = 'DiffFormatError';
}

/** The files of a git diff, in the order they appear. An empty diff has none. */
export function diffFiles(diff: string): DiffFile[] {
  const text = diff.replace(/\r\n/g, '\n');
  const starts = [...text.matchAll(/^diff --git /gm)].map((m) => m.index);
  if (starts.length === 0) {
    if (text.trim() === '') return [];
    throw new DiffFormatError(`expected a diff in git's format (sections starting "diff --git a/... b/..."), got text starting ${JSON.stringify(text.slice(0, 60))}: make it with \`git diff --binary --no-renames\``);
  }
  return starts.map((start, i) => {
    let section = text.slice(start, starts[i + 1] ?? text.length);
    if (!section.endsWith('\n')) section += '\n';
    return readSection(section);
  });
}

function readSection(section: string): DiffFile {
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
    else if (line.startsWith('--- ')) oldPath = sidePath(line.slice(4), 'a/');
    else if (line.startsWith('+++ ')) newPath = sidePath(line.slice(4), 'b/');
    else if (line.startsWith('Binary files ') || line === 'GIT binary patch') binary = true;
  }
  for (; i < lines.length; i++) {
    const head = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@ ?(.*)$/.exec(lines[i]!);
    if (!head) continue;
    let oldLeft = head[1] === undefined ? 1 : Number(head[1]);
    let newLeft = head[2] === undefined ? 1 : Number(head[2]);
    const hunk: Hunk = { context: head[3] ?? '', lines: [] };
    while ((oldLeft > 0 || newLeft > 0) && i + 1 < lines.length) {
      const raw = lines[++i]!;
      if (raw.startsWith('\\')) continue; // "\ No newline at end of file"
      const kind = raw === '' ? ' ' : raw[0];
      if (kind !== ' ' && kind !== '+' && kind !== '-') {
        i--;
        break;
      }
      hunk.lines.push({ kind, text: raw.slice(1) });
      if (kind !== '+') oldLeft--;
      if (kind !== '-') newLeft--;
    }
    hunks.push(hunk);
  }
  const path = (status === 'deleted' ? oldPath : newPath) ?? newPath ?? oldPath ?? headerPath(lines[0]!);
  return { path, status, binary, text: section, hunks };
}

// "--- a/x.py", "+++ /dev/null", "--- "a/caf\303\251.py"", or "--- a/with space.py\t".
function sidePath(raw: string, prefix: string): string | null {
  const value = raw.startsWith('"') ? unquote(raw).value : raw.replace(/\t$/, '');
  if (value === '/dev/null') return null;
  return value.startsWith(prefix) ? value.slice(prefix.length) : value;
}

/** The path named by `diff --git a/P b/P` (binary and mode-only sections have no ---/+++ lines). */
function headerPath(header: string): string {
  const rest = header.slice('diff --git '.length);
  if (rest.startsWith('"')) {
    const a = unquote(rest);
    const b = rest.slice(a.length + 1);
    const newSide = b.startsWith('"') ? unquote(b).value : b;
    return newSide.replace(/^b\//, '');
  }
  // With renames off both sides name the same path, so the line is "a/" + P + " b/" + P.
  const n = (rest.length - 5) / 2;
  if (Number.isInteger(n) && rest.startsWith('a/') && rest.slice(2 + n) === ` b/${rest.slice(2, 2 + n)}`) return rest.slice(2, 2 + n);
  const m = /^a\/(.*?) b\/(.*)$/.exec(rest);
  if (!m) throw new DiffFormatError(`cannot read the path in ${JSON.stringify(header)}`);
  return m[2]!;
}

const ESCAPES: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };

/** A path git quoted C-style (non-ASCII bytes as octal escapes); `length` counts the quotes. */
function unquote(raw: string): { value: string; length: number } {
  const bytes: number[] = [];
  let i = 1;
  for (; i < raw.length && raw[i] !== '"'; i++) {
    const c = raw[i]!;
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const next = raw[++i] ?? '';
    if (/[0-7]/.test(next)) {
      bytes.push(parseInt(raw.slice(i, i + 3), 8));
      i += 2;
    } else bytes.push(ESCAPES[next] ?? next.charCodeAt(0));
  }
  return { value: Buffer.from(bytes).toString('utf8'), length: i + 1 };
}
