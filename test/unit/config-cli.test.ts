import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { configCommand, formatEffectiveConfig } from '../../src/cli/config.ts';
import { directoryReader } from '../../src/inference/index.ts';
import { effectiveConfig as effectiveOf } from '../../src/pipeline/effective-config.ts';
const effectiveConfig = (dir: string, cli: { setup?: string[]; test?: string } = {}) => effectiveOf(directoryReader(dir), cli);

const tmp = mkdtempSync(path.join(os.tmpdir(), 'lilypad-config-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
function repo(name: string, files: Record<string, string>): string {
  const dir = path.join(tmp, name);
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    writeFileSync(path.join(dir, p), text);
  }
  return dir;
}

test('no config file: setup and test inferred, the rest defaults, each with its source', async () => {
  const dir = repo('plain', { 'package.json': '{"scripts":{"test":"node --test"}}', 'package-lock.json': '{}' });
  const eff = await effectiveConfig(dir);
  assert.equal(eff.file, null);
  assert.deepEqual([eff.config.setup, eff.config.test], [['npm ci --no-audit --no-fund'], 'npm test']);
  assert.deepEqual([eff.sources.setup, eff.sources.test, eff.sources.trigger_label, eff.sources.image], ['inferred', 'inferred', 'default', 'default']);
  const text = formatEffectiveConfig(dir, eff);
  assert.match(text, /^test\s+npm test\s+\[inferred from package\.json, runner node-test\]$/m);
  assert.match(text, /^max_steps\s+150\s+\[default\]$/m);
});

test('the file wins over inference, the command line over the file', async () => {
  const dir = repo('configured', {
    '.github/lilypad.yml': 'test: make check\nmax_steps: 40\n',
    'pyproject.toml': '[project]\nname = "x"\n',
    'tests/test_x.py': 'def test_x(): pass\n',
  });
  const eff = await effectiveConfig(dir);
  assert.deepEqual([eff.config.test, eff.sources.test, eff.config.max_steps, eff.sources.max_steps], ['make check', 'config', 40, 'config']);
  assert.equal(eff.sources.setup, 'inferred', 'the file does not set setup');
  assert.equal(eff.file, '.github/lilypad.yml');
  const cli = await effectiveConfig(dir, { test: 'pytest -x', setup: ['pip install .'] });
  assert.deepEqual([cli.config.test, cli.sources.test, cli.config.setup, cli.sources.setup], ['pytest -x', 'cli', ['pip install .'], 'cli']);
});

test('a broken config file, a missing --repo or directory: clear errors', async () => {
  const bad = repo('bad', { '.github/lilypad.yml': 'max_step: 3\n' });
  await assert.rejects(configCommand(['--repo', bad]), (err: Error) => err.name === 'UsageError' && /unknown setting `max_step`/.test(err.message));
  const notYaml = repo('notyaml', { '.github/lilypad.yml': 'a: [1, 2\n' });
  await assert.rejects(configCommand(['--repo', notYaml]), /is not valid YAML/);
  await assert.rejects(configCommand([]), /--repo <path> is required/);
  await assert.rejects(configCommand(['--repo', path.join(tmp, 'nope')]), /no such directory/);
});
