/**
 * Item 9: two installations on one Docker engine, each with its own Redis, the same worker id (the
 * host name) and the same queue prefix (the default). Neither sweep may remove the other's live
 * sandbox; each still removes what its own dead instance left behind.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type Docker from 'dockerode';
import { LABEL_INSTALLATION, LABEL_INSTANCE, LABEL_JOB, LABEL_PREFIX } from '../../src/cli/worker-labels.ts';
import { sweepDeadInstances, sweepOrphans, sweepOwnLeftovers } from '../../src/cli/worker-sweeps.ts';
import { startHeartbeat } from '../../src/store/heartbeats.ts';
import { installationId } from '../../src/store/installation-id.ts';
import { RUNS_QUEUE, type RunJob } from '../../src/store/jobs.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createDockerClient, LABEL_MANAGED, LABEL_RUN, LABEL_WORKER } from '../../src/sandbox/sandbox.ts';
import { LABEL_SNAPSHOT } from '../../src/sandbox/snapshot.ts';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.ts';
import { TEST_IMAGE } from '../support/sandbox-harness.ts';

const SHARED_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const tag = randomBytes(4).toString('hex');
const prefix = `lilypad-inst-${tag}`; // the same prefix in both Redis instances, as two default installs would have
const workerId = `host-${tag}`; // the same worker id (host name) for both
const TEST_LABEL = 'dev.lilypad.test';
const logger = createLogger({ level: 'silent' });

let docker: Docker;
let other: PrivateRedis;
let redisA: Redis;
let dataDir: string;
const stops: Array<() => Promise<unknown>> = [];

before(async () => {
  docker = createDockerClient();
  other = await startPrivateRedis();
  redisA = new Redis(SHARED_URL, { maxRetriesPerRequest: 1 });
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'lilypad-inst-'));
});
after(async () => {
  for (const stop of stops.reverse()) await stop().catch(() => undefined);
  for (const c of await docker.listContainers({ all: true, filters: { label: [`${TEST_LABEL}=${tag}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  }
  const keys = await redisA.keys(`${prefix}:*`);
  if (keys.length > 0) await redisA.del(...keys);
  redisA.disconnect();
  await other.close();
  await rm(dataDir, { recursive: true, force: true });
});

/** A sandbox-like container as a worker labels it (run, job, instance, worker, prefix, installation). */
async function sandboxOf(installation: string, instance: string, job: string): Promise<string> {
  const c = await docker.createContainer({
    Image: TEST_IMAGE,
    Entrypoint: ['sleep'],
    Cmd: ['infinity'],
    Labels: {
      [TEST_LABEL]: tag,
      [LABEL_MANAGED]: 'true',
      [LABEL_RUN]: `${job}-run`,
      [LABEL_JOB]: job,
      [LABEL_INSTANCE]: instance,
      [LABEL_WORKER]: workerId,
      [LABEL_PREFIX]: prefix,
      [LABEL_INSTALLATION]: installation,
    },
    HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], Memory: 64 * 1024 * 1024, PidsLimit: 16 },
  });
  await c.start();
  return c.id;
}
const exists = (id: string) => docker.getContainer(id).inspect().then(() => true, () => false);

test('one id per installation: made once, the same for every worker of it, another for another Redis on the same data dir', async () => {
  const a1 = await installationId(redisA, prefix, { dataDir, redisUrl: SHARED_URL });
  const a2 = await installationId(redisA, prefix, { dataDir, redisUrl: SHARED_URL });
  const b = await installationId(other.client, prefix, { dataDir, redisUrl: other.url });
  assert.equal(a1, a2);
  assert.notEqual(a1, b);
  // Redis lost its data: the next worker restores the same id from the data directory.
  await redisA.del(`${prefix}:installation`);
  assert.equal(await installationId(redisA, prefix, { dataDir, redisUrl: SHARED_URL }), a1);
});

