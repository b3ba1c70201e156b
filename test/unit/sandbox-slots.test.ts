import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CancelledError } from '../../src/shared/cancel.ts';
import { SandboxSlots } from '../../src/pipeline/sandbox-slots.ts';
import { parseCommand } from '../../src/pipeline/triggers.ts';

test('sandbox slots: never more than the size at once, first come first served, a cancelled waiter leaves the queue', async () => {
  const slots = new SandboxSlots(2);
  let running = 0;
  let peak = 0;
  const order: number[] = [];
  const work = (i: number) =>
    slots.use(undefined, async () => {
      running++;
      peak = Math.max(peak, running);
      order.push(i);
      await new Promise((r) => setTimeout(r, 20));
      running--;
    });
  const stop = new AbortController();
  const first = [work(1), work(2)];
  const cancelled = slots.use(stop.signal, async () => assert.fail('a cancelled waiter must not run'));
  const all = [...first, work(3), work(4), work(5)];
  stop.abort('cancel');
  await assert.rejects(cancelled, CancelledError);
  await Promise.all(all);
  assert.equal(peak, 2);
  assert.deepEqual(order, [1, 2, 3, 4, 5]);
  assert.equal(slots.inUse, 0);
});

test('/lilypad ci <sha> names the commit to release; other words after ci are instructions', () => {
  assert.deepEqual(parseCommand('/lilypad ci ABC1234'), { kind: 'ci', sha: 'abc1234' });
  assert.deepEqual(parseCommand('/lilypad ci'), { kind: 'ci' });
  assert.deepEqual(parseCommand('/lilypad ci abc12'), { kind: 'revise', instructions: 'ci abc12' });
});
