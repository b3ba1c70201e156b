// Two of the toolbox's tools take a quicker route than the obvious one (src/sandbox/toolbox.py):
// Write and Edit write a file over its old bytes and cut it to length instead of truncating it first,
// and Glob resolves each directory once instead of every match's whole path. This runs both
// routes side by side in the sandbox image, on trees and files built to tell them apart (symlinked
// directories, links out of the repository, dangling links, a directory loop, a size limit that
// stops a write part way), and requires the same observations and the same bytes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { openToolbox, type Toolbox } from '../support/sandbox-harness.ts';

const TOOLBOX = readFileSync(new URL('../../src/sandbox/toolbox.py', import.meta.url), 'utf8');

// Loads the toolbox's functions, then prints the result of each case twice: the toolbox's own
// route, and the plain one (open(path, "wb"); realpath() of every match).
const COMPARE = String.raw`
import base64, json, os, resource, sys
src = base64.b64decode(sys.argv[1]).decode()
g = {"__name__": "toolbox"}
exec(compile(src, "toolbox", "exec"), g)
fast_write = g["write_file"]

def plain_write(path, data):
    with open(path, "wb") as fh:
        fh.write(data)

def plain_glob_files(matches, root):
    return [g["display_path"](m, m, root) for m in matches if os.path.isfile(m)]

fast_glob_files = g["file_display_paths"]

def run(kind, setup, tool, args, fsize=None):
    out = {}
    for route in ("fast", "plain"):
        os.system("rm -rf /testbed/* /testbed/.[!.]* /tmp/outside; mkdir -p /tmp/outside; cd /testbed && " + setup)
        g["write_file"] = fast_write if route == "fast" else plain_write
        g["file_display_paths"] = fast_glob_files if route == "fast" else plain_glob_files
        old = resource.getrlimit(resource.RLIMIT_FSIZE)
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, old[1]))
        try:
            text, _ = g["run_tool"](tool, json.dumps(args), None)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, old)
        files = {}
        for dirpath, dirnames, filenames in os.walk("/testbed"):
            for f in filenames:
                p = os.path.join(dirpath, f)
                if os.path.isfile(p) and not os.path.islink(p):
                    os.chmod(p, os.stat(p).st_mode | 0o400)
                    files[p] = base64.b64encode(open(p, "rb").read()).decode()
        out[route] = {"observation": text, "files": files}
    print(json.dumps({"kind": kind, **out}))

cases = json.loads(base64.b64decode(sys.argv[2]))
for c in cases:
    run(c["kind"], c["setup"], c["tool"], c["args"], c.get("fsize"))
`;

interface Case {
  kind: string;
  setup: string;
  tool: 'Write' | 'Edit' | 'Glob';
  args: Record<string, unknown>;
  fsize?: number;
}

const TREE =
  'mkdir -p src/deep real/inner && echo a > a.py && echo b > src/b.py && echo c > src/deep/c.py && echo r > real/inner/r.py && ' +
  'ln -s real linkdir && ln -s ../real/inner src/inner-link && ln -s src/b.py b-link.py && ln -s missing.py dangling.py && ' +
  'ln -s /tmp/outside out && echo o > /tmp/outside/o.py && ln -s . loop && mkdir "sp ace" && echo s > "sp ace/s é.py" && ' +
  'ln -s b.py src/b-link2.py && mkfifo src/pipe.py';

