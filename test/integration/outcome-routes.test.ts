import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import pino from 'pino';
import { loadEnv } from '../../src/config/env.ts';
import type { GitHubApp } from '../../src/github/app-auth.ts';
import type { GitHubClient } from '../../src/github/client.ts';
import type { StatusState, StatusWriter } from '../../src/github/status-comment.ts';
import { renderMetrics } from '../../src/observability/metrics.ts';
import { RunStore } from '../../src/observability/run-store.ts';
import { cancelFollowups } from '../../src/pipeline/followups.ts';
import { failStalledJob } from '../../src/pipeline/job-runner.ts';
import { handleEvent, type TriggerDeps } from '../../src/pipeline/triggers.ts';
import { CancelBus } from '../../src/store/cancel-bus.ts';
import { setCurrentFollowup } from '../../src/store/followup-requests.ts';
import { runJobId, type IssueEventJob, type RunJob } from '../../src/store/jobs.ts';
import type { RunQueue } from '../../src/store/run-queue.ts';
import type { StatusComments } from '../../src/github/status-comment.ts';

// The final statuses written outside a job's own run (a waiting job removed by a cancel, a job the
// queue failed as stalled) go through the one outcome writer like every other: the status comment,
// a run record and the jobs metric. Real Redis (run store, locks, cancel bus); GitHub faked.
const redis = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 2 });
const prefix = `lilypadtest_routes_${randomBytes(4).toString('hex')}`;
const env = loadEnv({ LILYPAD_QUEUE_PREFIX: prefix, LOG_LEVEL: 'silent' });
const logger = pino({ level: 'silent' });
const runStore = new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 1024 * 1024 });
const cancelBus = new CancelBus(redis, prefix, logger);
after(async () => {
  const found = await redis.keys(`${prefix}:*`);
  if (found.length) await redis.del(...found);
  await cancelBus.close();
  redis.disconnect();
});

const issueJob: RunJob = { kind: 'issue', installationId: 1, repoId: 42, owner: 'acme', repo: 'calc', issueNumber: 7, triggeredBy: 'maintainer', trigger: 'label', label: 'lilypad', deliveryId: 'd-1', queuedAt: new Date().toISOString() };
const followupJob: RunJob = { ...issueJob, kind: 'followup', pullNumber: 9, statusSlot: 's1' };
const client = { request: async () => ({ data: {} }) } as unknown as GitHubClient;

/** A queue holding one waiting job, which a cancel may remove. */
function waitingQueue(data: RunJob): RunQueue & { removed: string[] } {
  const removed: string[] = [];
  return { removed, state: async () => 'waiting', data: async () => data, add: async () => undefined, remove: async (id) => (removed.push(id), true), waitingCount: async () => 1 };
}

function statusLog(): { writer: StatusWriter; states: StatusState[] } {
  const states: StatusState[] = [];
  return { states, writer: { set: async (_client, _ref, state) => void states.push(state) } };
}

async function jobsFinished(kind: string, outcome: string): Promise<number> {
  const { body } = await renderMetrics();
  const line = body.split('\n').find((l) => l.startsWith(`lilypad_jobs_total{kind="${kind}",outcome="${outcome}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

async function recordOf(jobId: string) {
  const runs = (await runStore.list()).filter((r) => r.jobId === jobId);
  assert.equal(runs.length, 1, `one run record for ${jobId}: ${JSON.stringify(runs)}`);
  return (await runStore.load(runs[0]!.runId))!.view;
}

describe('final statuses outside a run', () => {
  test('an issue closed while its job waits: the job is removed, the status says cancelled, and there is a run record and a metric', async () => {
    const runs = waitingQueue(issueJob);
    const status = statusLog();
    const before = await jobsFinished('run', 'cancelled');
    const deps: TriggerDeps = {
      env,
      github: { installation: async () => client } as unknown as GitHubApp,
      runs,
      redis,
      status: status.writer as StatusComments,
      cancelBus,
      logger,
      runStore,
    };
    const evt: IssueEventJob = { installationId: 1, repoId: 42, owner: 'acme', repo: 'calc', issueNumber: 7, deliveryId: 'd-close', kind: 'closed', sender: { login: 'maintainer', type: 'User' }, receivedAt: new Date().toISOString() };
    const jobId = runJobId(42, 7);
    assert.equal(await handleEvent(evt, deps), `removed queued job ${jobId}`);
    assert.deepEqual(runs.removed, [jobId]);
    assert.deepEqual(status.states, [{ state: 'cancelled', by: undefined, why: 'the issue was closed' }]);
    const record = await recordOf(jobId);
    assert.equal(record.summary.outcome, 'cancelled');
    assert.equal(record.finish?.why, 'the issue was closed');
    assert.equal(await jobsFinished('run', 'cancelled'), before + 1);
  });

  test('a waiting follow-up cancelled: removed, its status slot says cancelled, and there is a run record and a metric', async () => {
    const jobId = `fu-42-9-${randomBytes(3).toString('hex')}`;
    const runs = waitingQueue(followupJob);
    const status = statusLog();
    const before = await jobsFinished('followup', 'cancelled');
    const pull = { installationId: 1, repoId: 42, owner: 'acme', repo: 'calc', pullNumber: 9, issueNumber: 7 };
    await setCurrentFollowup(redis, prefix, pull, jobId);
    const said = await cancelFollowups({ redis, prefix, runs, status: status.writer, cancelBus, runStore }, client, pull, 'alice', 'cancelled with `/lilypad cancel`');
    assert.equal(said, `removed waiting follow-up ${jobId}`);
    assert.deepEqual(status.states, [{ state: 'cancelled', by: 'alice', why: 'cancelled with `/lilypad cancel`' }]);
    const record = await recordOf(jobId);
    assert.equal(record.summary.outcome, 'cancelled');
    assert.equal(record.summary.issueNumber, 9, 'a follow-up is recorded on its pull request');
    assert.equal(await jobsFinished('followup', 'cancelled'), before + 1);
  });

  test('a job the queue failed as stalled: the status says failed with what to do, and there is a run record and a metric', async () => {
    const jobId = runJobId(42, 8);
    const status = statusLog();
    const before = await jobsFinished('run', 'failed');
    const github = { installation: async () => client } as unknown as GitHubApp;
    await failStalledJob({ github, status: status.writer, runStore, workerId: 'worker-1' }, { id: jobId, data: { ...issueJob, issueNumber: 8 }, attemptsMade: 3 }, new Error('job stalled more than allowable limit'));
    assert.equal(status.states.length, 1);
    const [failed] = status.states;
    assert.ok(failed?.state === 'failed');
    assert.match(failed.what, /stopped unexpectedly several times/);
    assert.match(failed.todo, /check the workers/);
    const record = await recordOf(jobId);
    assert.equal(record.summary.outcome, 'failed');
    assert.match(record.finish?.error ?? '', /stalled/);
    assert.equal(record.summary.attempt, 3);
    assert.equal(await jobsFinished('run', 'failed'), before + 1);
  });
});
