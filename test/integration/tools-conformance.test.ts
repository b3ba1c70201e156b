// Conformance suite for the five model-facing tools, written from docs/leaf-interface.md (the protocol
// FrogNano-4B was trained on), not from the implementation. Every case states the repository state,
// the raw arguments, the exact observation and, where it matters, the exact file bytes afterwards.
//
// Where the interface doc leaves room for more than one reading, the case picks the reading closest
// to the Python reference implementation and says so in a comment marked "Ambiguity:".
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openToolbox, TEST_WORKDIR, type FileSpec, type Toolbox } from '../support/sandbox-harness.ts';

type Args = string | Record<string, unknown>;

interface Case {
  name: string;
  /** Repository state written after emptying /testbed. */
  files?: Record<string, FileSpec>;
  /** Extra shell setup as Lilypad (runs with cwd /, after `files`). */
  setup?: string;
  /** Tool calls made first (their observations are not checked). */
  before?: Array<[string, Args]>;
  /** Tool name; defaults to the table's tool. */
  tool?: string;
  args: Args;
  /** Bash timeout cap passed to the toolbox (default: the harness's 1800 s). */
  cap?: number;
  /** Exact observation, or a function for observations that are built or partly unspecified. */
  expect: string | ((obs: string) => void);
  /** Exact bytes of files afterwards; null means the path must not exist. */
  bytes?: Record<string, string | Buffer | null>;
  /** Anything else to check afterwards. */
  check?: (tb: Toolbox, obs: string) => Promise<void>;
}

let tb: Toolbox;

/** The doc's truncation: keep the first `limit` characters (Python code points), append the marker. */
function truncate(s: string, limit: number): string {
  const cps = Array.from(s);
  if (cps.length <= limit) return s;
  return `${cps.slice(0, limit).join('')}\n[truncated ${cps.length - limit} chars]`;
}

function bashOut(rc: number, stdout: string, stderr = ''): string {
  return `Exit code: ${rc}\nSTDOUT:\n${stdout}\nSTDERR:\n${stderr}`;
}

function timedOut(t: string, stdout: string, stderr = ''): string {
  return `Timed out after ${t}s\nSTDOUT:\n${stdout}\nSTDERR:\n${stderr}`;
}

const MULTI = (n: number) => `ValueError: old_string matched ${n} times; set replace_all=true or use a more specific old_string`;
const NOT_FOUND = (abs: string) => `FileNotFoundError: [Errno 2] No such file or directory: '${abs}'`;
const IS_DIR = (abs: string) => `IsADirectoryError: [Errno 21] Is a directory: '${abs}'`;

async function runCase(defaultTool: string, c: Case): Promise<void> {
  await tb.reset(c.files ?? {});
  if (c.setup) {
    const res = await tb.sh(c.setup);
    assert.equal(res.exitCode, 0, `setup failed: ${res.stderr.toString()}`);
  }
  for (const [name, args] of c.before ?? []) await tb.call(name, args);
  const obs = await tb.call(c.tool ?? defaultTool, c.args, c.cap);
  if (typeof c.expect === 'function') c.expect(obs);
  else assert.equal(obs, c.expect);
  for (const [rel, want] of Object.entries(c.bytes ?? {})) {
    if (want === null) {
      const res = await tb.sh(`test -e ${TEST_WORKDIR}/${rel} || test -L ${TEST_WORKDIR}/${rel}`);
      assert.notEqual(res.exitCode, 0, `${rel} should not exist`);
    } else {
      const got = await tb.readBytes(rel);
      assert.deepEqual(got, Buffer.from(want), `bytes of ${rel}: got ${JSON.stringify(got.toString('latin1'))}`);
    }
  }
  if (c.check) await c.check(tb, obs);
}

function table(tool: string, cases: Case[]): void {
  describe(tool, () => {
    for (const c of cases) test(c.name, () => runCase(tool, c));
  });
}

async function isSymlink(rel: string): Promise<boolean> {
  return (await tb.sh(`test -L ${TEST_WORKDIR}/${rel}`)).exitCode === 0;
}

const OUTSIDE = '/tmp/lp-conf-outside.txt';
const MAKE_OUTSIDE = `printf 'out1\\nout2\\n' > ${OUTSIDE}`;

// ---------------------------------------------------------------------------------------------
// Read
// ---------------------------------------------------------------------------------------------
const FIVE = 'a\nb\nc\nd\ne\n';
const TWELVE = 'abcdefghijkl'.split('').map((ch) => `${ch}\n`).join('');

