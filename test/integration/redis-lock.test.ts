import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

import { LockTimeoutError, withRedisLock } from '../../src/store/redis-lock.ts';

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

let redis: Redis;
const keys: string[] = [];

before(() => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
});
after(async () => {
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

/** A key of its own per test, removed at the end. */
function uniqueKey(what: string): string {
  const key = `lilypad-test:lock:${what}:${process.pid}:${randomBytes(4).toString('hex')}`;
  keys.push(key);
  return key;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The same connection, with every answer that arrives after `pauseAfter()` says so delayed by
 * `ms`: what a GC pause or a slow network does between two commands of one client.
 */
function pausingClient(client: Redis, ms: number): { client: Redis; pause: () => void } {
  let paused = false;
  const proxy = new Proxy(client, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
        if (!paused || !(result instanceof Promise)) return result;
        return result.then(async (v: unknown) => {
          await sleep(ms);
          return v;
        });
      };
    },
  });
  return { client: proxy, pause: () => (paused = true) };
}

describe('withRedisLock against a real Redis', () => {
  test('two holders never overlap; both get their turn', async () => {
    const key = uniqueKey('two');
    let inside = 0;
    let maxInside = 0;
    const order: string[] = [];
    const holder = (name: string) =>
      withRedisLock(redis, key, { ttlMs: 5000, waitMs: 5000 }, async () => {
        inside++;
        maxInside = Math.max(maxInside, inside);
        order.push(`${name} in`);
        await sleep(200);
        order.push(`${name} out`);
        inside--;
        return name;
      });
    const results = await Promise.all([holder('a'), holder('b')]);
    assert.deepEqual(results, ['a', 'b']);
    assert.equal(maxInside, 1, order.join(', '));
    assert.equal(await redis.exists(key), 0, 'released at the end');
  });

  test('when the lock cannot be had within waitMs, the function does not run and LockTimeoutError names the lock and the wait', async () => {
    const key = uniqueKey('timeout');
    await redis.set(key, 'someone-else', 'PX', 10_000);
    let ran = false;
    const started = Date.now();
    await assert.rejects(
      withRedisLock(redis, key, { ttlMs: 5000, waitMs: 300 }, async () => {
        ran = true;
      }),
      (err: unknown) => err instanceof LockTimeoutError && err.message.includes(key) && /300 ms/.test(err.message),
    );
    assert.equal(ran, false, 'the function must never run without the lock');
    assert.ok(Date.now() - started >= 290 && Date.now() - started < 2000, `waited ${Date.now() - started} ms`);
    assert.equal(await redis.get(key), 'someone-else', 'the other holder keeps its lock');
  });

  test('waitMs 0 still tries once', async () => {
    const key = uniqueKey('zero');
    const heldDuring = await withRedisLock(redis, key, { ttlMs: 1000, waitMs: 0 }, async () => redis.exists(key));
    assert.equal(heldDuring, 1, 'the function ran holding the lock');
  });

  test('a lock left by a crashed holder expires with its ttl and is then taken', async () => {
    const key = uniqueKey('expiry');
    await redis.set(key, 'crashed-holder', 'PX', 300);
    const started = Date.now();
    const result = await withRedisLock(redis, key, { ttlMs: 1000, waitMs: 3000 }, async () => Date.now() - started);
    assert.ok(result >= 250, `taken after ${result} ms, before the crashed holder's lock expired`);
    assert.equal(await redis.exists(key), 0);
  });

  test('a holder that runs longer than the ttl keeps the lock (it is renewed) until it is done', async () => {
    const key = uniqueKey('renew');
    const events: string[] = [];
    const long = withRedisLock(redis, key, { ttlMs: 300, waitMs: 1000 }, async () => {
      events.push('long in');
      await sleep(1200);
      events.push('long out');
    });
    await sleep(50);
    const contender = withRedisLock(redis, key, { ttlMs: 300, waitMs: 3000 }, async () => {
      events.push('contender in');
    });
    await Promise.all([long, contender]);
    assert.deepEqual(events, ['long in', 'long out', 'contender in']);
  });

  test('release is one atomic compare-and-delete: a pause after the check never deletes the next holder’s lock', async () => {
    const key = uniqueKey('cas');
    const { client, pause } = pausingClient(redis, 500);
    let nextHolderIn = false;
    const first = withRedisLock(client, key, { ttlMs: 200, waitMs: 1000 }, async () => {
      // From here on, every answer to this holder is late: its lock expires while it releases.
      pause();
    });
    const second = (async () => {
      await sleep(50);
      return withRedisLock(redis, key, { ttlMs: 5000, waitMs: 3000 }, async () => {
        nextHolderIn = true;
        await sleep(1000); // still holding when the first holder's release lands
        return redis.get(key);
      });
    })();
    await first;
    const tokenWhileSecondHolds = await second;
    assert.equal(nextHolderIn, true);
    assert.ok(tokenWhileSecondHolds, 'the second holder’s lock was deleted by the first holder’s late release');
  });

  test('the lock is released when the function throws, and the error is the function’s', async () => {
    const key = uniqueKey('throws');
    await assert.rejects(
      withRedisLock(redis, key, { ttlMs: 5000, waitMs: 100 }, async () => {
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(await redis.exists(key), 0);
  });
});
