import { test } from 'node:test';
import assert from 'node:assert/strict';
import { partitionPaths } from '../../src/workspace/path-filter.ts';
import { GlobError } from '../../src/config/globs.ts';
import { imageAllowed } from '../../src/config/image-policy.ts';
import { parseTestCounts } from '../../src/pipeline/test-command.ts';
import { classifyFailure, UserError } from '../../src/pipeline/failures.ts';
import { SandboxError, SandboxImageError } from '../../src/sandbox/errors.ts';
import { CancelledError } from '../../src/shared/cancel.ts';
import { ModelError } from '../../src/agent/model-client.ts';

test('exclude_paths: braces and classes work; ** spans directories; a directory covers what is below it', () => {
  const dropped = (paths: string[], patterns: string[]) => partitionPaths(paths, patterns).dropped.map((d) => d.path);
  assert.deepEqual(dropped(['go.sum', 'yarn.lock', 'go.mod'], ['*.{lock,sum}']), ['go.sum', 'yarn.lock']);
  assert.deepEqual(dropped(['Docs/a.md', 'docs/x/y.md', 'doc/z.md'], ['[Dd]ocs/**']), ['Docs/a.md', 'docs/x/y.md']);
  assert.deepEqual(dropped(['docs/a/b.md', 'docsx/a.md'], ['docs/**']), ['docs/a/b.md']);
  assert.deepEqual(dropped(['docs/a.md', 'docs'], ['docs/']), ['docs/a.md'], 'a trailing / names directories only');
  assert.deepEqual(dropped(['docs/a.md', 'docs'], ['docs']), ['docs/a.md', 'docs']);
  assert.deepEqual(dropped(['docs/generated/a/b.html', 'docs/manual.md'], ['docs/generated']), ['docs/generated/a/b.html']);
  assert.deepEqual(dropped(['vendor/.keep', 'vendor/a/.b/c'], ['vendor/**']), ['vendor/.keep', 'vendor/a/.b/c'], '* and ** match dot names');
  assert.deepEqual(dropped(['a/c', 'abc'], ['a?c']), ['abc'], '? never matches /');
  assert.deepEqual(dropped(['sub/yarn.lock', 'yarn.lock'], ['**/*.lock']), ['sub/yarn.lock', 'yarn.lock']);
});

test('exclude_paths: a name-only pattern matches at any depth (gitignore-like); a pattern with / is rooted', () => {
  const dropped = (paths: string[], patterns: string[]) => partitionPaths(paths, patterns).dropped.map((d) => d.path);
  assert.deepEqual(dropped(['yarn.lock', 'web/app/yarn.lock', 'lock'], ['*.lock']), ['yarn.lock', 'web/app/yarn.lock']);
  assert.deepEqual(dropped(['node_modules/a.js', 'web/node_modules/b/c.js'], ['node_modules']), ['node_modules/a.js', 'web/node_modules/b/c.js']);
  assert.deepEqual(dropped(['yarn.lock', 'web/yarn.lock'], ['/yarn.lock']), ['yarn.lock'], 'a leading / anchors at the root');
  assert.deepEqual(dropped(['src/gen.py', 'lib/src/gen.py'], ['src/*.py']), ['src/gen.py']);
  assert.deepEqual(dropped(['src/gen.py'], ['./src/gen.py']), ['src/gen.py']);
  assert.deepEqual(dropped(['src/a/gen.py'], ['src/*.py']), [], '* stays within one directory');
});

