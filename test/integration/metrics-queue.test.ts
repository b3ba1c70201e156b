import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { readQueueSummary, renderMetrics, watchQueue } from '../../src/observability/metrics.ts';

// The queue gauges read BullMQ's own keys: real Redis, a prefix of its own.
const prefix = `lilypad-test-metrics-${process.pid}-${Date.now().toString(36)}`;
const connection = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
const queue = new Queue('runs', { connection, prefix });

after(async () => {
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
});

test('queue gauges come from BullMQ at scrape time, oldest waiting job included', async () => {
  await queue.add('run', {}, { jobId: 'a', timestamp: Date.now() - 120_000 });
  await queue.add('run', {}, { jobId: 'b', delay: 60_000 });
  const s = await readQueueSummary(queue);
  assert.equal(s.waiting, 1);
  assert.equal(s.delayed, 1);
  assert.ok(s.oldestWaitingSeconds !== null && s.oldestWaitingSeconds >= 119, `oldest ${s.oldestWaitingSeconds}`);
  watchQueue(queue);
  const { body } = await renderMetrics();
  assert.match(body, /^lilypad_queue_jobs\{state="waiting"\} 1$/m);
  assert.match(body, /^lilypad_queue_jobs\{state="delayed"\} 1$/m);
  assert.match(body, /^lilypad_queue_oldest_waiting_seconds 1[12]\d(\.\d+)?$/m);
});
