import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type Docker from 'dockerode';
import { renderMetrics } from '../../src/observability/metrics.ts';
import { type EnvClaim } from '../../src/sandbox/env-cache/index.ts';
import { clearKeptWorktree } from '../../src/workspace/kept-worktree.ts';
import { LABEL_ENV_KEY, LABEL_ENV_OWNER } from '../../src/sandbox/env-cache/image.ts';
import { LABEL_MANAGED, LABEL_RUN, LABEL_WORKER } from '../../src/sandbox/sandbox.ts';
import { commitSetupState } from '../../src/workspace/patch.ts';
import { LABEL_INSTALLATION, LABEL_JOB } from '../../src/cli/worker-labels.ts';
import { buildImage, createTestNetwork, removeTestNetwork } from '../support/egress-harness.ts';
import { commitAll, keyFor, newCache, removeOwnerImages, setupAndKeep, sh, startSandbox, testOwner, uniq } from '../support/env-cache-harness.ts';
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
const repo = (files: Record<string, string>) => {
  const d = makeRepo(files);
  dirs.push(d);
  return d;
};
const hitOf = (c: EnvClaim | null) => {
  assert.ok(c && c.hit, 'expected a hit');
  return c.hit;
};
const builderOf = (c: EnvClaim | null) => {
  assert.ok(c && !c.hit, 'expected a miss');
  return c.builder;
};

before(async () => {
  docker = await testDocker();
  baseImageId = (await docker.getImage(TEST_IMAGE).inspect()).Id;
});

