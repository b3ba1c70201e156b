import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import pino from 'pino';
import { loadEnv } from '../../src/config/env.ts';
import type { GitHubApp } from '../../src/github/app-auth.ts';
import type { StatusState, StatusWriter } from '../../src/github/status-comment.ts';
import { RunStore } from '../../src/observability/run-store.ts';
import { SetupError } from '../../src/pipeline/sandbox-session.ts';
import { UserError } from '../../src/pipeline/failures.ts';
import { FinalFailure, HandBack, JOB_DEADLINE, LOST_LOCK, LostClaim, runQueuedJob, SHUTDOWN, type JobKinds, type QueuedRun, type RunnerDeps } from '../../src/pipeline/job-runner.ts';
import type { RunOutcome } from '../../src/pipeline/outcome.ts';
import { SandboxSlots } from '../../src/pipeline/sandbox-slots.ts';
import { CancelBus } from '../../src/store/cancel-bus.ts';
import type { RunJob } from '../../src/store/jobs.ts';
import type { RunQueue } from '../../src/store/run-queue.ts';
import { CancelledError } from '../../src/shared/cancel.ts';
import { GitError } from '../../src/workspace/git.ts';

// The job lifecycle around the spine, with the spine replaced by fakes: what each way of ending
// becomes for the status comment, the run record and the queue. Real Redis (cancel bus, run store).
const redis = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 2 });
const prefixes: string[] = [];
after(async () => {
  for (const prefix of prefixes) {
    const found = await redis.keys(`${prefix}:*`);
    if (found.length) await redis.del(...found);
  }
  redis.disconnect();
});

const issueJob: RunJob = { kind: 'issue', installationId: 1, repoId: 42, owner: 'acme', repo: 'calc', issueNumber: 7, triggeredBy: 'maintainer', trigger: 'label', label: 'lilypad', deliveryId: 'd-1', queuedAt: new Date().toISOString() };
const followupJob: RunJob = { ...issueJob, kind: 'followup', pullNumber: 9, statusSlot: 's1' };

interface Harness {
  deps: RunnerDeps;
  statuses: StatusState[];
  calls: string[];
  prefix: string;
  cancelBus: CancelBus;
}

function harness(kinds: Partial<JobKinds>): Harness {
  const prefix = `lilypadtest_runner_${randomBytes(4).toString('hex')}`;
  prefixes.push(prefix);
  const statuses: StatusState[] = [];
  const calls: string[] = [];
  const env = loadEnv({ LILYPAD_QUEUE_PREFIX: prefix, LOG_LEVEL: 'silent' });
  const status: StatusWriter = { set: async (_client, _ref, state) => void statuses.push(state) };
  const github = { installation: async () => ({}), opts: { privateKey: 'not-a-key' } } as unknown as GitHubApp;
  const runs: RunQueue = { state: async () => undefined, data: async () => undefined, add: async () => undefined, remove: async () => true, waitingCount: async () => 0 };
  const cancelBus = new CancelBus(redis, prefix);
  const deps: RunnerDeps = {
    env,
    github,
    docker: {} as RunnerDeps['docker'],
    redis,
    logger: pino({ level: 'silent' }),
    workerId: 'worker-1',
    setupNetwork: null,
    sandboxSlots: new SandboxSlots(1),
    envCache: null,
    extraCaPem: null,
    labels: {},
    status,
    cancelBus,
    runStore: new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 1024 * 1024 }),
    runs,
    background: () => undefined,
    kinds: {
      issue: async () => {
        throw new Error('issue kind not expected');
      },
      followup: async () => {
        throw new Error('follow-up kind not expected');
      },
      ...kinds,
    },
  };
  return { deps, statuses, calls, prefix, cancelBus };
}

function queued(data: RunJob, over: Partial<QueuedRun> = {}): QueuedRun & { controller: AbortController } {
  const controller = new AbortController();
  return { id: `run-${data.repoId}-${data.issueNumber}`, data, attempt: 1, attempts: 3, signal: controller.signal, holdsJob: async () => true, cancel: (reason) => controller.abort(reason), controller, ...over };
}