test('nothing under .github/ is ever published (workflows, actions, CODEOWNERS, dependabot, templates); configured exclusions too', () => {
  const paths = [
    'src/a.py',
    '.github/workflows/ci.yml',
    'vendor/x.js',
    '.github/CODEOWNERS',
    '.github/dependabot.yml',
    '.github/actions/setup/action.yml',
    '.github/ISSUE_TEMPLATE/bug.md',
    '.github/pull_request_template.md',
    '.github/lilypad.yml',
    '.githubx/notes.md',
    'docs/.github/x.md',
  ];
  const { kept, dropped } = partitionPaths(paths, ['vendor/**']);
  assert.deepEqual(kept, ['src/a.py', '.githubx/notes.md', 'docs/.github/x.md']);
  assert.deepEqual(
    dropped.map((d) => d.path),
    paths.filter((p) => p.startsWith('.github/') || p.startsWith('vendor/')),
  );
  for (const d of dropped.filter((x) => x.path.startsWith('.github/'))) assert.match(d.reason, /\.github\//);
  assert.match(dropped.find((d) => d.path === '.github/workflows/ci.yml')!.reason, /workflows/);
  assert.match(dropped.find((d) => d.path === 'vendor/x.js')!.reason, /exclude_paths: vendor\/\*\*/);
  // .github/ wins even when a pattern would also have matched, so the reason is the stronger one.
  assert.match(partitionPaths(['.github/x.yml'], ['**']).dropped[0]!.reason, /\.github\//);
});

test('exclude_paths: a pathological pattern cannot freeze the worker; matching is bounded and fails loudly', { timeout: 20_000 }, () => {
  const started = Date.now();
  // Several `*` in one name backtrack: this pair takes about a minute as a plain RegExp (not forever,
  // so that an unbounded matcher fails this test instead of hanging the suite).
  assert.throws(
    () => partitionPaths(['a'.repeat(255), 'src/x.py'], ['*a*a*a*a*b']),
    (err: unknown) => err instanceof GlobError && /took longer than/.test(err.message),
  );
  assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
});

test('test counts from common runners', () => {
  assert.deepEqual(parseTestCounts('==== 1 failed, 41 passed, 2 skipped in 3.2s ===='), { passed: 41, failed: 1, skipped: 2 });
  assert.deepEqual(parseTestCounts('ℹ tests 5\nℹ pass 4\nℹ fail 1\nℹ skipped 0'), { passed: 4, failed: 1, skipped: 0 });
  assert.deepEqual(parseTestCounts('  12 passing (30ms)\n  1 failing'), { passed: 12, failed: 1 });
  assert.equal(parseTestCounts('Ran 3 tests in 0.001s\n\nOK'), null);
});

test('failures map to one verdict each: retry, tell the issue, or cancelled', () => {
  assert.equal(classifyFailure(new CancelledError()).kind, 'cancelled');
  assert.equal(classifyFailure(new UserError('bad config', 'fix it')).kind, 'final');
  assert.equal(classifyFailure(new SandboxError('the toolbox process in the sandbox exited')).kind, 'transient');
  assert.equal(classifyFailure(new SandboxImageError('the sandbox image x is not present on the Docker engine. Build')).kind, 'final');
  assert.equal(classifyFailure(new ModelError('down')).kind, 'final');
  assert.equal(classifyFailure(Object.assign(new Error('Server Error'), { status: 502 })).kind, 'transient');
  assert.equal(classifyFailure(Object.assign(new Error('Not Found'), { status: 404 })).kind, 'final');
  assert.equal(classifyFailure(Object.assign(new Error('x'), { code: 'ECONNRESET' })).kind, 'transient');
});

test('sandbox images: the default is always allowed; with no patterns it is the only one', () => {
  assert.ok(imageAllowed('lilypad-sandbox:latest', 'lilypad-sandbox:latest', ''));
  assert.ok(!imageAllowed('lilypad-sandbox:py38', 'lilypad-sandbox:latest', ''));
  assert.ok(!imageAllowed('lilypad-sandbox:py38', 'lilypad-sandbox:latest', ' , '));
});

test('sandbox images: LILYPAD_ALLOWED_IMAGES globs match image names as a user expects', () => {
  const allowed = (image: string, patterns: string) => imageAllowed(image, 'lilypad-sandbox:latest', patterns);
  assert.ok(allowed('lilypad-sandbox:py38', 'lilypad-sandbox:*, other'));
  assert.ok(allowed('other', 'lilypad-sandbox:*, other'));
  assert.ok(!allowed('evil/image:latest', 'lilypad-sandbox:*'));
  assert.ok(!allowed('evil/lilypad-sandbox:py38', 'lilypad-sandbox:*'), '* never crosses a /: another namespace is another image');
  assert.ok(!allowed('lilypad-sandbox-evil:x', 'lilypad-sandbox:*'));
  assert.ok(!allowed('lilypad-sandbox:x', 'lilypad-sandbox'));
  assert.ok(allowed('registry.example/sandboxes/python:3.12', 'registry.example/sandboxes/**'));
  assert.ok(allowed('registry.example/sandboxes/team/py:1', 'registry.example/sandboxes/**'));
  assert.ok(!allowed('registry.example/other/python:3.12', 'registry.example/sandboxes/**'));
  assert.ok(!allowed('registry.example/sandboxes-evil/x:1', 'registry.example/sandboxes/**'));
  assert.ok(!allowed('registryXexample/sandboxes/x:1', 'registry.example/sandboxes/**'), '. is literal');
  assert.ok(allowed('python:3.12', '{python,node}:*'));
  assert.ok(allowed('node:22', 'lilypad-sandbox:*, {python,node}:*'), 'a comma inside braces is part of the pattern');
  assert.ok(!allowed('node}:*', 'lilypad-sandbox:*, {python,node}:*'));
  assert.ok(allowed('py:3.1', 'py:3.[0-9]'));
  assert.ok(allowed('ubuntu:22.04', '*'));
  assert.ok(!allowed('evil/image:latest', '*'), 'a lone * allows only names without a /');
  assert.ok(allowed('evil/image:latest', '**'));
  assert.ok(allowed('a.b', 'a?b'));
  assert.ok(!allowed('a/b', 'a?b'));
  assert.ok(allowed('img@sha256:abc', 'img@sha256:*'));
});