after(async () => {
  for (const o of owners) await removeOwnerImages(docker, o);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const NODE_REPO = {
  'package.json': '{"name":"demo","version":"1.0.0"}\n',
  'package-lock.json': '{"lockfileVersion":3,"packages":{}}\n',
  '.gitignore': 'node_modules/\n',
  'src/index.js': 'module.exports = "old";\n',
  'src/old.js': 'module.exports = "removed in the next commit";\n',
};
// Counts its runs, writes outside the worktree ($HOME) and inside it, ignored (node_modules) and not (generated.txt).
const SETUP = ['echo run >> "$HOME/setup-count"', 'echo kept > "$HOME/marker"', 'mkdir -p node_modules/dep && echo dep > node_modules/dep/index.js', 'echo made-by-setup > generated.txt'];

describe('kept environments (real Docker)', () => {
  test('miss, then hit: the next commit starts from the kept environment with its own sources, and setup does not run again', async () => {
    const { cache } = newCache(docker, owner('hit'));
    const dir = repo(NODE_REPO);
    const key = await keyFor(dir, SETUP, 'github:1001', baseImageId);
    const first = await setupAndKeep(docker, { builder: builderOf(await cache.claim(key, 'github:1001')), repoDir: dir, setup: SETUP, baseImageId });
    await first.sandbox.destroy();
    assert.ok(first.outcome?.kept, `kept: ${JSON.stringify(first.outcome)}`);

    const head = commitAll(dir, { 'src/index.js': 'module.exports = "new";\n', 'src/old.js': null, 'src/added.js': 'module.exports = 1;\n' }, 'next');
    assert.equal(await keyFor(dir, SETUP, 'github:1001', baseImageId), key, 'a source change keeps the key');
    const hit = hitOf(await cache.claim(key, 'github:1001'));
    assert.equal(hit.image, first.outcome.kept.image);
    assert.ok(hit.ageSeconds >= 0 && hit.ageSeconds < 120);
    assert.ok(hit.setupSeconds !== null && hit.setupSeconds > 0);

    const sb = await startSandbox(docker, hit.image);
    try {
      const removed = await clearKeptWorktree(sb);
      assert.ok(removed >= 5, `removed ${removed}`);
      await sb.copyInFromInside(dir);
      assert.equal(await sh(sb, 'cat "$HOME/marker"'), 'kept\n');
      assert.equal(await sh(sb, 'cat node_modules/dep/index.js'), 'dep\n');
      assert.equal(await sh(sb, 'wc -l < "$HOME/setup-count"'), '1\n', 'setup ran once, on the miss');
      assert.equal(await sh(sb, 'cat src/index.js'), 'module.exports = "new";\n');
      assert.equal(await sh(sb, 'test ! -e src/old.js && cat src/added.js'), 'module.exports = 1;\n');
      assert.equal((await sh(sb, 'git rev-parse HEAD')).trim(), head);
      assert.equal(await sh(sb, 'git status --porcelain --untracked-files=no'), '', 'tracked files are the new commit\'s');
      const state = await commitSetupState(sb, head);
      assert.deepEqual(state.created, ['generated.txt'], 'what setup left untracked is recorded as setup\'s, as after a fresh setup');
    } finally {
      await sb.destroy();
    }
  });

  test('a lockfile change makes a new key (a miss); two repositories with identical files never share one', async () => {
    const { cache } = newCache(docker, owner('keys'));
    const a = repo(NODE_REPO);
    const b = repo(NODE_REPO);
    const keyA = await keyFor(a, SETUP, 'github:2001', baseImageId);
    const kept = await setupAndKeep(docker, { builder: builderOf(await cache.claim(keyA, 'github:2001')), repoDir: a, setup: SETUP, baseImageId });
    await kept.sandbox.destroy();
    assert.ok(kept.outcome?.kept);

    const keyB = await keyFor(b, SETUP, 'github:2002', baseImageId);
    assert.notEqual(keyB, keyA);
    builderOf(await cache.claim(keyB, 'github:2002')).release();
    assert.equal(await cache.lookup(keyA, 'github:2002'), null, 'the repository is checked on lookup, not only hashed into the key');

    commitAll(a, { 'package-lock.json': '{"lockfileVersion":3,"packages":{"node_modules/left-pad":{"version":"1.3.0"}}}\n' }, 'bump');
    const keyA2 = await keyFor(a, SETUP, 'github:2001', baseImageId);
    assert.notEqual(keyA2, keyA);
    builderOf(await cache.claim(keyA2, 'github:2001')).release();
    assert.notEqual(await keyFor(a, [...SETUP, 'true'], 'github:2001', baseImageId), keyA2, 'another setup command, another key');
  });

  test('a failing setup is never kept, and attempts waiting on it run their own setup at once', async () => {
    const { cache } = newCache(docker, owner('fail'));
    const dir = repo(NODE_REPO);
    const setup = ['echo run >> "$HOME/setup-count"', 'exit 3'];
    const key = await keyFor(dir, setup, 'github:3001', baseImageId);
    const claim = await cache.claim(key, 'github:3001');
    const waiting = cache.claim(key, 'github:3001');
    const res = await setupAndKeep(docker, { builder: builderOf(claim), repoDir: dir, setup, baseImageId });
    await res.sandbox.destroy();
    assert.equal(res.outcome, null);
    builderOf(await waiting).release();
    assert.equal(await cache.lookup(key, 'github:3001'), null);
    await assert.rejects(docker.getImage(cache.ref(key)).inspect(), (err: { statusCode?: number }) => err.statusCode === 404);
  });

  test('attempts of one job share one setup: the first runs it, the others start from what it kept', async () => {
    const { cache } = newCache(docker, owner('bestofk'));
    const dir = repo(NODE_REPO);
    const key = await keyFor(dir, SETUP, 'github:4001', baseImageId);
    const claims = [cache.claim(key, 'github:4001'), cache.claim(key, 'github:4001'), cache.claim(key, 'github:4001')];
    const first = await claims[0]!;
    const built = await setupAndKeep(docker, { builder: builderOf(first), repoDir: dir, setup: SETUP, baseImageId });
    await built.sandbox.destroy();
    assert.ok(built.outcome?.kept);
    for (const c of claims.slice(1)) assert.equal(hitOf(await c).image, built.outcome.kept.image);
  });

  test('the kept image has the base image\'s configuration: its non-root user and workdir, no proxy or CA variables, none of the run\'s labels', async () => {
    const o = owner('hardened');
    const { cache } = newCache(docker, o);
    const dir = repo(NODE_REPO);
    const key = await keyFor(dir, SETUP, 'github:5001', baseImageId);
    const setupEnv = {
      HTTP_PROXY: 'http://lilypad-egress:3128',
      HTTPS_PROXY: 'http://lilypad-egress:3128',
      http_proxy: 'http://lilypad-egress:3128',
      NO_PROXY: 'localhost',
      NODE_EXTRA_CA_CERTS: '/tmp/lilypad-ca.pem',
      SSL_CERT_FILE: '/tmp/lilypad-ca.pem',
      REQUESTS_CA_BUNDLE: '/tmp/lilypad-ca.pem',
      GIT_SSL_CAINFO: '/tmp/lilypad-ca.pem',
    };
    const runLabels = { [LABEL_JOB]: 'job-that-kept-it', [LABEL_INSTALLATION]: 'inst-0000000000000000' };
    const res = await setupAndKeep(docker, { builder: builderOf(await cache.claim(key, 'github:5001')), repoDir: dir, setup: [...SETUP, 'env > "$HOME/setup-env"'], baseImageId, env: setupEnv, labels: runLabels });
    await res.sandbox.destroy();
    assert.ok(res.outcome?.kept);
    const base = await docker.getImage(TEST_IMAGE).inspect();
    const kept = await docker.getImage(res.outcome.kept.image).inspect();
    const { Labels: keptLabels, ...keptConfig } = kept.Config;
    const { Labels: baseLabels, ...baseConfig } = base.Config;
    assert.deepEqual(keptConfig, baseConfig, 'USER, WORKDIR, ENV, entrypoint and command are the base image\'s');
    assert.notEqual(kept.Config.User, '0:0');
    assert.equal(kept.Config.WorkingDir, '/testbed');
    assert.ok(!kept.Config.Env.some((e) => /proxy|CA_CERTS|CERT_FILE|CA_BUNDLE|CAINFO/i.test(e)), kept.Config.Env.join(' '));
    for (const l of [LABEL_RUN, LABEL_WORKER, LABEL_MANAGED, LABEL_JOB, LABEL_INSTALLATION]) assert.equal(keptLabels[l], undefined, `${l} is not on the kept image`);
    for (const [l, v] of Object.entries(baseLabels ?? {})) assert.equal(keptLabels[l], v);
    assert.equal(keptLabels[LABEL_ENV_OWNER], o);
    assert.equal(keptLabels[LABEL_ENV_KEY], key);

    const sb = await startSandbox(docker, res.outcome.kept.image);
    try {
      const info = await docker.getContainer(sb.id).inspect();
      assert.equal(info.Config.Labels[LABEL_JOB], undefined, 'a container from the kept image does not look like the job that kept it');
      assert.deepEqual(info.HostConfig.CapDrop, ['ALL']);
      assert.deepEqual(info.HostConfig.SecurityOpt, ['no-new-privileges']);
      assert.equal((await sh(sb, 'id -u')).trim(), '1000');
      assert.match(await sh(sb, 'cat "$HOME/setup-env"'), /HTTP_PROXY=/, 'setup did run with the proxy variables');
      assert.doesNotMatch(await sh(sb, 'env'), /proxy|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|REQUESTS_CA_BUNDLE|GIT_SSL_CAINFO/i);
    } finally {
      await sb.destroy();
    }
  });

  test('a sandbox still on a network is never kept', async () => {
    const { cache } = newCache(docker, owner('network'));
    const dir = repo(NODE_REPO);
    const key = await keyFor(dir, SETUP, 'github:6001', baseImageId);
    const net = uniq('lilypad-envcache-net');
    await createTestNetwork(docker, net, { [LABEL_RUN]: net }, true);
    const builder = builderOf(await cache.claim(key, 'github:6001'));
    const sb = await startSandbox(docker, TEST_IMAGE, {}, net);
    try {
      const outcome = await builder.keep(sb.container, { baseImageId });
      assert.equal(outcome.kept, null);
      assert.match(outcome.kept === null ? outcome.note : '', /still on a network/);
      assert.equal(await cache.lookup(key, 'github:6001'), null);
    } finally {
      builder.release();
      await sb.destroy();
      await removeTestNetwork(docker, net);
    }
  });

  test('eviction keeps the most recently used within the size and removes only this owner\'s images', async () => {
    const mine = owner('evict');
    const theirs = owner('evict-other');
    const small = newCache(docker, mine, 2_500_000).cache;
    const other = newCache(docker, theirs, 1e9).cache;
    const blob = ['head -c 1000000 /dev/urandom > "$HOME/blob"'];
    const keep = async (cache: typeof small, repoId: string) => {
      const dir = repo({ ...NODE_REPO, 'package.json': `{"name":"${repoId}"}\n` });
      const key = await keyFor(dir, blob, repoId, baseImageId);
      const res = await setupAndKeep(docker, { builder: builderOf(await cache.claim(key, repoId)), repoDir: dir, setup: blob, baseImageId });
      await res.sandbox.destroy();
      assert.ok(res.outcome?.kept, JSON.stringify(res.outcome));
      assert.ok(res.outcome.kept.bytes >= 1_000_000 && res.outcome.kept.bytes < 1_200_000, `own layer ${res.outcome.kept.bytes} bytes`);
      return key;
    };
    const theirsKey = await keep(other, 'github:7000');
    const k1 = await keep(small, 'github:7001');
    const k2 = await keep(small, 'github:7002');
    hitOf(await small.claim(k1, 'github:7001')); // k1 is now used more recently than k2
    const k3 = await keep(small, 'github:7003'); // 3 MB > 2.5 MB: the least recently used (k2) goes
    assert.ok(await small.lookup(k1, 'github:7001'), 'recently used: kept');
    assert.ok(await small.lookup(k3, 'github:7003'), 'newest: kept');
    assert.equal(await small.lookup(k2, 'github:7002'), null, 'least recently used: evicted');
    assert.ok(await other.lookup(theirsKey, 'github:7000'), 'another owner\'s older image is never evicted');
    await docker.getImage(TEST_IMAGE).inspect();
    const { body } = await renderMetrics();
    assert.match(body, /^lilypad_env_cache_total\{result="evicted"\} [1-9]/m);
    assert.match(body, /^lilypad_env_cache_total\{result="stored"\} [1-9]/m);
    assert.match(body, /^lilypad_env_cache_total\{result="hit"\} [1-9]/m);
  });

  test('an environment a sandbox still runs from is never removed; one made from a sandbox image that is gone is removed whatever the size', async () => {
    const o = owner('inuse');
    const big = newCache(docker, o, 1e9).cache;
    const tiny = newCache(docker, o, 1).cache;
    const dir = repo(NODE_REPO);
    const key = await keyFor(dir, SETUP, 'github:8001', baseImageId);
    const res = await setupAndKeep(docker, { builder: builderOf(await big.claim(key, 'github:8001')), repoDir: dir, setup: SETUP, baseImageId });
    await res.sandbox.destroy();
    assert.ok(res.outcome?.kept);
    const user = await startSandbox(docker, res.outcome.kept.image);
    try {
      assert.deepEqual((await tiny.evict()).removed, [], 'in use: the engine refuses, and nothing is forced');
      assert.ok(await big.lookup(key, 'github:8001'));
    } finally {
      await user.destroy();
    }
    assert.equal((await tiny.evict()).removed.length, 1, 'unused and over the size: removed');

    const rebuilt = uniq('lilypad-envcache-base').toLowerCase();
    buildImage(`${rebuilt}:1`, `FROM ${TEST_IMAGE}\nLABEL dev.lilypad.test=${rebuilt}\n`);
    const otherBaseId = (await docker.getImage(`${rebuilt}:1`).inspect()).Id;
    const onOld = await keyFor(dir, SETUP, 'github:8001', otherBaseId);
    const built = await setupAndKeep(docker, { builder: builderOf(await big.claim(onOld, 'github:8001')), repoDir: dir, setup: SETUP, baseImageId: otherBaseId, image: `${rebuilt}:1` });
    await built.sandbox.destroy();
    assert.ok(built.outcome?.kept);
    await docker.getImage(`${rebuilt}:1`).remove();
    const pass = await big.evict();
    assert.deepEqual(pass.removed.map((r) => r.key), [onOld]);
    await assert.rejects(docker.getImage(otherBaseId).inspect(), (err: { statusCode?: number }) => err.statusCode === 404);
  });

  test('LILYPAD_ENV_CACHE_GB=0: nothing is looked up or kept', async () => {
    const { cache } = newCache(docker, owner('off'), 0);
    assert.equal(cache.enabled, false);
    assert.equal(await cache.claim('0'.repeat(64), 'github:1'), null);
  });
});