const readCases: Case[] = [
  {
    name: 'numbers lines "<n>. <text>", joined by \\n, no trailing newline; empty line keeps "n. "',
    files: { 'a.py': 'import os\n\ndef f():\n    return 1\n' },
    args: { file_path: 'a.py' },
    expect: 'a.py\n1. import os\n2. \n3. def f():\n4.     return 1',
  },
  {
    name: 'last line without newline',
    files: { 'b.txt': 'one\ntwo' },
    args: { file_path: 'b.txt' },
    expect: 'b.txt\n1. one\n2. two',
  },
  {
    name: 'numbers are not padded',
    files: { 't.txt': TWELVE },
    args: { file_path: 't.txt', offset: 9 },
    expect: 't.txt\n9. i\n10. j\n11. k\n12. l',
  },
  { name: 'empty file: path followed by \\n', files: { 'e.txt': '' }, args: { file_path: 'e.txt' }, expect: 'e.txt\n' },
  { name: 'file of a single newline has one empty line', files: { 'n.txt': '\n' }, args: { file_path: 'n.txt' }, expect: 'n.txt\n1. ' },
  {
    name: 'relative path in a subdirectory',
    files: { 'src/m.py': 'x\n' },
    args: { file_path: 'src/m.py' },
    expect: 'src/m.py\n1. x',
  },
  {
    name: 'absolute path inside the repo shows the repo-relative path',
    files: { 'src/m.py': 'x\n' },
    args: { file_path: '/testbed/src/m.py' },
    expect: 'src/m.py\n1. x',
  },
  {
    name: 'path with ./ and .. inside the repo shows the resolved repo-relative path',
    files: { 'src/m.py': 'x\n', 'other/keep': '' },
    args: { file_path: './other/../src/./m.py' },
    expect: 'src/m.py\n1. x',
  },
  {
    name: 'absolute path outside the repo is shown as given',
    setup: MAKE_OUTSIDE,
    args: { file_path: OUTSIDE },
    expect: `${OUTSIDE}\n1. out1\n2. out2`,
  },
  {
    name: 'relative path leading outside the repo is shown as given',
    setup: MAKE_OUTSIDE,
    args: { file_path: '../tmp/lp-conf-outside.txt' },
    expect: '../tmp/lp-conf-outside.txt\n1. out1\n2. out2',
  },
  {
    name: 'symlink inside the repo to a repo file shows the target path',
    files: { 'real/target.txt': 'T\n', 'link.txt': { symlink: 'real/target.txt' } },
    args: { file_path: 'link.txt' },
    expect: 'real/target.txt\n1. T',
  },
  {
    name: 'absolute path of a symlink to a repo file shows the target path',
    files: { 'real/target.txt': 'T\n', 'link.txt': { symlink: '/testbed/real/target.txt' } },
    args: { file_path: '/testbed/link.txt' },
    expect: 'real/target.txt\n1. T',
  },
  {
    name: 'file under a symlinked directory shows the resolved path',
    files: { 'src/m.py': 'x\n', 'alias': { symlink: 'src' } },
    args: { file_path: 'alias/m.py' },
    expect: 'src/m.py\n1. x',
  },
  {
    name: 'absolute path outside the repo that is a symlink into it shows the repo-relative path',
    files: { 'a.txt': 'A\n' },
    setup: 'ln -sfn /testbed/a.txt /tmp/lp-conf-link',
    args: { file_path: '/tmp/lp-conf-link' },
    expect: 'a.txt\n1. A',
  },
  {
    // "Paths are resolved relative to the repository directory": a leading "~" is an ordinary name.
    name: 'a leading ~ is not expanded (relative path)',
    files: { '~/note.txt': 'N\n' },
    args: { file_path: '~/note.txt' },
    expect: '~/note.txt\n1. N',
  },
  {
    name: 'symlink in the repo pointing outside is shown as given',
    setup: MAKE_OUTSIDE,
    files: { 'out.txt': { symlink: OUTSIDE } },
    args: { file_path: 'out.txt' },
    expect: 'out.txt\n1. out1\n2. out2',
  },
  { name: 'offset 2 limit 2', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', offset: 2, limit: 2 }, expect: 'f.txt\n2. b\n3. c' },
  { name: 'only limit', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', limit: 2 }, expect: 'f.txt\n1. a\n2. b' },
  { name: 'offset 0 is treated as 1', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', offset: 0, limit: 2 }, expect: 'f.txt\n1. a\n2. b' },
  { name: 'negative offset is treated as 1', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', offset: -3, limit: 1 }, expect: 'f.txt\n1. a' },
  { name: 'limit 0 means to end of file', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', offset: 4, limit: 0 }, expect: 'f.txt\n4. d\n5. e' },
  { name: 'negative limit means to end of file', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', offset: 4, limit: -1 }, expect: 'f.txt\n4. d\n5. e' },
  { name: 'limit beyond the end stops at the end', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', offset: 5, limit: 100 }, expect: 'f.txt\n5. e' },
  { name: 'offset exactly one past the end: path followed by \\n', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', offset: 6 }, expect: 'f.txt\n' },
  { name: 'offset far beyond the end with a limit', files: { 'f.txt': FIVE }, args: { file_path: 'f.txt', offset: 1000, limit: 3 }, expect: 'f.txt\n' },
  {
    name: 'no default line limit (2500 lines all returned)',
    files: { 'long.txt': 'x\n'.repeat(2500) },
    args: { file_path: 'long.txt' },
    expect: 'long.txt\n' + Array.from({ length: 2500 }, (_, i) => `${i + 1}. x`).join('\n'),
  },
  {
    name: 'splits like str.splitlines(): \\r\\n \\r \\x0b \\x0c \\x1c \\x1d \\x1e \\x85 \\u2028 \\u2029',
    files: { 's.txt': 'a\r\nb\rc\x0bd\x0ce\x1cf\x1dg\x1eh\x85i\u2028j\u2029k\r\r\nl\r\n' },
    args: { file_path: 's.txt' },
    expect: 's.txt\n' + ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', '', 'l'].map((t, i) => `${i + 1}. ${t}`).join('\n'),
  },
  {
    name: 'characters that are not line boundaries (\\x1f, \\x1b, \\t, \\u0084) do not split',
    files: { 'ns.txt': 'a\x1fb\x1bc\td\u0084e\n' },
    args: { file_path: 'ns.txt' },
    expect: 'ns.txt\n1. a\x1fb\x1bc\td\u0084e',
  },
  {
    name: 'invalid UTF-8 bytes become U+FFFD',
    files: { 'bin.txt': Buffer.from([0x61, 0xff, 0x62, 0x0a, 0x63, 0xe2, 0x82, 0x64, 0x0a, 0xc3]) },
    args: { file_path: 'bin.txt' },
    expect: 'bin.txt\n1. a\uFFFDb\n2. c\uFFFDd\n3. \uFFFD',
  },
  {
    name: 'output over 20000 chars is truncated with "\\n[truncated N chars]"',
    files: { 'big.txt': `${'x'.repeat(30000)}\n` },
    args: { file_path: 'big.txt' },
    expect: `big.txt\n1. ${'x'.repeat(19989)}\n[truncated 10011 chars]`,
  },
  {
    name: 'output of exactly 20000 chars is not truncated',
    files: { 'b.txt': 'y'.repeat(20000 - 'b.txt\n1. '.length) },
    args: { file_path: 'b.txt' },
    expect: `b.txt\n1. ${'y'.repeat(19991)}`,
  },
  {
    name: 'output of 20001 chars loses one char',
    files: { 'b.txt': 'y'.repeat(19992) },
    args: { file_path: 'b.txt' },
    expect: `b.txt\n1. ${'y'.repeat(19991)}\n[truncated 1 chars]`,
  },
  {
    name: 'truncation counts characters (code points), not UTF-16 units or bytes',
    // Written from inside the container: the harness's argv cannot carry 100 kB of base64.
    setup: `python3 -c "import sys; sys.stdout.write(chr(0x1F600) * 25000 + chr(10))" > /testbed/emoji.txt`,
    args: { file_path: 'emoji.txt' },
    expect: truncate(`emoji.txt\n1. ${'\u{1F600}'.repeat(25000)}`, 20000),
  },
  {
    name: 'multi-line truncation keeps the head of the numbered text',
    files: { 'm.txt': Array.from({ length: 4000 }, (_, i) => `line ${i + 1}`).join('\n') },
    args: { file_path: 'm.txt', offset: 10 },
    expect: truncate(
      'm.txt\n' + Array.from({ length: 3991 }, (_, i) => `${i + 10}. line ${i + 10}`).join('\n'),
      20000,
    ),
  },
  { name: 'missing file (relative)', args: { file_path: 'nope.txt' }, expect: NOT_FOUND('/testbed/nope.txt') },
  { name: 'missing file in a missing directory (absolute)', args: { file_path: '/testbed/no/such.txt' }, expect: NOT_FOUND('/testbed/no/such.txt') },
  { name: 'directory', files: { 'src/m.py': '' }, args: { file_path: 'src' }, expect: IS_DIR('/testbed/src') },
  { name: '`path` is a fallback for file_path', files: { 'p.txt': 'P\n' }, args: { path: 'p.txt' }, expect: 'p.txt\n1. P' },
  {
    name: 'file_path wins over path',
    files: { 'p.txt': 'P\n', 'q.txt': 'Q\n' },
    args: { file_path: 'q.txt', path: 'p.txt' },
    expect: 'q.txt\n1. Q',
  },
  { name: 'missing file_path', args: {}, expect: 'ValueError: file_path is required' },
  { name: 'null file_path', args: { file_path: null }, expect: 'ValueError: file_path is required' },
  // Ambiguity: the doc does not say whether "" counts as missing. A Python reference written as
  // `args.get("file_path") or args.get("path")` treats "" as missing, so that is the reading used.
  { name: 'empty file_path counts as missing', files: { 'a.txt': '' }, args: { file_path: '' }, expect: 'ValueError: file_path is required' },
  { name: 'unknown extra arguments are ignored', files: { 'a.txt': 'A\n' }, args: { file_path: 'a.txt', foo: 1, description: 'x' }, expect: 'a.txt\n1. A' },
  {
    // Ambiguity: only the "<ErrorClassName>: " shape is specified for OS errors other than the two
    // quoted ones; Python raises OSError [Errno 36] for an over-long name.
    name: 'error texts are never truncated (25000-char file name)',
    args: { file_path: 'x'.repeat(25000) },
    expect: (obs) => {
      assert.equal(obs, `OSError: [Errno 36] File name too long: '/testbed/${'x'.repeat(25000)}'`);
    },
  },
];

// ---------------------------------------------------------------------------------------------
// Write
// ---------------------------------------------------------------------------------------------
const writeCases: Case[] = [
  { name: 'creates a file', args: { file_path: 'new.txt', content: 'hello\n' }, expect: 'Wrote new.txt (6 bytes).', bytes: { 'new.txt': 'hello\n' } },
  {
    name: 'N counts characters (code points), not bytes or UTF-16 units',
    args: { file_path: 'uni.txt', content: 'héllo wörld \u{1F600}\n' },
    expect: 'Wrote uni.txt (14 bytes).',
    bytes: { 'uni.txt': 'héllo wörld \u{1F600}\n' },
  },
  { name: 'one character still says "bytes"', args: { file_path: 'one.txt', content: 'x' }, expect: 'Wrote one.txt (1 bytes).', bytes: { 'one.txt': 'x' } },
  { name: 'empty content', args: { file_path: 'empty.txt', content: '' }, expect: 'Wrote empty.txt (0 bytes).', bytes: { 'empty.txt': '' } },
  {
    name: 'creates parent directories',
    args: { file_path: 'a/b/c/d.txt', content: 'abc' },
    expect: 'Wrote a/b/c/d.txt (3 bytes).',
    bytes: { 'a/b/c/d.txt': 'abc' },
  },
  {
    name: 'overwrites an existing file completely',
    files: { 'o.txt': 'a much longer old content\nline 2\n' },
    args: { file_path: 'o.txt', content: 'new\n' },
    expect: 'Wrote o.txt (4 bytes).',
    bytes: { 'o.txt': 'new\n' },
  },
  {
    name: 'absolute path inside the repo shows the repo-relative path',
    args: { file_path: '/testbed/sub/abs.txt', content: 'z' },
    expect: 'Wrote sub/abs.txt (1 bytes).',
    bytes: { 'sub/abs.txt': 'z' },
  },
  {
    name: 'absolute path outside the repo is shown as given',
    setup: 'rm -rf /tmp/lp-conf-w',
    args: { file_path: '/tmp/lp-conf-w/out.txt', content: 'hi' },
    expect: 'Wrote /tmp/lp-conf-w/out.txt (2 bytes).',
    check: async (t) => {
      assert.equal((await t.sh('cat /tmp/lp-conf-w/out.txt')).out, 'hi');
    },
  },
  {
    name: 'writing through a symlink writes the target and shows its path',
    files: { 'real.txt': 'old\n', 'link.txt': { symlink: 'real.txt' } },
    args: { file_path: 'link.txt', content: 'new\n' },
    expect: 'Wrote real.txt (4 bytes).',
    bytes: { 'real.txt': 'new\n' },
    check: async () => assert.ok(await isSymlink('link.txt'), 'link.txt should still be a symlink'),
  },
  {
    name: 'quirk: overwriting a CRLF file keeps CRLF line endings (N still counts the content given)',
    files: { 'crlf.txt': 'a\r\nb\r\n' },
    args: { file_path: 'crlf.txt', content: 'a\nb\nc\n' },
    expect: 'Wrote crlf.txt (6 bytes).',
    bytes: { 'crlf.txt': 'a\r\nb\r\nc\r\n' },
  },
  {
    name: 'overwriting an LF file keeps LF',
    files: { 'lf.txt': 'a\nb\n' },
    args: { file_path: 'lf.txt', content: 'x\ny\n' },
    expect: 'Wrote lf.txt (4 bytes).',
    bytes: { 'lf.txt': 'x\ny\n' },
  },
  {
    // The reference writes text mode on Linux: "\n" is written as "\n" and "\r\n" stays "\r\n".
    name: 'a new file gets the content exactly as given (no newline translation)',
    args: { file_path: 'as-is.txt', content: 'a\r\nb\nc' },
    expect: 'Wrote as-is.txt (6 bytes).',
    bytes: { 'as-is.txt': 'a\r\nb\nc' },
  },
  {
    name: 'quirk: content null writes an empty file',
    files: { 'n.txt': 'old' },
    args: { file_path: 'n.txt', content: null },
    expect: 'Wrote n.txt (0 bytes).',
    bytes: { 'n.txt': '' },
  },
  // Ambiguity: the doc's general rule ("a missing required argument -> ValueError: <name> is
  // required") is applied to an absent `content`; only null has the documented quirk.
  { name: 'absent content', args: { file_path: 'c.txt' }, expect: 'ValueError: content is required', bytes: { 'c.txt': null } },
  {
    name: 'a leading ~ is not expanded (relative path)',
    args: { file_path: '~/w.txt', content: 'w' },
    expect: 'Wrote ~/w.txt (1 bytes).',
    bytes: { '~/w.txt': 'w' },
  },
  { name: '`path` fallback', args: { path: 'p.txt', content: 'x' }, expect: 'Wrote p.txt (1 bytes).', bytes: { 'p.txt': 'x' } },
  { name: 'missing file_path', args: { content: 'x' }, expect: 'ValueError: file_path is required' },
  { name: 'directory', files: { 'src/m.py': '' }, args: { file_path: 'src', content: 'x' }, expect: IS_DIR('/testbed/src') },
];

// ---------------------------------------------------------------------------------------------
// Edit
// ---------------------------------------------------------------------------------------------
const PY = 'x = 1\ny = 2\n';
const TRUTHY: unknown[] = [true, '1', 'true', 'yes', 'on', 'TRUE', 'Yes', 'ON', 'tRuE'];
// Ambiguity: numbers (e.g. 1) are neither "boolean true" nor strings; they are left out.
const FALSY: unknown[] = [false, null, 'false', '0', 'no', 'off', '', 'y', 'enabled'];

const editCases: Case[] = [
  {
    name: 'single replacement',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: 'x = 1', new_string: 'x = 10' },
    expect: 'Edited a.py (1 replacement).',
    bytes: { 'a.py': 'x = 10\ny = 2\n' },
  },
  {
    name: 'multi-line old_string',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: '1\ny', new_string: '1\n\ny' },
    expect: 'Edited a.py (1 replacement).',
    bytes: { 'a.py': 'x = 1\n\ny = 2\n' },
  },
  {
    name: 'empty old_string',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: '', new_string: 'z' },
    expect: 'ValueError: old_string must be non-empty',
    bytes: { 'a.py': PY },
  },
  // Ambiguity: an absent old_string falls under the general "missing required argument" rule.
  {
    name: 'absent old_string',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', new_string: 'z' },
    expect: 'ValueError: old_string is required',
    bytes: { 'a.py': PY },
  },
  {
    name: 'zero matches',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: 'z = 3', new_string: 'q' },
    expect: 'ValueError: old_string was not found',
    bytes: { 'a.py': PY },
  },
  {
    name: 'matching is case-sensitive',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: 'X = 1', new_string: 'q' },
    expect: 'ValueError: old_string was not found',
  },
  {
    name: 'matching is whitespace-sensitive',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: 'x  = 1', new_string: 'q' },
    expect: 'ValueError: old_string was not found',
  },
  {
    name: 'several matches without replace_all',
    files: { 'r.txt': 'x x x' },
    args: { file_path: 'r.txt', old_string: 'x', new_string: 'y' },
    expect: MULTI(3),
    bytes: { 'r.txt': 'x x x' },
  },
  ...TRUTHY.map(
    (v): Case => ({
      name: `replace_all ${JSON.stringify(v)} is true`,
      files: { 'r.txt': 'x x x' },
      args: { file_path: 'r.txt', old_string: 'x', new_string: 'y', replace_all: v },
      expect: 'Edited r.txt (3 replacements).',
      bytes: { 'r.txt': 'y y y' },
    }),
  ),
  ...FALSY.map(
    (v): Case => ({
      name: `replace_all ${JSON.stringify(v)} is false`,
      files: { 'r.txt': 'x x x' },
      args: { file_path: 'r.txt', old_string: 'x', new_string: 'y', replace_all: v },
      expect: MULTI(3),
      bytes: { 'r.txt': 'x x x' },
    }),
  ),
  {
    name: 'replace_all false with a single match edits',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: 'y', new_string: 'w', replace_all: false },
    expect: 'Edited a.py (1 replacement).',
    bytes: { 'a.py': 'x = 1\nw = 2\n' },
  },
  {
    name: 'replace_all true with a single match says "1 replacement"',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: 'y', new_string: 'w', replace_all: true },
    expect: 'Edited a.py (1 replacement).',
    bytes: { 'a.py': 'x = 1\nw = 2\n' },
  },
  {
    name: 'non-overlapping count: "aa" in "aaaa" is 2',
    files: { 'o.txt': 'aaaa' },
    args: { file_path: 'o.txt', old_string: 'aa', new_string: 'b' },
    expect: MULTI(2),
    bytes: { 'o.txt': 'aaaa' },
  },
  {
    name: 'non-overlapping replace_all: "aa" in "aaaa" -> 2 replacements',
    files: { 'o.txt': 'aaaa' },
    args: { file_path: 'o.txt', old_string: 'aa', new_string: 'b', replace_all: 'yes' },
    expect: 'Edited o.txt (2 replacements).',
    bytes: { 'o.txt': 'bb' },
  },
  {
    name: 'non-overlapping: "aa" in "aaa" is a single match',
    files: { 'o.txt': 'aaa' },
    args: { file_path: 'o.txt', old_string: 'aa', new_string: 'b' },
    expect: 'Edited o.txt (1 replacement).',
    bytes: { 'o.txt': 'ba' },
  },
  {
    name: 'literal strings: no regex in old_string, no backreferences in new_string',
    files: { 'l.txt': 'a.b axb\n' },
    args: { file_path: 'l.txt', old_string: 'a.b', new_string: '$1\\0\\g<0>$&' },
    expect: 'Edited l.txt (1 replacement).',
    bytes: { 'l.txt': '$1\\0\\g<0>$& axb\n' },
  },
  {
    name: 'absent new_string means empty string',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: 'x = 1\n' },
    expect: 'Edited a.py (1 replacement).',
    bytes: { 'a.py': 'y = 2\n' },
  },
  {
    name: 'null new_string means empty string',
    files: { 'a.py': PY },
    args: { file_path: 'a.py', old_string: ' = 2', new_string: null },
    expect: 'Edited a.py (1 replacement).',
    bytes: { 'a.py': 'x = 1\ny\n' },
  },
  {
    name: 'non-ASCII content stays UTF-8',
    files: { 'u.txt': 'héllo \u{1F600} wörld' },
    args: { file_path: 'u.txt', old_string: '\u{1F600}', new_string: '\u{1F438}é' },
    expect: 'Edited u.txt (1 replacement).',
    bytes: { 'u.txt': 'héllo \u{1F438}é wörld' },
  },
  {
    name: 'quirk: CRLF file edited with an old_string containing \\n keeps CRLF',
    files: { 'crlf.py': 'def f():\r\n    return 1\r\n\r\nprint(f())\r\n' },
    args: { file_path: 'crlf.py', old_string: 'def f():\n    return 1\n', new_string: 'def f():\n    return 2\n' },
    expect: 'Edited crlf.py (1 replacement).',
    bytes: { 'crlf.py': 'def f():\r\n    return 2\r\n\r\nprint(f())\r\n' },
  },
  {
    name: 'quirk: CRLF file, new_string adding lines gets CRLF',
    files: { 'crlf.txt': 'a\r\nb\r\n' },
    args: { file_path: 'crlf.txt', old_string: 'b', new_string: 'b\nc\nd' },
    expect: 'Edited crlf.txt (1 replacement).',
    bytes: { 'crlf.txt': 'a\r\nb\r\nc\r\nd\r\n' },
  },
  {
    name: 'quirk: CRLF file counts matches across line breaks the same way',
    files: { 'crlf.txt': 'a\r\nb\r\na\r\nb\r\n' },
    args: { file_path: 'crlf.txt', old_string: 'a\nb', new_string: 'x' },
    expect: MULTI(2),
    bytes: { 'crlf.txt': 'a\r\nb\r\na\r\nb\r\n' },
  },
  {
    name: 'quirk: CRLF file replace_all across line breaks',
    files: { 'crlf.txt': 'a\r\nb\r\na\r\nb\r\n' },
    args: { file_path: 'crlf.txt', old_string: 'a\nb', new_string: 'x\ny', replace_all: true },
    expect: 'Edited crlf.txt (2 replacements).',
    bytes: { 'crlf.txt': 'x\r\ny\r\nx\r\ny\r\n' },
  },
  {
    // The reference matches against text whose line endings are already "\n", so "\r\n" never matches.
    name: 'quirk: old_string containing \\r\\n does not match a CRLF file (as in the reference)',
    files: { 'crlf.txt': 'a\r\nb\r\n' },
    args: { file_path: 'crlf.txt', old_string: 'a\r\nb', new_string: 'x' },
    expect: 'ValueError: old_string was not found',
    bytes: { 'crlf.txt': 'a\r\nb\r\n' },
  },
  {
    name: 'quirk: non-UTF-8 file is refused with an error observation and left byte-identical',
    files: { 'latin1.py': Buffer.from([0x78, 0x20, 0x3d, 0x20, 0x27, 0xe9, 0x27, 0x0a, 0x79, 0x0a]) },
    args: { file_path: 'latin1.py', old_string: 'y', new_string: 'z' },
    // The doc fixes only the "<ErrorClassName>: <message>" shape of this refusal, not its text.
    expect: (obs) => assert.match(obs, /^[A-Za-z]+Error: \S.*$/s),
    bytes: { 'latin1.py': Buffer.from([0x78, 0x20, 0x3d, 0x20, 0x27, 0xe9, 0x27, 0x0a, 0x79, 0x0a]) },
  },
  {
    name: 'absolute path shows the repo-relative path',
    files: { 'src/a.py': PY },
    args: { file_path: '/testbed/src/a.py', old_string: 'y', new_string: 'w' },
    expect: 'Edited src/a.py (1 replacement).',
    bytes: { 'src/a.py': 'x = 1\nw = 2\n' },
  },
  {
    name: 'editing through a symlink edits the target and shows its path',
    files: { 'real.py': PY, 'link.py': { symlink: 'real.py' } },
    args: { file_path: 'link.py', old_string: 'y', new_string: 'w' },
    expect: 'Edited real.py (1 replacement).',
    bytes: { 'real.py': 'x = 1\nw = 2\n' },
    check: async () => assert.ok(await isSymlink('link.py'), 'link.py should still be a symlink'),
  },
  {
    name: '`path` fallback',
    files: { 'a.py': PY },
    args: { path: 'a.py', old_string: 'y', new_string: 'w' },
    expect: 'Edited a.py (1 replacement).',
    bytes: { 'a.py': 'x = 1\nw = 2\n' },
  },
  { name: 'missing file_path', args: { old_string: 'a', new_string: 'b' }, expect: 'ValueError: file_path is required' },
  { name: 'missing file', args: { file_path: 'nope.py', old_string: 'a', new_string: 'b' }, expect: NOT_FOUND('/testbed/nope.py') },
  { name: 'directory', files: { 'src/m.py': '' }, args: { file_path: 'src', old_string: 'a', new_string: 'b' }, expect: IS_DIR('/testbed/src') },
];

