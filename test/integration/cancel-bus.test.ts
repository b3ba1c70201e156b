import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

import { CancelBus, type CancelRequest } from '../../src/store/cancel-bus.ts';
import { waitFor } from '../support/app-harness.ts';

// Real Redis on the loopback; every test has a prefix of its own, and its keys are removed after.
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

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

function uniquePrefix(): string {
  const prefix = `lilypad-test:cancel-bus:${process.pid}:${randomBytes(4).toString('hex')}`;
  prefixes.push(prefix);
  return prefix;
}

interface Warning {
  obj: Record<string, unknown>;
  msg: string;
}

function recordingLogger(): { warn: (obj: Record<string, unknown>, msg: string) => void; warnings: Warning[] } {
  const warnings: Warning[] = [];
  return { warnings, warn: (obj, msg) => void warnings.push({ obj, msg }) };
}

function bus(prefix: string, logger = recordingLogger()): { bus: CancelBus; warnings: Warning[] } {
  return { bus: new CancelBus(redis, prefix, logger as never), warnings: logger.warnings };
}

describe('CancelBus against Redis', () => {
  test('a request is stored for a worker that looks later, and cleared', async () => {
    const { bus: b, warnings } = bus(uniquePrefix());
    const req: CancelRequest = { jobId: 'o/r#7', by: 'alice', why: 'the issue was closed' };
    await b.request(req);
    assert.deepEqual(await b.pending('o/r#7'), req);
    assert.equal(await b.pending('o/r#8'), null);
    await b.clear('o/r#7');
    assert.equal(await b.pending('o/r#7'), null);
    assert.deepEqual(warnings, []);
  });

  test('an invalid request is refused before it reaches Redis', async () => {
    const prefix = uniquePrefix();
    const { bus: b } = bus(prefix);
    await assert.rejects(b.request({ jobId: '', why: 'x' }));
    assert.equal(await redis.exists(`${prefix}:cancelled:`), 0);
  });

  test('an unreadable stored flag is logged once and reads as no request', async () => {
    const prefix = uniquePrefix();
    const { bus: b, warnings } = bus(prefix);
    await redis.set(`${prefix}:cancelled:o/r#1`, '{"jobId":"o/r#1"', 'EX', 60);
    assert.equal(await b.pending('o/r#1'), null);
    assert.equal(await b.pending('o/r#1'), null);
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]?.msg, 'ignored an unreadable cancel flag');
    assert.equal(warnings[0]?.obj['key'], `${prefix}:cancelled:o/r#1`);
    assert.match(String(warnings[0]?.obj['reason']), /^not JSON/);

    // Another bad value for the same job is reported again.
    await redis.set(`${prefix}:cancelled:o/r#1`, '{"why":"no job"}', 'EX', 60);
    assert.equal(await b.pending('o/r#1'), null);
    assert.equal(warnings.length, 2);
    assert.match(String(warnings[1]?.obj['reason']), /jobId/);
  });

  test('without a logger, an unreadable flag becomes a process warning', async () => {
    const prefix = uniquePrefix();
    const b = new CancelBus(redis, prefix);
    await redis.set(`${prefix}:cancelled:o/r#9`, 'nope', 'EX', 60);
    const warned = new Promise<Error>((resolve) => process.once('warning', resolve));
    assert.equal(await b.pending('o/r#9'), null);
    const warning = await warned;
    assert.equal(warning.name, 'LilypadCancelBus');
    assert.match(warning.message, /^ignored an unreadable cancel flag: .*"message":"nope"/);
  });

  test("a stored flag naming another job is not this job's request", async () => {
    const prefix = uniquePrefix();
    const { bus: b, warnings } = bus(prefix);
    await redis.set(`${prefix}:cancelled:o/r#1`, JSON.stringify({ jobId: 'o/r#2', why: 'x' }), 'EX', 60);
    assert.equal(await b.pending('o/r#1'), null);
    assert.equal(warnings.length, 1);
    assert.match(String(warnings[0]?.obj['reason']), /names job o\/r#2/);
  });

  test('a subscriber gets valid requests; invalid messages are logged and skipped, and later ones still arrive', async () => {
    const prefix = uniquePrefix();
    const { bus: b, warnings } = bus(prefix);
    const got: CancelRequest[] = [];
    await b.subscribe((req) => void got.push(req));
    try {
      await redis.publish(`${prefix}:cancel`, 'garbage');
      await redis.publish(`${prefix}:cancel`, JSON.stringify({ jobId: 42, why: 'wrong type' }));
      await b.request({ jobId: 'o/r#3', why: 'cancelled with `/lilypad cancel`' });
      await waitFor(() => got.length === 1 && warnings.length === 2, 'the valid request and two warnings', 5000);
      assert.deepEqual(got, [{ jobId: 'o/r#3', why: 'cancelled with `/lilypad cancel`' }]);
      assert.deepEqual(
        warnings.map((w) => w.msg),
        ['ignored an unreadable cancel message', 'ignored an unreadable cancel message'],
      );
      assert.equal(warnings[0]?.obj['message'], 'garbage');
      assert.equal(warnings[0]?.obj['channel'], `${prefix}:cancel`);
    } finally {
      await b.close();
    }
  });

  test('a handler that throws is logged, and the subscription keeps working', async () => {
    const prefix = uniquePrefix();
    const { bus: b, warnings } = bus(prefix);
    const got: string[] = [];
    await b.subscribe((req) => {
      got.push(req.jobId);
      if (req.jobId === 'boom') throw new Error('handler broke');
    });
    try {
      await b.request({ jobId: 'boom', why: 'x' });
      await b.request({ jobId: 'after', why: 'y' });
      await waitFor(() => got.length === 2, 'both requests', 5000);
      assert.deepEqual(got, ['boom', 'after']);
      assert.equal(warnings.length, 1);
      assert.equal(warnings[0]?.msg, 'the cancel handler failed');
      assert.equal(warnings[0]?.obj['err'], 'handler broke');
    } finally {
      await b.close();
    }
  });
});
