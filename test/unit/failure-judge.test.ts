import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type Docker from 'dockerode';
import pino from 'pino';
import { loadEnv } from '../../src/config/env.ts';
import type { GitHubApp } from '../../src/github/app-auth.ts';
import type { StatusState } from '../../src/github/status-comment.ts';
import type { RunStore } from '../../src/observability/run-store.ts';
import { FinalFailure, runQueuedJob, type QueuedRun, type RunnerDeps } from '../../src/pipeline/job-runner.ts';
import { runLocal } from '../../src/pipeline/local-run.ts';
import { runSettingsFromEnv } from '../../src/pipeline/run-context.ts';
import { SandboxSlots } from '../../src/pipeline/sandbox-slots.ts';
import { SetupError } from '../../src/pipeline/sandbox-session.ts';
import type { SpineStages } from '../../src/pipeline/spine.ts';
import type { CancelBus } from '../../src/store/cancel-bus.ts';
import type { RunJob } from '../../src/store/jobs.ts';
import type { RunQueue } from '../../src/store/run-queue.ts';

// One failure, one judge: a failing setup command reads the same in the app's status comment and in
// `lilypad run`'s result (what went wrong, what to do, whose it is), with every service faked.
const env = loadEnv({ LILYPAD_QUEUE_PREFIX: 'lilypadtest_judge', LOG_LEVEL: 'silent' });
const setupFailure = () =>
  new SetupError('make deps', { command: 'make deps', outcome: 'failed', exitCode: 2, durationMs: 5, counts: null, outputTail: 'make: *** No rule to make target `deps`.  Stop.' });

async function throughTheApp(err: Error): Promise<StatusState[]> {
  const statuses: StatusState[] = [];
  const job: RunJob = { kind: 'issue', installationId: 1, repoId: 42, owner: 'acme', repo: 'calc', issueNumber: 7, triggeredBy: 'maintainer', trigger: 'label', label: 'lilypad', deliveryId: 'd-1', queuedAt: new Date().toISOString() };
  const recorder = { finish: async () => undefined, task: () => undefined, config: () => undefined, phase: () => undefined, step: () => undefined, tests: () => undefined, warning: () => undefined };
  const deps: RunnerDeps = {
    env,
    github: { installation: async () => ({}), opts: { privateKey: 'not-a-key' } } as unknown as GitHubApp,
    docker: {} as Docker,
    redis: { set: async () => 'OK' } as unknown as RunnerDeps['redis'],
    logger: pino({ level: 'silent' }),
    workerId: 'worker-1',
    setupNetwork: null,
    sandboxSlots: new SandboxSlots(1),
    envCache: null,
    extraCaPem: null,
    labels: {},
    status: { set: async (_client, _ref, state) => void statuses.push(state) },
    cancelBus: { pending: async () => null, clear: async () => undefined } as unknown as CancelBus,
    runStore: { recorder: () => recorder } as unknown as RunStore,
    runs: {} as RunQueue,
    background: () => undefined,
    kinds: { issue: async () => Promise.reject(err), followup: async () => Promise.reject(err) },
  };
  const run: QueuedRun = { id: 'job-1', data: job, attempt: 1, attempts: 3, signal: new AbortController().signal, holdsJob: async () => true, cancel: () => undefined };
  await assert.rejects(runQueuedJob(run, deps), FinalFailure);
  return statuses;
}

async function throughLilypadRun(err: Error): Promise<{ error?: string; todo?: string; error_kind?: string; outcome: string }> {
  const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-judge-'));
  const repo = mkdtempSync(path.join(os.tmpdir(), 'lilypad-judge-repo-'));
  const fail = async () => Promise.reject(err);
  const stages: SpineStages = { attempts: fail, change: fail };
  await runLocal({
    repo,
    title: 'fix add',
    body: '',
    overrides: {},
    settings: runSettingsFromEnv(env),
    outDir: out,
    docker: {} as Docker,
    checkout: async () => ({ dir: repo, baseCommit: 'a'.repeat(40), sourceDirty: false, dispose: async () => undefined }),
    instructions: false,
    stages,
  });
  return JSON.parse(readFileSync(path.join(out, 'result.json'), 'utf8'));
}

test('a failing setup command is judged once: the status comment and result.json say the same thing', async () => {
  const [status] = await throughTheApp(setupFailure());
  const local = await throughLilypadRun(setupFailure());
  assert.ok(status && status.state === 'failed', JSON.stringify(status));
  assert.equal(local.outcome, 'failed');
  assert.equal(local.error, status.what);
  assert.equal(local.todo, status.todo);
  assert.equal(local.error_kind, 'user');
  assert.match(status.what, /^the setup command `make deps` failed \(exit 2\), so the run stopped before the tests and the agent/);
  assert.match(status.what, /No rule to make target/);
  assert.match(status.todo, /fix the `setup` commands/);
});

test('any other failure is judged the same way too: the same words in both places', async () => {
  const [status] = await throughTheApp(new TypeError('x is undefined'));
  const local = await throughLilypadRun(new TypeError('x is undefined'));
  assert.ok(status && status.state === 'failed');
  assert.equal(local.error, status.what);
  assert.equal(local.todo, status.todo);
  assert.equal(local.error_kind, 'infrastructure');
});