test("two installations on one engine: neither sweep removes the other's live sandbox; each removes its own dead instance's", async () => {
  const idA = await installationId(redisA, prefix, { dataDir, redisUrl: SHARED_URL });
  const idB = await installationId(other.client, prefix, { dataDir, redisUrl: other.url });
  const [liveA, liveB, deadA] = [`${workerId}-1-a`, `${workerId}-1-b`, `${workerId}-2-dead`];
  for (const [redis, instance, id] of [[redisA, liveA, idA], [other.client, liveB, idB]] as const) {
    const hb = startHeartbeat(redis, prefix, instance, logger, id);
    stops.push(() => hb.stop());
  }
  // B's job is active in B's queue only; A knows nothing of it.
  const [connA, connB] = [new Redis(SHARED_URL, { maxRetriesPerRequest: null }), new Redis(other.url, { maxRetriesPerRequest: null })];
  const queueB = new Queue<RunJob>(RUNS_QUEUE, { connection: connB, prefix });
  const queueA = new Queue<RunJob>(RUNS_QUEUE, { connection: connA, prefix });
  stops.push(async () => connA.disconnect(), async () => connB.disconnect(), () => queueA.close(), () => queueB.close());
  const sandboxB = await sandboxOf(idB, liveB, `job-b-${tag}`);
  const sandboxA = await sandboxOf(idA, liveA, `job-a-${tag}`);
  const leftoverA = await sandboxOf(idA, deadA, `job-dead-${tag}`);
  const tmpRoot = path.join(dataDir, 'tmp');

  // A's sweeps: dead instances, orphans of its worker id (no active job in A), its own leftovers.
  const deadSweepA = await sweepDeadInstances(docker, redisA, { prefix, installation: idA }, tmpRoot, liveA, 0);
  const deadSweepB = await sweepDeadInstances(docker, other.client, { prefix, installation: idB }, tmpRoot, liveB, 0);
  await sweepOwnLeftovers(docker, liveB, new Set([`job-b-${tag}`]), idB);
  assert.deepEqual(deadSweepA.instances, [deadA]);
  assert.deepEqual(deadSweepB.instances, []);
  assert.equal(await exists(leftoverA), false, "A's dead instance's sandbox is removed");
  assert.equal(await exists(sandboxB), true, "B's live sandbox survives A's sweep");
  assert.equal(await exists(sandboxA), true, "A's live sandbox survives B's sweep");

  // The start-up orphan sweep by worker id: B's job is not in A's queue, but B's sandbox is not A's.
  const orphansA = await sweepOrphans(docker, queueA, workerId, idA);
  assert.equal(await exists(sandboxB), true, "B's live sandbox survives A's orphan sweep (same worker id)");
  assert.equal(orphansA, 1, "A's own sandbox without an active job is an orphan of A's");
  assert.equal(await exists(sandboxA), false);
  const orphansB = await sweepOrphans(docker, queueB, workerId, idB);
  assert.equal(orphansB, 1, "B's sandbox without an active job in B is B's orphan");
});

test("snapshot images (the state a run's judging sandboxes start from): a dead instance's and an ended job's go, a live job's stays", async () => {
  const idA = await installationId(redisA, prefix, { dataDir, redisUrl: SHARED_URL });
  const [live, dead] = [`${workerId}-3-live`, `${workerId}-4-dead`];
  const hb = startHeartbeat(redisA, prefix, live, logger, idA);
  stops.push(() => hb.stop());
  /** A snapshot as a run commits it: the sandbox's labels and the snapshot label. */
  const snapshotOf = async (instance: string, job: string): Promise<string> => {
    const box = docker.getContainer(await sandboxOf(idA, instance, job));
    const made = (await box.commit({ changes: [`LABEL ${LABEL_SNAPSHOT}=${job}-run`] })) as { Id: string };
    await box.remove({ force: true });
    stops.push(() => docker.getImage(made.Id).remove({ force: true }));
    return made.Id;
  };
  const imageExists = (id: string) => docker.getImage(id).inspect().then(() => true, () => false);
  const [ofDead, ofLiveJob, ofEndedJob] = [await snapshotOf(dead, `job-d-${tag}`), await snapshotOf(live, `job-l-${tag}`), await snapshotOf(live, `job-e-${tag}`)];

  const swept = await sweepDeadInstances(docker, redisA, { prefix, installation: idA }, path.join(dataDir, 'tmp'), live, 0);
  assert.ok(swept.instances.includes(dead), `the dead instance is found from its snapshot alone: ${JSON.stringify(swept)}`);
  assert.equal(swept.images, 1);
  assert.equal(await imageExists(ofDead), false, "the dead instance's snapshot is removed");
  assert.equal(await imageExists(ofLiveJob), true);

  const own = await sweepOwnLeftovers(docker, live, new Set([`job-l-${tag}`]), idA);
  assert.equal(own.images, 1);
  assert.equal(await imageExists(ofEndedJob), false, "an ended job's snapshot is removed");
  assert.equal(await imageExists(ofLiveJob), true, "a running job's snapshot stays");
});
