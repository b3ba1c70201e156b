import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRepoConfig } from '../../src/config/repo-config.ts';

test('no file means every default', () => {
  const r = parseRepoConfig(null, null);
  assert.ok(r.ok);
  assert.equal(r.config.trigger_label, 'lilypad');
  assert.deepEqual(r.config.labels, ['lilypad', 'needs-human-review']);
  assert.equal(r.config.draft, true);
  assert.equal(r.config.max_steps, 150);
  assert.deepEqual(r.config.setup, []);
  assert.equal(r.config.reviewers, undefined);
});

test('a single setup command is accepted as a list of one', () => {
  const r = parseRepoConfig({ setup: 'pip install -e .', test: 'pytest -q' }, '.github/lilypad.yml');
  assert.ok(r.ok);
  assert.deepEqual(r.config.setup, ['pip install -e .']);
  assert.equal(r.config.test, 'pytest -q');
});

test('every problem in a bad file is listed, with the setting it concerns', () => {
  const r = parseRepoConfig({ max_steps: 'lots', draft: 'yes', labels: 'bug', tset: 'pytest' }, '.github/lilypad.yml');
  assert.equal(r.ok, false);
  if (r.ok) return;
  assert.equal(r.problems.length, 4);
  assert.ok(r.problems.some((p) => p.startsWith('`max_steps`')));
  assert.ok(r.problems.some((p) => p.startsWith('`draft`')));
  assert.ok(r.problems.some((p) => p.startsWith('`labels`')));
  assert.ok(r.problems.some((p) => /unknown setting `tset`/.test(p) && /trigger_label/.test(p)));
});

test('a file that is not a mapping is refused', () => {
  const r = parseRepoConfig(['a'], 'x');
  assert.equal(r.ok, false);
});