// ---------------------------------------------------------------------------------------------
// Glob
// ---------------------------------------------------------------------------------------------
const TREE: Record<string, FileSpec> = {
  'a.py': '',
  'README.md': '',
  'src/b.py': '',
  'src/d.txt': '',
  'src/deep/c.py': '',
  'empty': { dir: true },
};
const HIDDEN: Record<string, FileSpec> = {
  '.env': '',
  '.hidden.py': '',
  '.git/config': '',
  '.git/x.py': '',
  '.github/w.py': '',
  'src/.h.py': '',
  'src/v.py': '',
};
const names = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `many/f${String(from + i).padStart(4, '0')}.txt`);

const globCases: Case[] = [
  { name: '**/*.py recurses, including the top level', files: TREE, args: { pattern: '**/*.py' }, expect: 'a.py\nsrc/b.py\nsrc/deep/c.py' },
  { name: '*.py is the top level only', files: TREE, args: { pattern: '*.py' }, expect: 'a.py' },
  { name: 'src/**/*.py: ** also matches zero directories', files: TREE, args: { pattern: 'src/**/*.py' }, expect: 'src/b.py\nsrc/deep/c.py' },
  { name: '** lists every file, sorted', files: TREE, args: { pattern: '**' }, expect: 'README.md\na.py\nsrc/b.py\nsrc/d.txt\nsrc/deep/c.py' },
  { name: 'directories are excluded (*)', files: TREE, args: { pattern: '*' }, expect: 'README.md\na.py' },
  { name: 'directories are excluded (src/*)', files: TREE, args: { pattern: 'src/*' }, expect: 'src/b.py\nsrc/d.txt' },
  { name: 'a pattern naming only a directory matches nothing', files: TREE, args: { pattern: 'src' }, expect: 'No files matched.' },
  { name: 'literal file name', files: TREE, args: { pattern: 'src/b.py' }, expect: 'src/b.py' },
  { name: '? and [..] wildcards', files: { 'a.py': '', 'ab.py': '', 'c.py': '' }, args: { pattern: '[ab]?.py' }, expect: 'ab.py' },
  { name: 'path argument (relative); results are repo-relative display paths', files: TREE, args: { pattern: '*.py', path: 'src' }, expect: 'src/b.py' },
  { name: 'path argument (absolute)', files: TREE, args: { pattern: '*', path: '/testbed/src/deep' }, expect: 'src/deep/c.py' },
  { name: 'path argument with **', files: TREE, args: { pattern: '**/*.py', path: 'src' }, expect: 'src/b.py\nsrc/deep/c.py' },
  { name: 'absolute pattern inside the repo', files: TREE, args: { pattern: '/testbed/src/*.py' }, expect: 'src/b.py' },
  { name: 'hidden files and directories are skipped by wildcards (**/*.py)', files: HIDDEN, args: { pattern: '**/*.py' }, expect: 'src/v.py' },
  { name: 'hidden files and directories are skipped by wildcards (**)', files: HIDDEN, args: { pattern: '**' }, expect: 'src/v.py' },
  { name: 'a pattern spelling the dot matches hidden files (.*)', files: HIDDEN, args: { pattern: '.*' }, expect: '.env\n.hidden.py' },
  { name: 'a pattern spelling the dot matches hidden files (**/.*.py)', files: HIDDEN, args: { pattern: '**/.*.py' }, expect: '.hidden.py\nsrc/.h.py' },
  { name: 'a pattern spelling a hidden directory enters it', files: HIDDEN, args: { pattern: '.git/*' }, expect: '.git/config\n.git/x.py' },
  { name: 'hidden directory spelled, then **', files: HIDDEN, args: { pattern: '.github/**/*.py' }, expect: '.github/w.py' },
  {
    name: 'path outside the repo: results shown as the paths found there',
    setup: 'rm -rf /tmp/lp-conf-g && mkdir -p /tmp/lp-conf-g/sub && touch /tmp/lp-conf-g/b.txt /tmp/lp-conf-g/sub/a.txt',
    args: { pattern: '**/*.txt', path: '/tmp/lp-conf-g' },
    expect: '/tmp/lp-conf-g/b.txt\n/tmp/lp-conf-g/sub/a.txt',
  },
  {
    name: 'a symlink to a file is listed under its target path',
    files: { 'a.py': '', 'real/t.py': '', 'link.py': { symlink: 'real/t.py' } },
    args: { pattern: '*.py' },
    expect: 'a.py\nreal/t.py',
  },
  {
    name: 'the same target can appear twice',
    files: { 'a.py': '', 'real/t.py': '', 'link.py': { symlink: 'real/t.py' } },
    args: { pattern: '**/*.py' },
    expect: 'a.py\nreal/t.py\nreal/t.py',
  },
  {
    name: 'sorted by code point: uppercase, underscore, lowercase, U+FF5E, then a non-BMP character',
    files: { 'a.txt': '', 'B.txt': '', '_x.txt': '', '\uFF5E.txt': '', '\u{1F438}.txt': '' },
    args: { pattern: '*.txt' },
    // JavaScript's default sort would put U+1F438 (UTF-16 D83D DC38) before U+FF5E.
    expect: 'B.txt\n_x.txt\na.txt\n\uFF5E.txt\n\u{1F438}.txt',
  },
  {
    name: 'sorted on the whole display path ("-" < "." < "/")',
    files: { 'a-b.py': '', 'a.py': '', 'a/b.py': '' },
    args: { pattern: '**/*.py' },
    expect: 'a-b.py\na.py\na/b.py',
  },
  {
    name: 'exactly 1000 files: no trailer',
    setup: 'mkdir -p /testbed/many && cd /testbed/many && touch f{0001..1000}.txt',
    args: { pattern: 'many/*.txt' },
    expect: names(1, 1000).join('\n'),
  },
  {
    name: '1001 files: "... 1 more files"',
    setup: 'mkdir -p /testbed/many && cd /testbed/many && touch f{0001..1001}.txt',
    args: { pattern: 'many/*.txt' },
    expect: `${names(1, 1000).join('\n')}\n... 1 more files`,
  },
  {
    name: '1005 files: the first 1000 in order, then "... 5 more files"',
    setup: 'mkdir -p /testbed/many && cd /testbed/many && touch f{1005..0001}.txt',
    args: { pattern: '**/*.txt' },
    expect: `${names(1, 1000).join('\n')}\n... 5 more files`,
  },
  { name: 'empty pattern', files: TREE, args: { pattern: '' }, expect: 'ValueError: pattern is required' },
  { name: 'missing pattern', files: TREE, args: { path: 'src' }, expect: 'ValueError: pattern is required' },
  { name: 'no match', files: TREE, args: { pattern: '**/*.rs' }, expect: 'No files matched.' },
];

