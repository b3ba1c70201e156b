import { test } from 'node:test';
import assert from 'node:assert/strict';
import { globToRegExp, partitionPaths } from '../../src/workspace/path-filter.ts';
import { parseTestCounts } from '../../src/pipeline/test-command.ts';
import { classifyFailure, UserError } from '../../src/pipeline/failures.ts';
import { SandboxError, CancelledError } from '../../src/sandbox/errors.ts';
import { ModelError } from '../../src/agent/model-client.ts';

test('exclude globs: ** spans directories, * does not, a directory covers what is below it', () => {
  assert.ok(globToRegExp('docs/**').test('docs/a/b.md'));
  assert.ok(globToRegExp('docs/').test('docs/a.md'));
  assert.ok(globToRegExp('docs').test('docs/a.md'));
  assert.ok(globToRegExp('*.lock').test('yarn.lock'));
  assert.ok(!globToRegExp('*.lock').test('sub/yarn.lock'));
  assert.ok(globToRegExp('**/*.lock').test('sub/yarn.lock'));
  assert.ok(globToRegExp('**/*.lock').test('yarn.lock'));
  assert.ok(!globToRegExp('a?c').test('a/c'));
});

test('workflow changes are always dropped and reported; configured exclusions too', () => {
  const { kept, dropped } = partitionPaths(['src/a.py', '.github/workflows/ci.yml', 'vendor/x.js', '.github/CODEOWNERS'], ['vendor/**']);
  assert.deepEqual(kept, ['src/a.py', '.github/CODEOWNERS']);
  assert.deepEqual(
    dropped.map((d) => d.path),
    ['.github/workflows/ci.yml', 'vendor/x.js'],
  );
  assert.match(dropped[0]!.reason, /workflows/);
  assert.match(dropped[1]!.reason, /exclude_paths: vendor\/\*\*/);
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
  assert.equal(classifyFailure(new SandboxError('the sandbox image x is not present on the Docker engine. Build')).kind, 'final');
  assert.equal(classifyFailure(new ModelError('down')).kind, 'final');
  assert.equal(classifyFailure(Object.assign(new Error('Server Error'), { status: 502 })).kind, 'transient');
  assert.equal(classifyFailure(Object.assign(new Error('Not Found'), { status: 404 })).kind, 'final');
  assert.equal(classifyFailure(Object.assign(new Error('x'), { code: 'ECONNRESET' })).kind, 'transient');
});

test('sandbox images: the default is always allowed, others must match LILYPAD_ALLOWED_IMAGES', async () => {
  const { imageAllowed } = await import('../../src/pipeline/run-job.ts');
  assert.ok(imageAllowed('lilypad-sandbox:latest', 'lilypad-sandbox:latest', ''));
  assert.ok(imageAllowed('anything:1', 'd', '*'));
  assert.ok(imageAllowed('lilypad-sandbox:py38', 'd', 'lilypad-sandbox:*, other'));
  assert.ok(!imageAllowed('evil/image:latest', 'd', 'lilypad-sandbox:*'));
  assert.ok(!imageAllowed('lilypad-sandbox:x', 'd', 'lilypad-sandbox'));
  assert.ok(!imageAllowed('a.b', 'd', 'a?b'));
});
