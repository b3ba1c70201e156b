import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ApplicationFunction } from 'probot';
import type { Queue } from 'bullmq';
import { DELIVERY_SHAPES, judgeDelivery } from '../../src/github/webhook-payloads.ts';
import { lilypadApp } from '../../src/github/webhooks.ts';
import type { EventJob } from '../../src/store/jobs.ts';

test('the payload guard knows the shape of exactly the events the handlers are registered for', () => {
  const registered: string[] = [];
  const app = { on: (key: string) => registered.push(key) } as unknown as Parameters<ApplicationFunction>[0];
  void lilypadApp({} as Queue<EventJob>)(app, {} as Parameters<ApplicationFunction>[1]);
  assert.deepEqual([...registered].sort(), Object.keys(DELIVERY_SHAPES).sort());
});

test('judgeDelivery: ignored, refused with the field that is wrong, or accepted', () => {
  const envelope = { installation: { id: 1 }, repository: { id: 2, name: 'calc', owner: { login: 'acme' } }, sender: { login: 'alice', type: 'User' } };
  const labeled = { ...envelope, action: 'labeled', issue: { number: 1, title: 't', body: null }, label: { name: 'lilypad' } };
  assert.deepEqual(judgeDelivery('issues', JSON.stringify(labeled)), { kind: 'accept' });
  assert.equal(judgeDelivery('installation', JSON.stringify({ action: 'created', installation: { id: 1 } })).kind, 'ignore');
  assert.equal(judgeDelivery('issues', JSON.stringify({ ...labeled, installation: null })).kind, 'ignore');
  const { repository: _r, ...noRepo } = labeled;
  assert.deepEqual(judgeDelivery('issues', JSON.stringify(noRepo)), { kind: 'refuse', message: 'The issues.labeled delivery was refused: repository is missing.' });
  assert.deepEqual(judgeDelivery('issues', JSON.stringify({ ...labeled, issue: { ...labeled.issue, number: null } })), {
    kind: 'refuse',
    message: 'The issues.labeled delivery was refused: issue.number is null, not what GitHub sends.',
  });
  assert.deepEqual(judgeDelivery('status', '[1]'), { kind: 'refuse', message: 'The status delivery was refused: its body is an array, not a JSON object.' });
  assert.deepEqual(judgeDelivery('ping', '{"zen":'), { kind: 'refuse', message: 'The ping delivery was refused: its body is not valid JSON.' });
});
