import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';

import { markInstanceDir, startSweeps, sweepDeadInstances } from '../../src/cli/worker-sweeps.ts';
import { loadEnv } from '../../src/config/env.ts';
import { isAlive, startHeartbeat } from '../../src/store/heartbeats.ts';
import { createDockerClient } from '../../src/sandbox/sandbox.ts';
import { freePort, waitFor } from '../support/app-harness.ts';

// Real Redis on the loopback with a prefix per test. The sweep also lists containers and networks
// of the local Docker engine, filtered by that prefix and by instance names no one else uses, so it
// finds and removes nothing there.
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

const INSTALLATION = `inst-${randomBytes(8).toString('hex')}`;
let redis: Redis;
const prefixes: string[] = [];

before(() => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
});
after(async () => {
  for (const prefix of prefixes) {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
});

async function mkdirp(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  return dir;
}

function uniquePrefix(): string {
  const prefix = `lilypad-test:heartbeat:${process.pid}:${randomBytes(4).toString('hex')}`;
  prefixes.push(prefix);
  return prefix;
}

interface Warning {
  obj: Record<string, unknown>;
  msg: string;
}

function recordingLogger(): { logger: never; warnings: Warning[] } {
  const warnings: Warning[] = [];
  const logger = { warn: (obj: Record<string, unknown>, msg: string) => void warnings.push({ obj, msg }) };
  return { logger: logger as never, warnings };
}

describe('heartbeat', () => {
  test('a started heartbeat makes the instance alive with an expiry; stop() ends it at once', async () => {
    const prefix = uniquePrefix();
    const { logger, warnings } = recordingLogger();
    const hb = startHeartbeat(redis, prefix, 'worker-a', logger);
    await waitFor(() => isAlive(redis, prefix, 'worker-a'), 'the first beat', 5000);
    const ttl = await redis.pttl(`${prefix}:heartbeat:worker-a`);
    assert.ok(ttl > 0 && ttl <= 45_000, `expiry ${ttl} ms`);
    assert.equal(await isAlive(redis, prefix, 'worker-b'), false);
    await hb.stop();
    assert.equal(await isAlive(redis, prefix, 'worker-a'), false);
    assert.deepEqual(warnings, []);
  });

  test('LILYPAD_HEARTBEAT_SECONDS: beats that often, expires three beats after the last (15 s and 45 s unless set)', async () => {
    assert.equal(loadEnv({}).LILYPAD_HEARTBEAT_SECONDS, 15);
    assert.throws(() => loadEnv({ LILYPAD_HEARTBEAT_SECONDS: '0' }), /LILYPAD_HEARTBEAT_SECONDS="0"/);
    const prefix = uniquePrefix();
    const { logger } = recordingLogger();
    const hb = startHeartbeat(redis, prefix, 'worker-d', logger, undefined, 200);
    try {
      await waitFor(() => isAlive(redis, prefix, 'worker-d'), 'the first beat', 5000);
      const ttl = await redis.pttl(`${prefix}:heartbeat:worker-d`);
      assert.ok(ttl > 0 && ttl <= 600, `expiry ${ttl} ms for a 200 ms beat`);
      // Still alive after several expiries' worth of time: the beats keep it. A fixed window on
      // purpose: what is checked is that the key does not lapse within it.
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(await isAlive(redis, prefix, 'worker-d'), true);
    } finally {
      await hb.stop();
    }
  });

  test('liveness is the key existing, whatever its value: nothing in it is read', async () => {
    const prefix = uniquePrefix();
    await redis.set(`${prefix}:heartbeat:odd`, 'not a timestamp', 'PX', 5000);
    assert.equal(await isAlive(redis, prefix, 'odd'), true);
  });

  test('a beat that fails is logged, not thrown', async () => {
    const port = await freePort();
    const unreachable = new Redis({ host: '127.0.0.1', port, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    unreachable.on('error', () => undefined);
    const { logger, warnings } = recordingLogger();
    const hb = startHeartbeat(unreachable, uniquePrefix(), 'worker-c', logger);
    try {
      await waitFor(() => warnings.length > 0, 'the failed beat to be logged', 5000);
      assert.equal(warnings[0]?.msg, 'heartbeat failed');
      assert.equal(typeof warnings[0]?.obj['err'], 'string');
    } finally {
      await hb.stop();
      unreachable.disconnect();
    }
  });
});

describe('sweepDeadInstances', () => {
  let tmpRoot: string;
  before(async () => {
    tmpRoot = await mkdtemp(path.join(os.tmpdir(), 'lilypad-heartbeat-'));
  });
  after(async () => {
    await rm(tmpRoot, { recursive: true, force: true });
  });

  test("removes the temp dirs of this installation's instances without a heartbeat, keeps its own, live ones and other installations'", async () => {
    const prefix = uniquePrefix();
    const root = path.join(tmpRoot, 'sweep');
    const tag = randomBytes(4).toString('hex');
    const [self, live, dead, foreign, unmarked] = [`self-${tag}`, `live-${tag}`, `dead-${tag}`, `foreign-${tag}`, `unmarked-${tag}`];
    for (const dir of [self, live, dead, foreign, unmarked]) await mkdir(path.join(root, dir, 'ws'), { recursive: true });
    for (const dir of [self, live, dead]) await markInstanceDir(path.join(root, dir), INSTALLATION);
    // Another installation sharing the data directory (its heartbeats are in another Redis).
    await markInstanceDir(path.join(root, foreign), `inst-${randomBytes(8).toString('hex')}`);
    const { logger } = recordingLogger();
    const hb = startHeartbeat(redis, prefix, live, logger);
    try {
      await waitFor(() => isAlive(redis, prefix, live), 'the live heartbeat', 5000);
      const summary = await sweepDeadInstances(createDockerClient(), redis, { prefix, installation: INSTALLATION }, root, self, 0);
      assert.deepEqual(summary, { instances: [dead], containers: 0, images: 0, networks: 0, tmpDirs: 1 });
      assert.deepEqual((await readdir(root)).sort(), [foreign, live, self, unmarked].sort());
    } finally {
      await hb.stop();
    }
  });

  test("the sweep schedule follows the heartbeat: with 300 ms beats a dead instance's temp dir goes within seconds, a live one's stays", async () => {
    const prefix = uniquePrefix();
    const root = path.join(tmpRoot, 'schedule');
    const tag = randomBytes(4).toString('hex');
    const [self, live, dead] = [`self-${tag}`, `live-${tag}`, `dead-${tag}`];
    for (const dir of [self, live]) await markInstanceDir(await mkdirp(path.join(root, dir)), INSTALLATION);
    const { logger } = recordingLogger();
    const hb = startHeartbeat(redis, prefix, live, logger, undefined, 300);
    await waitFor(() => isAlive(redis, prefix, live), 'the live heartbeat', 5000);
    // The first sweep runs at once and finds nothing; the dead instance's dir appears after it.
    const stop = startSweeps({ docker: createDockerClient(), redis, scope: { prefix, installation: INSTALLATION }, tmpRoot: root, instance: self, liveRuns: new Set(), logger, heartbeatMs: 300 });
    try {
      await new Promise((r) => setTimeout(r, 200));
      await markInstanceDir(await mkdirp(path.join(root, dead)), INSTALLATION);
      const t0 = Date.now();
      // Next sweep within 4 beats (1.2 s), then 400 ms to confirm; the default schedule would take a minute.
      await waitFor(async () => !(await readdir(root)).includes(dead), 'the dead instance to be swept', 10_000);
      assert.ok(Date.now() - t0 < 5000, `swept after ${Date.now() - t0} ms`);
      assert.deepEqual((await readdir(root)).sort(), [live, self].sort());
    } finally {
      stop();
      await hb.stop();
    }
  });

  test('a missing temp root is no error', async () => {
    const summary = await sweepDeadInstances(createDockerClient(), redis, { prefix: uniquePrefix(), installation: INSTALLATION }, path.join(tmpRoot, 'absent'), 'self', 0);
    assert.deepEqual(summary, { instances: [], containers: 0, images: 0, networks: 0, tmpDirs: 0 });
  });
});