// ---------------------------------------------------------------------------------------------
// Bash
// ---------------------------------------------------------------------------------------------
const MARKER = 'lpconfmarker7c1f';
const noMarkerLeft = async (t: Toolbox) => {
  // "lpconfmarker[7]c1f" matches the marker but not this pgrep's own command line.
  const res = await t.sh(`pgrep -af 'lpconfmarker[7]c1f' || true`);
  assert.equal(res.out, '', `a background child survived the timeout:\n${res.out}`);
};
const BIG = '0123456789abcdef\n'.repeat(250000); // 4.25 MB

const bashCases: Case[] = [
  { name: 'stdout ending in a newline shows a blank line before STDERR:', args: { command: 'echo hello' }, expect: 'Exit code: 0\nSTDOUT:\nhello\n\nSTDERR:\n' },
  { name: 'stdout without trailing newline', args: { command: 'printf hi' }, expect: 'Exit code: 0\nSTDOUT:\nhi\nSTDERR:\n' },
  { name: 'no output at all', args: { command: 'true' }, expect: 'Exit code: 0\nSTDOUT:\n\nSTDERR:\n' },
  { name: 'exit code', args: { command: 'exit 3' }, expect: bashOut(3, '') },
  { name: 'exit code 255', args: { command: 'exit 255' }, expect: bashOut(255, '') },
  { name: 'stderr captured separately', args: { command: 'echo a; echo b >&2; echo c; exit 1' }, expect: bashOut(1, 'a\nc\n', 'b\n') },
  { name: 'stderr without trailing newline', args: { command: 'printf oops >&2' }, expect: bashOut(0, '', 'oops') },
  { name: '\\r\\n and \\r arrive as \\n (stdout and stderr)', args: { command: "printf 'a\\r\\nb\\rc\\n'; printf 'x\\r\\ny\\r' >&2" }, expect: bashOut(0, 'a\nb\nc\n', 'x\ny\n') },
  { name: 'invalid UTF-8 output becomes U+FFFD (quirk)', args: { command: "printf 'a\\xffb\\n'; printf '\\xfe\\xe2\\x82' >&2" }, expect: bashOut(0, 'a\uFFFDb\n', '\uFFFD\uFFFD') },
  { name: 'non-ASCII output', args: { command: "printf 'h\\xc3\\xa9 \\xf0\\x9f\\x90\\xb8\\n'" }, expect: bashOut(0, 'hé \u{1F438}\n') },
  { name: 'cwd is /testbed', args: { command: 'pwd' }, expect: bashOut(0, '/testbed\n') },
  { name: 'runs /bin/bash', args: { command: 'echo "$0"' }, expect: bashOut(0, '/bin/bash\n') },
  { name: 'login shell (bash -lc)', args: { command: 'shopt -q login_shell && echo login' }, expect: bashOut(0, 'login\n') },
  { name: 'description is ignored', args: { command: 'echo x', description: 'print x' }, expect: bashOut(0, 'x\n') },
  {
    name: 'stdin is empty (at end of file)',
    args: { command: 'cat; read -r x; echo "read=$? x=[$x]"', timeout: 5 },
    expect: bashOut(0, 'read=1 x=[]\n'),
  },
  {
    name: 'no shell state survives between calls',
    before: [['Bash', { command: 'export LPCONF=1; cd /tmp; lpf() { :; }; shopt -s extglob' }]],
    args: { command: 'echo "[${LPCONF-unset}] $(pwd) $(type -t lpf || echo nofunc) $(shopt -q extglob && echo on || echo off)"' },
    expect: bashOut(0, '[unset] /testbed nofunc off\n'),
  },
  {
    name: 'files written by an earlier call persist (filesystem is not shell state)',
    before: [['Bash', { command: 'echo kept > f.txt' }]],
    args: { command: 'cat f.txt' },
    expect: bashOut(0, 'kept\n'),
  },
  { name: 'signal death shows a negative code (-9)', args: { command: 'echo hi; kill -9 $$' }, expect: bashOut(-9, 'hi\n') },
  { name: 'signal death shows a negative code (-15)', args: { command: 'kill -TERM $$' }, expect: bashOut(-15, '') },
  {
    name: 'timeout: "Timed out after 1.0s" with partial stdout and stderr',
    args: { command: 'echo start; echo warn >&2; sleep 5; echo end', timeout: 1 },
    expect: timedOut('1.0', 'start\n', 'warn\n'),
  },
  {
    name: 'timeout: partial output keeps \\r\\n and \\r as is, invalid bytes replaced',
    args: { command: "printf 'a\\r\\nb\\rc\\xff'; sleep 5", timeout: 0.5 },
    expect: timedOut('0.5', 'a\r\nb\rc\uFFFD'),
  },
  { name: 'timeout: minimum 0.1', args: { command: 'sleep 3', timeout: 0.01 }, expect: timedOut('0.1', '') },
  { name: 'timeout above 1000 is read as milliseconds', args: { command: 'echo s; sleep 5', timeout: 1500 }, expect: timedOut('1.5', 's\n') },
  { name: 'timeout_ms wins over timeout (shorter)', args: { command: 'sleep 5', timeout: 60, timeout_ms: 700 }, expect: timedOut('0.7', '') },
  {
    name: 'timeout_ms wins over timeout (longer)',
    args: { command: 'sleep 0.6; echo done', timeout: 0.2, timeout_ms: 3000 },
    expect: bashOut(0, 'done\n'),
  },
  {
    name: 'timeout cap: bashCapSeconds=1 with timeout 5 -> "Timed out after 1.0s"',
    cap: 1,
    args: { command: 'echo x; sleep 4', timeout: 5 },
    expect: timedOut('1.0', 'x\n'),
  },
  { name: 'timeout cap applies to the default timeout', cap: 1, args: { command: 'sleep 4' }, expect: timedOut('1.0', '') },
  { name: 'a timeout below the cap is kept', cap: 1, args: { command: 'sleep 4', timeout: 0.3 }, expect: timedOut('0.3', '') },
  {
    name: 'a background child still running at the timeout is killed',
    args: { command: `bash -c 'exec -a ${MARKER} sleep 37' & echo started; wait`, timeout: 1 },
    expect: timedOut('1.0', 'started\n'),
    check: noMarkerLeft,
  },
  {
    name: 'a background child in its own session still running at the timeout is killed',
    args: { command: `setsid bash -c 'exec -a ${MARKER} sleep 38' & echo started; sleep 10`, timeout: 1 },
    expect: timedOut('1.0', 'started\n'),
    check: noMarkerLeft,
  },
  {
    // As in the reference (subprocess.run(capture_output=True, timeout=...)): the call lasts until
    // the output pipes close, so a background child that keeps stdout open runs into the timeout.
    name: 'a background child holding stdout open after the command ends: timeout, child killed',
    args: { command: `(exec -a ${MARKER} sleep 39) & echo bg`, timeout: 1 },
    expect: timedOut('1.0', 'bg\n'),
    check: noMarkerLeft,
  },
  {
    name: 'several MB of output truncated to 30000 chars + "\\n[truncated N chars]"',
    args: { command: 'yes 0123456789abcdef | head -n 250000' },
    expect: truncate(bashOut(0, BIG), 30000),
    check: async (_t, obs) => assert.ok(obs.endsWith(`\n[truncated ${21 + BIG.length + 9 - 30000} chars]`)),
  },
  {
    name: 'truncation counts characters (code points)',
    args: { command: "yes $'\\xf0\\x9f\\x90\\xb8' | head -n 20000" },
    expect: truncate(bashOut(0, '\u{1F438}\n'.repeat(20000)), 30000),
  },
  {
    name: 'output of exactly 30000 chars is not truncated',
    args: { command: "head -c 29970 /dev/zero | tr '\\0' x" },
    expect: bashOut(0, 'x'.repeat(29970)),
  },
  {
    name: 'output of 30001 chars loses one char (headers count)',
    args: { command: "head -c 29971 /dev/zero | tr '\\0' x" },
    expect: `Exit code: 0\nSTDOUT:\n${'x'.repeat(29971)}\nSTDERR:`.slice(0, 30000) + '\n[truncated 1 chars]',
  },
  {
    name: 'timed-out output is truncated the same way',
    args: { command: "head -c 40000 /dev/zero | tr '\\0' x; sleep 5", timeout: 0.5 },
    expect: truncate(timedOut('0.5', 'x'.repeat(40000)), 30000),
  },
  { name: 'empty command', args: { command: '' }, expect: 'ValueError: command is required' },
  { name: 'missing command', args: { description: 'x' }, expect: 'ValueError: command is required' },
];

