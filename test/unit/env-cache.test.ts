import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadEnv } from '../../src/config/env.ts';
import { describeEnvCache, envCacheReportSchema, envKey, hitReport, isKeyFile, keptEnvFiles, missReport, type EnvKeyInput } from '../../src/sandbox/env-cache/index.ts';
import { mentionedPaths } from '../../src/sandbox/env-cache/key-files.ts';
import { LastUsed } from '../../src/sandbox/env-cache/last-used.ts';
import { tarOf } from '../../src/sandbox/env-cache/tar.ts';

const tmp: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(path.join(os.tmpdir(), 'lilypad-envkey-'));
  tmp.push(d);
  return d;
};
after(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

const IMAGE = `sha256:${'a'.repeat(64)}`;
const base: EnvKeyInput = {
  imageId: IMAGE,
  setup: ['npm ci', 'npm run build'],
  repoId: 'github:1',
  workdir: '/testbed',
  user: undefined,
  files: [
    { path: 'package.json', bytes: Buffer.from('{"name":"x"}') },
    { path: 'package-lock.json', bytes: Buffer.from('{"lockfileVersion":3}') },
  ],
};

describe('envKey', () => {
  test('is the same for the same inputs, whatever order the files come in', () => {
    const k = envKey(base);
    assert.match(k, /^[0-9a-f]{64}$/);
    assert.equal(envKey({ ...base, files: [...base.files].reverse() }), k);
  });

  test('changes with every input: image, setup and its order, repository, workdir, user, a file\'s bytes, path or presence', () => {
    const k = envKey(base);
    const variants: EnvKeyInput[] = [
      { ...base, imageId: `sha256:${'b'.repeat(64)}` },
      { ...base, setup: ['npm run build', 'npm ci'] },
      { ...base, setup: ['npm ci'] },
      { ...base, setup: ['npm ci npm', 'run build'] },
      { ...base, repoId: 'github:2' },
      { ...base, workdir: '/work' },
      { ...base, user: '1000:1000' },
      { ...base, files: [base.files[0]!, { path: 'package-lock.json', bytes: Buffer.from('{"lockfileVersion":2}') }] },
      { ...base, files: [base.files[0]!, { path: 'npm-shrinkwrap.json', bytes: base.files[1]!.bytes }] },
      { ...base, files: [base.files[0]!] },
      { ...base, files: [...base.files, { path: 'sub/package.json', bytes: Buffer.alloc(0) }] },
    ];
    const keys = new Set([k, ...variants.map((v) => envKey(v))]);
    assert.equal(keys.size, variants.length + 1);
  });

  test('needs the image id, not a tag, and a repository', () => {
    assert.throws(() => envKey({ ...base, imageId: 'lilypad-sandbox:latest' }), /image's id \(sha256:<64 hex>/);
    assert.throws(() => envKey({ ...base, imageId: 'sha256:abc' }), /not a tag or a short id/);
    assert.throws(() => envKey({ ...base, repoId: ' ' }), /never shared between repositories/);
    assert.throws(() => envKey({ ...base, files: [base.files[0]!, base.files[0]!] }), /twice/);
  });
});

describe('keptEnvFiles', () => {
  test('takes every lockfile and manifest at any depth, byte for byte, and nothing from dependencies or .git', async () => {
    const dir = tempDir();
    const jar = Buffer.from([0x50, 0x4b, 0x03, 0x04, 0xff, 0xfe, 0x00, 0x80]);
    const files: Record<string, string | Buffer> = {
      'package.json': '{}',
      'packages/a/package.json': '{"name":"a"}',
      'node_modules/dep/package.json': '{}',
      'requirements-dev.txt': 'pytest\n',
      'requirements/test.txt': 'hypothesis\n',
      'gradle/wrapper/gradle-wrapper.jar': jar,
      'gradle/wrapper/gradle-wrapper.properties': 'distributionUrl=x\n',
      'crates/core/Cargo.toml': '[package]\n',
      '.git/config': '[core]\n',
      'README.md': '# no\n',
      'src/main.py': 'print(1)\n',
      'scripts/bootstrap.sh': 'echo hi\n',
      'tools/deps.list': 'a\n',
    };
    for (const [rel, content] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      writeFileSync(path.join(dir, rel), content);
    }
    symlinkSync('packages/a/package.json', path.join(dir, 'yarn.lock'));
    const got = await keptEnvFiles(dir, { setup: ['bash scripts/bootstrap.sh', 'pip install -r ./missing.txt'], named: ['tools/deps.list', '../outside.txt'] });
    assert.deepEqual(
      got.map((f) => f.path),
      [
        'crates/core/Cargo.toml',
        'gradle/wrapper/gradle-wrapper.jar',
        'gradle/wrapper/gradle-wrapper.properties',
        'package.json',
        'packages/a/package.json',
        'requirements-dev.txt',
        'requirements/test.txt',
        'scripts/bootstrap.sh',
        'tools/deps.list',
        'yarn.lock',
      ],
    );
    assert.deepEqual(got.find((f) => f.path === 'gradle/wrapper/gradle-wrapper.jar')!.bytes, jar, 'binary files are read exactly');
    assert.equal(got.find((f) => f.path === 'yarn.lock')!.bytes.toString(), '\0symlink\0packages/a/package.json', 'a link counts by its target, never followed');
  });

  test('file names and mentions', () => {
    for (const p of ['pyproject.toml', 'a/b/go.sum', 'constraints.txt', 'requirements.in', '.mvn/wrapper/maven-wrapper.properties', '.cargo/config.toml', 'build.gradle.kts']) assert.ok(isKeyFile(p), p);
    for (const p of ['README.md', 'src/package.jsonx', 'docs/requirements.md']) assert.ok(!isKeyFile(p), p);
    assert.deepEqual(mentionedPaths(['pip install -r ci/deps.txt --constraint=./c.txt', 'cat ../../etc/passwd $HOME/.x']), ['ci/deps.txt', 'c.txt']);
    assert.deepEqual(mentionedPaths(['make deps']), ['Makefile', 'GNUmakefile', 'makefile'], 'make reads the Makefile nobody names');
    assert.deepEqual(mentionedPaths(['constructor __proto__ toString']), []);
  });
});

test('tarOf writes an archive tar reads back', () => {
  const dir = tempDir();
  const file = path.join(dir, 'a.tar');
  writeFileSync(file, tarOf([{ name: 'config.json', data: Buffer.from('{"a":1}') }, { name: 'manifest.json', data: Buffer.alloc(600, 0x61) }]));
  assert.equal(execFileSync('tar', ['-tf', file]).toString(), 'config.json\nmanifest.json\n');
  assert.equal(execFileSync('tar', ['-xOf', file, 'config.json']).toString(), '{"a":1}');
  assert.equal(execFileSync('tar', ['-xOf', file, 'manifest.json']).length, 600);
});

test('LastUsed keeps one time per key on disk, and forgets', async () => {
  const used = new LastUsed(tempDir(), 'inst-0123456789abcdef');
  const key = 'c'.repeat(64);
  assert.equal(await used.get(key), null);
  await used.touch(key, new Date(1_700_000_000_000));
  assert.equal(await used.get(key), 1_700_000_000_000);
  await used.touch(key, new Date(1_700_000_100_000));
  assert.equal(await used.get(key), 1_700_000_100_000);
  await used.forget(key);
  assert.equal(await used.get(key), null);
  await assert.rejects(used.touch('../x'), /not an environment key/);
});

test('reports: a hit with its age and the setup it saved, a miss stored or not, and one line each', () => {
  const hit = hitReport({ image: 'sha256:x', ref: 'lilypad-env-local:k', key: 'k', ageSeconds: 7200, bytes: 1, setupSeconds: 95 });
  assert.deepEqual(envCacheReportSchema.parse(hit), { result: 'hit', key: 'k', image: 'lilypad-env-local:k', age_seconds: 7200, setup_seconds_saved: 95 });
  assert.equal(describeEnvCache(hit), 'environment kept from 2 h ago reused, setup skipped (it took 2 min)');
  const stored = missReport('k', { kept: { image: 'sha256:x', ref: 'r', key: 'k', ageSeconds: 0, bytes: 1, setupSeconds: 3 } });
  assert.equal(describeEnvCache(stored), 'setup ran; its environment is kept for the next runs');
  const failedSetup = missReport('k', { note: 'setup failed' });
  assert.deepEqual(failedSetup, { result: 'miss', key: 'k', stored: false, note: 'setup failed' });
  assert.equal(describeEnvCache({ result: 'off' }), 'environments are not kept (LILYPAD_ENV_CACHE_GB=0)');
});

test('LILYPAD_ENV_CACHE_GB: 20 by default, 0 turns it off, a negative value is refused with the fix', () => {
  assert.equal(loadEnv({}).LILYPAD_ENV_CACHE_GB, 20);
  assert.equal(loadEnv({ LILYPAD_ENV_CACHE_GB: '0' }).LILYPAD_ENV_CACHE_GB, 0);
  assert.equal(loadEnv({ LILYPAD_ENV_CACHE_GB: '0.5' }).LILYPAD_ENV_CACHE_GB, 0.5);
  assert.throws(() => loadEnv({ LILYPAD_ENV_CACHE_GB: '-1' }), /LILYPAD_ENV_CACHE_GB="-1".*0 turns keeping them off/);
});

test('a miss after an environment aged out keeps saying why setup ran, whether or not the new one was kept', () => {
  const why = 'the kept environment was 8.0 days old, older than LILYPAD_ENV_MAX_AGE_HOURS (168) allows: it was removed, and setup ran';
  const stored = missReport('k', { kept: { image: 'sha256:x', ref: 'r', key: 'k', ageSeconds: 0, bytes: 1, setupSeconds: 3 } }, why);
  assert.equal(stored.note, why);
  assert.equal(describeEnvCache(stored), `setup ran; its environment is kept for the next runs (${why})`);
  const notKept = missReport('k', { note: 'the setup command `npm ci` failed' }, why);
  assert.match(describeEnvCache(notKept), /npm ci` failed.*older than LILYPAD_ENV_MAX_AGE_HOURS/);
  assert.ok(envCacheReportSchema.safeParse(stored).success);
});
