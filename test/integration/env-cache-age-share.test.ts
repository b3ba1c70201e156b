// Kept environments age out and share the disk by account (issue 26, L3), with the real engine:
// an environment older than LILYPAD_ENV_MAX_AGE_HOURS is not used on lookup and is removed, with a
// log line; past the size cap, environments go from the account that uses the most disk, so one
// organisation's setups cannot push out every other organisation's environments.
import { rmSync } from 'node:fs';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type Docker from 'dockerode';
import pino from 'pino';
import { EnvCache, type EnvClaim } from '../../src/sandbox/env-cache/index.ts';
import { LABEL_ENV_ACCOUNT, LABEL_ENV_OWNER, LABEL_ENV_REPO_NAME } from '../../src/sandbox/env-cache/image.ts';
import { listKept } from '../../src/sandbox/env-cache/evict.ts';
import { LastUsed } from '../../src/sandbox/env-cache/last-used.ts';
import { commitSnapshot, removeSnapshot } from '../../src/sandbox/snapshot.ts';
import { keyFor, newCache, removeOwnerImages, setupAndKeep, startSandbox, testOwner } from '../support/env-cache-harness.ts';
import { makeRepo } from '../support/fixture-repo.ts';
import { TEST_IMAGE, testDocker } from '../support/sandbox-harness.ts';

let docker: Docker;
let baseImageId: string;
const owners: string[] = [];
const dirs: string[] = [];
const owner = (p: string) => {
  const o = testOwner(p);
  owners.push(o);
  return o;
};

function capturingLogger(): { logger: pino.Logger; lines: () => Array<Record<string, unknown>> } {
  const out: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(chunk.toString());
      cb();
    },
  });
  const logger = pino({ level: 'debug' }, stream);
  return { logger, lines: () => out.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const builderOf = (c: EnvClaim | null) => {
  assert.ok(c && !c.hit, `expected a miss: ${JSON.stringify(c)}`);
  return c.builder;
};

/** Keeps one environment of `mb` megabytes for repository `repoId` through `cache`; returns its key. */
async function keepOne(cache: EnvCache, repoId: string, mb: number): Promise<string> {
  const dir = makeRepo({ 'requirements.txt': `# ${repoId}\n` });
  dirs.push(dir);
  const setup = [`head -c ${mb * 1000 * 1000} /dev/urandom > "$HOME/blob"`];
  const key = await keyFor(dir, setup, repoId, baseImageId);
  const kept = await setupAndKeep(docker, { builder: builderOf(await cache.claim(key, repoId)), repoDir: dir, setup, baseImageId });
  await kept.sandbox.destroy();
  assert.ok(kept.outcome?.kept, `kept ${repoId}: ${JSON.stringify(kept.outcome)}`);
  return key;
}

before(async () => {
  docker = await testDocker();
  baseImageId = (await docker.getImage(TEST_IMAGE).inspect()).Id;
});

after(async () => {
  for (const o of owners) await removeOwnerImages(docker, o);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('kept environments: age and size share (real Docker)', () => {
  test('an environment older than LILYPAD_ENV_MAX_AGE_HOURS is not used: the lookup removes it, says why, and logs it', async () => {
    const o = owner('age');
    const { cache, dataDir } = newCache(docker, o);
    const key = await keepOne(cache.forRepo({ account: 'github-installation:11', name: 'org-a/old' }), 'github:9101', 1);
    const ref = cache.ref(key);
    const image = await docker.getImage(ref).inspect();
    assert.equal(image.Config.Labels?.[LABEL_ENV_ACCOUNT], 'github-installation:11');
    assert.equal(image.Config.Labels?.[LABEL_ENV_REPO_NAME], 'org-a/old');
    assert.ok(await cache.lookup(key, 'github:9101'), 'young: used');

    // 0.0005 h is 1.8 s: the same environment is too old for a cache with that limit.
    await new Promise((r) => setTimeout(r, 2500));
    const { logger, lines } = capturingLogger();
    const strict = new EnvCache({ docker, owner: o, dataDir, maxBytes: 1e9, maxAgeHours: 0.0005, logger });
    const claim = await strict.claim(key, 'github:9101');
    assert.ok(claim && !claim.hit, 'an old environment is a miss');
    assert.match(claim.note ?? '', /older than LILYPAD_ENV_MAX_AGE_HOURS \(0\.0005\).*removed.*setup ran/, claim.note);
    claim.builder.release();
    await assert.rejects(docker.getImage(ref).inspect(), (err: { statusCode?: number }) => err.statusCode === 404, 'the old environment is removed');
    const line = lines().find((l) => /older than LILYPAD_ENV_MAX_AGE_HOURS/.test(String(l['msg'])));
    assert.ok(line, `a log line: ${JSON.stringify(lines())}`);
    assert.equal(line['repo'], 'org-a/old');
    assert.equal(line['key'], key);
  });

  test("one account's setups evict its own environments first: another account within its share keeps its own", async () => {
    const o = owner('share');
    // Room for about four 2 MB environments.
    const { cache } = newCache(docker, o, 9 * 1000 * 1000);
    const orgB = cache.forRepo({ account: 'github-installation:22', name: 'org-b/small' });
    const orgA = (n: number) => cache.forRepo({ account: 'github-installation:21', name: `org-a/repo-${n}` });
    const bKey = await keepOne(orgB, 'github:9201', 2);
    const aKeys: string[] = [];
    for (let n = 1; n <= 5; n++) aKeys.push(await keepOne(orgA(n), `github:920${n + 1}`, 2));

    // Least recently used alone would have removed org-b's, the oldest, first.
    assert.ok(await cache.lookup(bKey, 'github:9201'), "org-b's environment, within its share, is kept");
    assert.ok(await cache.lookup(aKeys[4]!, 'github:9206'), "org-a's newest is kept");
    assert.equal(await cache.lookup(aKeys[0]!, 'github:9202'), null, "org-a's least recently used went");
    const summary = await cache.evict();
    assert.ok(summary.keptBytes <= 9 * 1000 * 1000, `within the cap: ${summary.keptBytes}`);
  });

  test("a run's snapshot of a sandbox started from a kept environment is not a kept environment: eviction leaves it to its run", async () => {
    const o = owner('snapshot');
    const { cache, dataDir } = newCache(docker, o);
    const key = await keepOne(cache, 'github:9301', 1);
    // As a run does: the agent's sandbox starts from the kept image (and so carries its labels), and is committed before the agent's first step.
    const sandbox = await startSandbox(docker, cache.ref(key));
    let snapshot: string | null = null;
    try {
      snapshot = (await commitSnapshot(sandbox, 'run-snapshot-test')).image;
      const image = await docker.getImage(snapshot).inspect();
      assert.equal(image.Config.Labels?.[LABEL_ENV_OWNER], o, 'the snapshot carries the kept environment labels');
      // Listed, it would count in the account's share, show in `lilypad env list` and be removed as an untagged leftover once it is old.
      const listed = await listKept(docker, o, new LastUsed(dataDir, o));
      assert.deepEqual(listed.filter((e) => e.id === snapshot), [], `the snapshot is listed as a kept environment: ${JSON.stringify(listed.map((e) => [e.id, e.leftover]))}`);
      await cache.evict();
      await docker.getImage(snapshot).inspect();
      assert.ok(await cache.lookup(key, 'github:9301'), 'the kept environment itself is still there');
    } finally {
      await sandbox.destroy();
      if (snapshot) await removeSnapshot(docker, snapshot);
    }
  });
});
