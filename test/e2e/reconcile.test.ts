import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { EVENTS_QUEUE } from '../../src/store/jobs.ts';
import { CALC_REPO } from '../support/fixture-repo.ts';
import { startApp, titleOf, waitFor, type AppHarness } from '../support/app-harness.ts';

const OWNER = 'recon';
let app: AppHarness;
let redis: Redis;
let events: Queue;

before(async () => {
  app = await startApp({
    env: { LILYPAD_RECONCILE_SECONDS: '2' },
    book: {
      'Label webhook was lost': [
        { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
        { content: 'Fixed.' },
      ],
    },
  });
  app.gh.createInstallation({ login: OWNER, type: 'Organization' });
  app.gh.createUser('alice');
  app.gh.createUser('bob');
  app.gh.createRepo(OWNER, 'calc', { files: CALC_REPO });
  app.gh.addCollaborator(OWNER, 'calc', 'alice', 'write');
  redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  events = new Queue(EVENTS_QUEUE, { connection: redis, prefix: app.prefix });
});
after(async () => {
  await events?.close();
  redis?.disconnect();
  await app?.stop();
});

const chats = (title: string) => app.model.chatRequests().filter((b) => titleOf(b) === title && b.messages.length === 2);

/**
 * Waits until `n` reconcile ticks that started after now have finished (the worker's scheduled
 * 'reconcile' jobs in the events queue) and returns what each reported.
 */
async function nextReconcileTicks(n: number): Promise<string[]> {
  const since = Date.now();
  let reports: string[] = [];
  await waitFor(
    async () => {
      const done = await events.getJobs(['completed'], 0, -1);
      reports = done.filter((j) => j.name === 'reconcile' && (j.processedOn ?? 0) >= since).map((j) => String(j.returnvalue));
      return reports.length >= n;
    },
    `${n} more reconcile ticks`,
    30_000,
  );
  return reports;
}

test('a label whose webhook never arrived is found by the reconciler and handled once', async () => {
  const issue = app.gh.createIssue(OWNER, 'calc', { title: 'Label webhook was lost', body: 'x', author: 'alice' });
  app.gh.labelIssueSilently(OWNER, 'calc', issue.number, 'lilypad', 'alice'); // no webhook is sent
  await waitFor(() => app.gh.pulls(OWNER, 'calc').some((p) => p.head.ref === `lilypad/issue-${issue.number}`), 'the pull request', 90_000);
  await waitFor(() => /Done/.test(app.gh.comments(OWNER, 'calc', issue.number).find((c) => c.body.includes('lilypad:status'))?.body ?? ''), 'the status');
  const ticks = await nextReconcileTicks(2);
  assert.ok(ticks.every((t) => /^reconciled: 0 missed trigger\(s\)/.test(t)), ticks.join('\n'));
  assert.equal(chats('Label webhook was lost').length, 1, 'started exactly once');
});

test('a lost label from someone without write access is refused once, not run', async () => {
  const issue = app.gh.createIssue(OWNER, 'calc', { title: 'Visitor label lost', body: 'x', author: 'bob' });
  app.gh.labelIssueSilently(OWNER, 'calc', issue.number, 'lilypad', 'bob');
  await waitFor(() => app.gh.comments(OWNER, 'calc', issue.number).some((c) => /write, maintain or admin/.test(c.body)), 'the refusal', 60_000);
  const ticks = await nextReconcileTicks(2);
  assert.ok(ticks.every((t) => /^reconciled: 0 missed trigger\(s\)/.test(t)), ticks.join('\n'));
  assert.equal(app.gh.comments(OWNER, 'calc', issue.number).filter((c) => /write, maintain or admin/.test(c.body)).length, 1);
  assert.equal(chats('Visitor label lost').length, 0);
});
