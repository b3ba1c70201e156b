/**
 * A cancel reaches the host's long operations at once: git against a server that never answers,
 * the wait for another worker's mirror lock, and a GitHub call in flight.
 */
import { createServer, type Server } from 'node:net';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Octokit } from '@octokit/rest';
import { Redis } from 'ioredis';
import { upsertPullRequest } from '../../src/github/pull-request.ts';
import { withRedisLock } from '../../src/store/redis-lock.ts';
import { CancelledError } from '../../src/shared/cancel.ts';
import { gitRun } from '../../src/workspace/git.ts';
import { updateMirror } from '../../src/workspace/mirror.ts';
import { remoteTip } from '../../src/workspace/publish.ts';

let silent: Server;
let url: string;
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 3 });
const sockets = new Set<import('node:net').Socket>();

before(async () => {
  // Accepts connections and never says a word.
  silent = createServer((s) => {
    sockets.add(s);
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
});
after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => silent.close(() => r()));
  redis.disconnect();
});

const cancelAfter = (ms: number) => {
  const c = new AbortController();
  setTimeout(() => c.abort(new Error('cancelled by @alice')), ms);
  return c.signal;
};

async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await p;
  } finally {
    assert.ok(Date.now() - started < ms, `took ${Date.now() - started} ms`);
  }
}

test('git against a server that never answers is killed by the cancel', async () => {
  await assert.rejects(within(3000, gitRun(['ls-remote', `${url}/acme/calc.git`], { signal: cancelAfter(300) })), (err: unknown) => err instanceof CancelledError && /cancelled by @alice/.test((err as Error).message));
  await assert.rejects(within(3000, remoteTip(`${url}/acme/calc.git`, 'main', 'Authorization: Basic eA==', cancelAfter(300))), CancelledError);
  // An already-cancelled signal never starts git.
  const done = new AbortController();
  done.abort();
  await assert.rejects(gitRun(['--version'], { signal: done.signal }), CancelledError);
});

test('the wait for another worker\'s mirror lock ends with the cancel', async () => {
  const key = `lilypad-test-cancel-${process.pid}:mirror:mirror:7`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-cancel-'));
  let release!: () => void;
  const held = withRedisLock(redis, key, { ttlMs: 30_000, waitMs: 30_000 }, () => new Promise<void>((r) => (release = r)));
  await new Promise((r) => setTimeout(r, 100));
  const lock = <T>(k: string, fn: () => Promise<T>, signal?: AbortSignal) => withRedisLock(redis, `lilypad-test-cancel-${process.pid}:mirror:${k}`, { ttlMs: 30_000, waitMs: 30_000, signal }, fn);
  await assert.rejects(within(3000, updateMirror(dataDir, 7, `${url}/acme/calc.git`, 'Authorization: Basic eA==', { lock, signal: cancelAfter(300) })), CancelledError);
  release();
  await held;
});

test('a GitHub call in flight is aborted by the cancel', async () => {
  const client = new Octokit({ baseUrl: `${url}/api/v3`, auth: 'ghs_x', request: { retries: 0 } });
  const spec = { owner: 'acme', repo: 'calc', branch: 'lilypad/issue-1', base: 'main', title: 't', body: 'b', draft: true, labels: [], reviewers: [], signal: cancelAfter(300) };
  await assert.rejects(within(3000, upsertPullRequest(client, spec)), /cancelled by @alice|aborted/i);
});
