import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { DEFAULT_REDIS_IMAGE, redisAnswers, startPrivateRedis } from '../../src/cli/private-redis.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { createDockerClient } from '../../src/sandbox/sandbox.ts';

const docker = createDockerClient();
const logger = createLogger({ level: 'silent' });

async function roundTrip(how: 'process' | 'container'): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-private-redis-'));
  const first = await startPrivateRedis({ dataDir, logger, docker, preferContainer: how === 'container' });
  assert.equal(first.how, how);
  assert.match(first.url, /^redis:\/\/:[0-9a-f]{48}@127\.0\.0\.1:\d+$/);
  const port = Number(new URL(first.url).port);
  assert.equal(await redisAnswers(`redis://127.0.0.1:${port}`), false, 'a client without the password is refused');
  const r = new Redis(first.url, { maxRetriesPerRequest: 1 });
  assert.equal(await r.config('GET', 'maxmemory-policy').then((v) => (v as string[])[1]), 'noeviction');
  await r.set('queued', 'job-1');
  r.disconnect();
  await first.stop();
  assert.equal(await redisAnswers(first.url), false, 'stopped with Lilypad');
  assert.equal(statSync(path.join(dataDir, 'redis', 'password')).mode & 0o777, 0o600);

  // A restart finds what was queued (append-only file in the data directory), on the same port.
  const second = await startPrivateRedis({ dataDir, logger, docker, preferContainer: how === 'container' });
  assert.equal(second.url, first.url);
  const r2 = new Redis(second.url, { maxRetriesPerRequest: 1 });
  assert.equal(await r2.get('queued'), 'job-1');
  r2.disconnect();

  // Lilypad killed without stopping it: the next start takes the live one over instead of a second.
  const third = await startPrivateRedis({ dataDir, logger, docker, preferContainer: how === 'container' });
  assert.equal(third.how, 'adopted');
  assert.equal(third.url, first.url);
  await third.stop();
  assert.equal(await redisAnswers(first.url), false);
  assert.deepEqual(JSON.parse(readFileSync(path.join(dataDir, 'redis', 'server.json'), 'utf8')).port, port);
}

test('a private redis-server: password, noeviction, data kept over a restart, adopted after a kill, stopped with Lilypad', async () => {
  await roundTrip('process');
});

test('without redis-server on PATH: the same from the lilypad-redis image, published on loopback only', async () => {
  await docker.getImage(DEFAULT_REDIS_IMAGE).inspect(); // built by `npm run images` (CI builds it)
  await roundTrip('container');
});

test('without redis-server and without the image: a message that says what to install or set', async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-private-redis-'));
  await assert.rejects(
    startPrivateRedis({ dataDir, logger, docker, preferContainer: true, image: 'lilypad-redis:no-such-tag' }),
    /neither a redis-server on PATH nor the lilypad-redis:no-such-tag image.*apt-get install redis-server.*npm run images.*REDIS_URL/,
  );
});

test("Ctrl-C in a terminal (SIGINT to the whole foreground process group) leaves the private redis-server to Lilypad's own shutdown", async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-private-redis-'));
  const script = path.join(dataDir, 'lilypad-like.mts');
  const src = new URL('../../src/', import.meta.url).href;
  // A stand-in for `lilypad start`: starts the private Redis, and on SIGINT looks at it before stopping it.
  writeFileSync(
    script,
    `const { startPrivateRedis, redisAnswers } = await import(${JSON.stringify(`${src}cli/private-redis.ts`)});
const { createLogger } = await import(${JSON.stringify(`${src}observability/logger.ts`)});
const { createDockerClient } = await import(${JSON.stringify(`${src}sandbox/sandbox.ts`)});
const own = await startPrivateRedis({ dataDir: ${JSON.stringify(dataDir)}, logger: createLogger({ level: 'silent' }), docker: createDockerClient() });
process.once('SIGINT', async () => {
  await new Promise((r) => setTimeout(r, 500));
  console.log('answers during shutdown: ' + (await redisAnswers(own.url)));
  await own.stop();
  process.exit(0);
});
console.log('url ' + own.url);
`,
  );
  // detached: a process group of its own, as a terminal gives a foreground job.
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: path.resolve(new URL('../..', import.meta.url).pathname), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
  const deadline = Date.now() + 30_000;
  while (!/url (\S+)/.test(out) && Date.now() < deadline && child.exitCode === null) await new Promise((r) => setTimeout(r, 100));
  const url = /url (\S+)/.exec(out)?.[1];
  assert.ok(url, out);
  process.kill(-child.pid!, 'SIGINT');
  assert.equal(await closed, 0, out);
  assert.match(out, /answers during shutdown: true/);
  assert.equal(await redisAnswers(url), false, 'stopped with Lilypad');
});
