// `lilypad env list` and `lilypad env purge` against the real engine: the kept environments of
// this machine's installations (LILYPAD_DATA_DIR/installations.json) and of local runs, listed by
// repository with age, size and last use; purged by repository or all at once, each removal said
// in a line; a purge that names nothing, or both, is a usage error that removes nothing.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type Docker from 'dockerode';
import { EnvCache, type EnvClaim } from '../../src/sandbox/env-cache/index.ts';
import { keyFor, removeOwnerImages, setupAndKeep } from '../support/env-cache-harness.ts';
import { makeRepo } from '../support/fixture-repo.ts';
import { TEST_IMAGE, testDocker } from '../support/sandbox-harness.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const CWD = mkdtempSync(path.join(os.tmpdir(), 'lilypad-env-cli-'));
const DATA = path.join(CWD, 'data');
const OWNER = `inst-${randomBytes(8).toString('hex')}`;

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

function lilypad(args: string[]): Promise<Outcome> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), ...args], {
    cwd: CWD,
    env: { PATH: process.env['PATH'] ?? '', HOME: CWD, LILYPAD_DATA_DIR: DATA, ...(process.env['DOCKER_HOST'] ? { DOCKER_HOST: process.env['DOCKER_HOST'] } : {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

let docker: Docker;
let baseImageId: string;
const dirs: string[] = [];
const keys: Record<string, string> = {};

async function keep(cache: EnvCache, repoId: string, name: string): Promise<void> {
  const dir = makeRepo({ 'requirements.txt': `# ${name}\n` });
  dirs.push(dir);
  const setup = ['head -c 300000 /dev/urandom > "$HOME/blob"'];
  const key = await keyFor(dir, setup, repoId, baseImageId);
  const claim: EnvClaim | null = await cache.forRepo({ account: 'github-installation:5', name }).claim(key, repoId);
  assert.ok(claim && !claim.hit);
  const kept = await setupAndKeep(docker, { builder: claim.builder, repoDir: dir, setup, baseImageId });
  await kept.sandbox.destroy();
  assert.ok(kept.outcome?.kept, JSON.stringify(kept.outcome));
  keys[name] = key;
}

describe('lilypad env (real Docker)', () => {
  before(async () => {
    docker = await testDocker();
    baseImageId = (await docker.getImage(TEST_IMAGE).inspect()).Id;
    mkdirSync(DATA, { recursive: true });
    writeFileSync(path.join(DATA, 'installations.json'), `${JSON.stringify({ 'redis://127.0.0.1:6379/0 lilypad-env-cli-test': OWNER })}\n`);
    const cache = new EnvCache({ docker, owner: OWNER, dataDir: DATA, maxBytes: 1e9 });
    await keep(cache, 'github:4101', 'org-a/one');
    await keep(cache, 'github:4102', 'org-a/two');
    await keep(cache, 'github:4103', 'org-b/three');
  });
  after(async () => {
    await removeOwnerImages(docker, OWNER);
    for (const d of [...dirs, CWD]) rmSync(d, { recursive: true, force: true });
  });

  test('list: every kept environment with its repository, age, size and last use', async () => {
    const r = await lilypad(['env', 'list']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /REPOSITORY\s+AGE\s+SIZE\s+LAST USE/);
    for (const name of ['org-a/one', 'org-a/two', 'org-b/three']) {
      assert.match(r.stdout, new RegExp(`${name}\\s+\\d+ s\\s+[\\d.]+ (kB|MB)\\s+\\d+ s ago`), r.stdout);
    }
    const json = await lilypad(['env', 'list', '--json']);
    const rows = JSON.parse(json.stdout) as Array<{ repository: string; key: string; bytes: number; account: string }>;
    assert.equal(rows.filter((x) => x.repository.startsWith('org-')).length, 3, json.stdout);
    assert.ok(rows.every((x) => x.bytes > 0 && x.account === 'github-installation:5'));
  });

  test('purge names what to remove: nothing, both, or a malformed repository is a usage error that removes nothing', async () => {
    for (const args of [['env', 'purge'], ['env', 'purge', '--all', '--repo', 'org-a/one'], ['env', 'purge', '--repo', 'not a repo']]) {
      const r = await lilypad(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /^lilypad env( purge)?: .*(--repo|--all)/, r.stderr);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    }
    const still = await lilypad(['env', 'list', '--json']);
    assert.equal((JSON.parse(still.stdout) as unknown[]).length >= 3, true);
  });

  test('purge --repo removes only that repository\'s environments, saying so; --all the rest', async () => {
    const r = await lilypad(['env', 'purge', '--repo', 'ORG-A/one']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /removed the kept environment of org-a\/one/);
    assert.equal(r.stdout.trim().split('\n').filter((l) => /removed/.test(l)).length, 1, r.stdout);
    await assert.rejects(docker.getImage(`lilypad-env-${OWNER}:${keys['org-a/one']}`).inspect());
    await docker.getImage(`lilypad-env-${OWNER}:${keys['org-a/two']}`).inspect();

    const none = await lilypad(['env', 'purge', '--repo', 'org-c/absent']);
    assert.equal(none.code, 0);
    assert.match(none.stdout, /no kept environment of org-c\/absent/);

    const all = await lilypad(['env', 'purge', '--all']);
    assert.equal(all.code, 0, all.stderr);
    assert.match(all.stdout, /removed the kept environment of org-a\/two/);
    assert.match(all.stdout, /removed the kept environment of org-b\/three/);
    const left = await docker.listImages({ filters: { label: [`dev.lilypad.env.owner=${OWNER}`] } });
    assert.equal(left.length, 0);
  });
});