const CASES: Case[] = [
  { kind: 'Write a new file', setup: 'true', tool: 'Write', args: { file_path: 'new/dir/f.py', content: 'x = 1\n' } },
  { kind: 'Write over a longer file', setup: 'printf "%0100d" 0 > f.py', tool: 'Write', args: { file_path: 'f.py', content: 'short\n' } },
  { kind: 'Write over a shorter file', setup: 'echo hi > f.py', tool: 'Write', args: { file_path: 'f.py', content: 'a much longer text than before\n' } },
  { kind: 'Write keeps CRLF', setup: 'printf "a\\r\\nb\\r\\n" > f.py', tool: 'Write', args: { file_path: 'f.py', content: 'x\ny\n' } },
  { kind: 'Write through a symlink', setup: 'echo old > t.py && ln -s t.py l.py', tool: 'Write', args: { file_path: 'l.py', content: 'new\n' } },
  { kind: 'Write to a write-only file', setup: 'echo old > w.py && chmod 200 w.py', tool: 'Write', args: { file_path: 'w.py', content: 'new\n' } },
  { kind: 'Write to a read-only file', setup: 'echo old > r.py && chmod 444 r.py', tool: 'Write', args: { file_path: 'r.py', content: 'new\n' } },
  { kind: 'Write to a directory', setup: 'mkdir d', tool: 'Write', args: { file_path: 'd', content: 'x' } },
  { kind: 'Write past the file size limit', setup: 'printf "%05000d" 0 > big.py', tool: 'Write', args: { file_path: 'big.py', content: 'y'.repeat(3000) }, fsize: 2048 },
  { kind: 'Edit to a shorter file', setup: 'printf "alpha = 1\\nbeta = 2\\n" > s.py', tool: 'Edit', args: { file_path: 's.py', old_string: 'alpha = 1\n', new_string: '' } },
  { kind: 'Edit to a longer file', setup: 'printf "alpha = 1\\n" > s.py', tool: 'Edit', args: { file_path: 's.py', old_string: '1', new_string: '1 + 2 + 3' } },
  { kind: 'Edit every match', setup: 'printf "a a a\\n" > s.py', tool: 'Edit', args: { file_path: 's.py', old_string: 'a', new_string: 'bb', replace_all: true } },
  { kind: 'Edit past the file size limit', setup: 'printf "x%.0s" $(seq 1500) > s.py', tool: 'Edit', args: { file_path: 's.py', old_string: 'x', new_string: 'yy', replace_all: true }, fsize: 2048 },
  ...[
    '**/*.py', '**', '*', 'src/*', '**/*', 'linkdir/**/*.py', 'src/*/*.py', 'loop/*.py', 'loop/loop/src/*.py', 'out/*', '../testbed/src/*.py',
    '/testbed/linkdir/inner/*', '/tmp/outside/*', '*.py', '**/*é.py', 'src/', '*/', '**/', 'src/..', 'src//*.py', 'src/b.py', '/testbed/*',
  ].map(
    (pattern): Case => ({ kind: `Glob ${pattern}`, setup: TREE, tool: 'Glob', args: { pattern } }),
  ),
  { kind: 'Glob with a symlinked path', setup: TREE, tool: 'Glob', args: { pattern: '**/*.py', path: 'linkdir' } },
  { kind: 'Glob with a path outside', setup: TREE, tool: 'Glob', args: { pattern: '*', path: 'out' } },
];

let tb: Toolbox;
before(async () => {
  tb = await openToolbox();
});
after(async () => {
  await tb?.close();
});

test('the quicker routes of Write, Edit and Glob give the same observations and bytes as the plain ones', async () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const res = await tb.sandbox.exec(['python3', '-c', COMPARE, b64(TOOLBOX), b64(JSON.stringify(CASES))], { cwd: '/testbed' });
  assert.equal(res.exitCode, 0, res.stderr.toString());
  const results = res.stdout.toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as { kind: string; fast: unknown; plain: unknown });
  assert.equal(results.length, CASES.length);
  for (const r of results) assert.deepEqual(r.fast, r.plain, r.kind);
  // The cases reach what they are about.
  const byKind = new Map(results.map((r) => [r.kind, r.fast as { observation: string }]));
  assert.match(byKind.get('Write past the file size limit')!.observation, /^OSError: \[Errno 27\] File too large/);
  assert.match(byKind.get('Write to a read-only file')!.observation, /^PermissionError/);
  assert.match(byKind.get('Glob linkdir/**/*.py')!.observation, /^real\/inner\/r\.py$/m);
  assert.match(byKind.get('Glob /tmp/outside/*')!.observation, /^\/tmp\/outside\/o\.py$/);
});