async function summaryOutcome(prefix: string): Promise<string | null> {
  const runs = await redis.zrange(`${prefix}:runs`, 0, -1);
  const raw = await redis.get(`${prefix}:run:${runs[0]}:summary`);
  return raw ? (JSON.parse(raw) as { outcome: string | null }).outcome : null;
}

describe('the job runner', () => {
  test('an issue job runs the issue kind; its outcome is the status, the run record and what the queue keeps (without the diff)', async () => {
    const done: RunOutcome = { result: 'pull_request', number: 3, url: 'http://x/pull/3', updated: false, incomplete: false, branch: 'lilypad/issue-7', exitReason: 'agent', draft: true };
    const h = harness({ issue: async (ctx) => ((h.calls.push(`issue:${ctx.job.issueNumber}:${ctx.runId.startsWith('run-42-7-')}`), done)) });
    const outcome = await runQueuedJob(queued(issueJob), h.deps);
    assert.deepEqual(outcome, done);
    assert.deepEqual(h.calls, ['issue:7:true']);
    assert.deepEqual(h.statuses.map((s) => s.state), ['done']);
    assert.equal(await summaryOutcome(h.prefix), 'pull_request');
  });

  test("the process's own secrets (the Redis password) are redacted from the run record and refused by the job's scanner", async () => {
    const password = `redis-pw-${randomBytes(6).toString('hex')}`;
    const done: RunOutcome = { result: 'no_change', exitReason: 'agent' } as RunOutcome;
    let refused: string[] = [];
    const h = harness({
      issue: async (ctx) => {
        ctx.recorder.warning(`the cache at redis://127.0.0.1:6380 wants ${password}`);
        refused = ctx.scanner().findings(`+${password}`);
        return done;
      },
    });
    await runQueuedJob(queued(issueJob), { ...h.deps, processSecrets: [password] });
    assert.deepEqual(refused, ['a secret value held by this process']);
    const store = h.deps.runStore;
    const [run] = await store.list();
    const view = JSON.stringify((await store.load(run!.runId))?.view);
    assert.match(view, /wants \[REDACTED\]/);
    assert.ok(!view.includes(password));
  });

  test('a follow-up runs the follow-up kind with its job id; the diff of a revision stays out of the queue', async () => {
    const revised: RunOutcome = { result: 'revised', number: 9, url: 'u', sha: 'abc', commitUrl: 'c', incomplete: false, exitReason: 'agent', threads: 1, diff: Buffer.from('diff') };
    const h = harness({ followup: async (ctx, jobId) => ((h.calls.push(`followup:${ctx.job.pullNumber}:${jobId}`), revised)) });
    const outcome = await runQueuedJob(queued(followupJob, { id: 'fu-42-9-1' }), h.deps);
    assert.deepEqual(h.calls, ['followup:9:fu-42-9-1']);
    assert.equal((outcome as { diff?: Buffer }).diff, undefined);
    assert.deepEqual(h.statuses.map((s) => s.state), ['revised']);
  });

  test('a cancel that arrived while the job was queued: cancelled by whoever asked, the spine never runs', async () => {
    const h = harness({});
    await h.cancelBus.request({ jobId: 'run-42-7', by: 'alice', why: 'not needed', at: new Date().toISOString() } as never);
    const outcome = await runQueuedJob(queued(issueJob), h.deps);
    assert.deepEqual(outcome, { result: 'cancelled' });
    assert.deepEqual(h.statuses, [{ state: 'cancelled', by: 'alice', why: 'not needed' }]);
    assert.equal(await h.cancelBus.pending('run-42-7'), null, 'the request is cleared');
  });

  test('a cancel while running: the signal carries who asked; the status says so and the queue gets cancelled', async () => {
    const h = harness({
      issue: async (ctx) => {
        run.cancel(`cancel:${JSON.stringify({ jobId: run.id, by: 'bob', why: 'wrong issue', at: new Date().toISOString() })}`);
        throw new CancelledError(String(ctx.signal.reason));
      },
    });
    const run = queued(issueJob);
    assert.deepEqual(await runQueuedJob(run, h.deps), { result: 'cancelled' });
    assert.deepEqual(h.statuses, [{ state: 'cancelled', by: 'bob', why: 'wrong issue' }]);
    assert.equal(await summaryOutcome(h.prefix), 'cancelled');
  });

  test('the whole-job deadline: failed, saying which limit and what to do; the queue must not retry it', async () => {
    const h = harness({
      issue: async () => {
        run.cancel(JOB_DEADLINE);
        throw new CancelledError('deadline');
      },
    });
    const run = queued(issueJob);
    await assert.rejects(runQueuedJob(run, h.deps), FinalFailure);
    assert.equal(h.statuses[0]?.state, 'failed');
    assert.match(JSON.stringify(h.statuses[0]), /longer than 240 minutes \(LILYPAD_JOB_MAX_MINUTES\)/);
  });

  test('a worker stopping hands the job back (queued again, with a note); a lost lock writes no status at all', async () => {
    const stop = harness({
      issue: async () => {
        a.cancel(SHUTDOWN);
        throw new CancelledError('shutdown');
      },
    });
    const a = queued(issueJob);
    await assert.rejects(runQueuedJob(a, stop.deps), HandBack);
    assert.deepEqual(stop.statuses.map((s) => s.state), ['queued']);
    assert.match(JSON.stringify(stop.statuses[0]), /A worker stopped/);
    const lost = harness({
      issue: async () => {
        b.cancel(LOST_LOCK);
        throw new CancelledError('lost');
      },
    });
    const b = queued(issueJob);
    await assert.rejects(runQueuedJob(b, lost.deps), LostClaim);
    assert.deepEqual(lost.statuses, []);
    assert.equal(await summaryOutcome(lost.prefix), 'failed');
  });

  test('a stale trigger ends as cancelled, saying why', async () => {
    const h = harness({ issue: async () => ({ result: 'stale', why: 'the label was removed before the job started.' }) });
    assert.equal((await runQueuedJob(queued(issueJob), h.deps)).result, 'stale');
    assert.deepEqual(h.statuses, [{ state: 'cancelled', why: 'the label was removed before the job started.' }]);
  });

  test('an infrastructure failure is retried while attempts are left (queued, with why), then fails for good', async () => {
    const unreachable = () => Promise.reject(new GitError('git fetch failed: Could not resolve host: ghe.example'));
    const first = harness({ issue: unreachable });
    await assert.rejects(runQueuedJob(queued(issueJob, { attempt: 1, attempts: 3 }), first.deps), GitError);
    assert.deepEqual(first.statuses.map((s) => s.state), ['queued']);
    assert.match(JSON.stringify(first.statuses[0]), /Retrying after an infrastructure problem: git could not reach GitHub/);
    const last = harness({ issue: unreachable });
    await assert.rejects(runQueuedJob(queued(issueJob, { attempt: 3, attempts: 3 }), last.deps), FinalFailure);
    assert.deepEqual(last.statuses.map((s) => s.state), ['failed']);
  });

  test('the repository\'s problems fail at once with what to do: a bad configuration, a failing setup command; an unexpected error says to tell the administrator', async () => {
    const cases: Array<[Error, RegExp]> = [
      [new UserError('`.github/lilypad.yml` is not valid', 'fix the file'), /"todo":"fix the file"/],
      [new SetupError('make deps', { command: 'make deps', outcome: 'failed', exitCode: 2, durationMs: 5, counts: null, outputTail: 'no rule to make target deps' }), /failed \(exit 2\).*no rule to make target deps/],
      [new TypeError('x is undefined'), /an unexpected error: x is undefined.*tell the Lilypad administrator/],
    ];
    for (const [err, expected] of cases) {
      const h = harness({ issue: () => Promise.reject(err) });
      await assert.rejects(runQueuedJob(queued(issueJob, { attempt: 1, attempts: 3 }), h.deps), FinalFailure);
      assert.deepEqual(h.statuses.map((s) => s.state), ['failed'], err.message);
      assert.match(JSON.stringify(h.statuses[0]), expected);
    }
  });
});