// ---------------------------------------------------------------------------------------------
// Unknown tools and malformed arguments
// ---------------------------------------------------------------------------------------------
const protocolCases: Case[] = [
  { name: 'lowercase read is unknown', tool: 'read', args: { file_path: 'a.txt' }, expect: 'Unknown tool: read' },
  { name: 'lowercase bash is unknown', tool: 'bash', args: { command: 'echo x' }, expect: 'Unknown tool: bash' },
  { name: 'Grep is unknown', tool: 'Grep', args: { pattern: 'x' }, expect: 'Unknown tool: Grep' },
  { name: 'name with a trailing space is unknown', tool: 'Read ', args: {}, expect: 'Unknown tool: Read ' },
  { name: 'unknown tool with invalid JSON arguments', tool: 'submit', args: '{not json', expect: 'Unknown tool: submit' },
  { name: 'Read: invalid JSON', tool: 'Read', files: { 'a.txt': 'A' }, args: '{"file_path": "a.txt"', expect: 'ValueError: file_path is required' },
  { name: 'Read: JSON array', tool: 'Read', files: { 'a.txt': 'A' }, args: '["a.txt"]', expect: 'ValueError: file_path is required' },
  { name: 'Read: JSON string', tool: 'Read', files: { 'a.txt': 'A' }, args: '"a.txt"', expect: 'ValueError: file_path is required' },
  { name: 'Read: JSON null', tool: 'Read', args: 'null', expect: 'ValueError: file_path is required' },
  { name: 'Read: JSON number', tool: 'Read', args: '42', expect: 'ValueError: file_path is required' },
  { name: 'Read: empty arguments string', tool: 'Read', args: '', expect: 'ValueError: file_path is required' },
  { name: 'Read: JSON object with surrounding whitespace is valid', tool: 'Read', files: { 'a.txt': 'A' }, args: ' \n{"file_path": "a.txt"}\n ', expect: 'a.txt\n1. A' },
  { name: 'Write: JSON array', tool: 'Write', args: '[]', expect: 'ValueError: file_path is required' },
  { name: 'Edit: invalid JSON', tool: 'Edit', args: "{'file_path': 'a.txt'}", expect: 'ValueError: file_path is required' },
  { name: 'Glob: JSON array', tool: 'Glob', files: TREE, args: '["*.py"]', expect: 'ValueError: pattern is required' },
  { name: 'Bash: invalid JSON', tool: 'Bash', args: 'echo hi', expect: 'ValueError: command is required' },
  { name: 'Bash: JSON array', tool: 'Bash', args: '[{"command": "echo hi"}]', expect: 'ValueError: command is required' },
];

describe('tool conformance (docs/leaf-interface.md)', () => {
  before(async () => {
    tb = await openToolbox();
  });
  after(async () => {
    await tb?.sh(`rm -rf ${OUTSIDE} /tmp/lp-conf-w /tmp/lp-conf-link /tmp/lp-conf-g`).catch(() => undefined);
    await tb?.close();
  });

  table('Read', readCases);
  table('Write', writeCases);
  table('Edit', editCases);
  table('Glob', globCases);
  table('Bash', bashCases);
  table('protocol', protocolCases);
});
