import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createDockerClient } from '../../src/sandbox/sandbox.ts';
import { CALC_REPO } from '../support/fixture-repo.ts';
import { startApp, titleOf, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';
import type { GitHubStandin } from '../support/github-standin/index.ts';

// Several app processes on one Redis prefix and one GitHub stand-in: `lilypad web` takes the
// webhooks, two `lilypad worker`s take the jobs; a worker stopped mid-run hands its job back; a
// transient GitHub failure is retried.

const docker = createDockerClient();
const OWNER = 'scaleco'; // not `acme`: github-app.test.ts may run at the same time and labels its containers by issue
const CONFIG = 'test: python3 -m unittest -q\n';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const FIXED_CALC = 'def add(a, b):\n    return a + b\n';

const FIX_CALC = [
  { toolCalls: [{ name: 'Read', arguments: '{"file_path": "calc.py"}' }] },
  { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
  { content: 'Fixed `add()` so it returns the sum.' },
];

/** Whether the model still hangs for the SIGTERM test's issue (the second worker gets a model that completes). */
let handBackHangs = true;

const book: ScriptBook = {
  'Split roles fix add': FIX_CALC,
  'Cancel me across processes': () => ({ hang: true }),
  'Handed back on SIGTERM': (turn) => (handBackHangs ? { hang: true } : (FIX_CALC[turn] ?? { content: 'done' })),
  'GitHub hiccups while minting': FIX_CALC,
};

interface LogLine {
  msg?: string;
  job?: string;
  [key: string]: unknown;
}

function logLines(app: AppHarness): LogLine[] {
  const out: LogLine[] = [];
  for (const line of app.logs().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as LogLine);
    } catch {
      /* a partial line */
    }
  }
  return out;
}

const logged = (app: AppHarness, msg: string, jobId: string) => logLines(app).some((l) => l.msg === msg && l.job === jobId);

const exitOf = (app: AppHarness, timeoutMs: number) =>
  new Promise<number | null | 'timeout'>((resolve) => {
    if (app.proc.exitCode !== null) return resolve(app.proc.exitCode);
    const timer = setTimeout(() => resolve('timeout'), timeoutMs);
    app.proc.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });

/** Waits for a job to reach `completed` (the status comment is written just before the worker returns). */
async function jobEnds(queue: Queue, jobId: string): Promise<void> {
  let state: string | undefined;
  await waitFor(async () => (state = await (await queue.getJob(jobId))?.getState()) === 'completed', `job ${jobId} to complete`, 10_000).catch((err: Error) => {
    throw new Error(`${err.message} (state: ${state})`);
  });
}

describe('GitHub App across processes (web and workers sharing one Redis prefix)', () => {
  let web: AppHarness;
  let w1: AppHarness;
  let w2: AppHarness;
  let gh: GitHubStandin;
  const extra: AppHarness[] = [];
  const prefixes = new Set<string>();
  const repoIds = new Map<string, number>();
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queues: Queue[] = [];
  const runsQueue = (prefix: string) => {
    const q = new Queue('runs', { connection: redis, prefix });
    queues.push(q);
    return q;
  };

  const newIssue = (repo: string, title: string) => gh.createIssue(OWNER, repo, { title, body: 'See title.', author: 'alice' }).number;
  const jobIdOf = (repo: string, n: number) => `run-${repoIds.get(repo)}-${n}`;
  const status = (repo: string, n: number) => gh.comments(OWNER, repo, n).find((c) => c.body.startsWith('<!-- lilypad:status -->'));
  const statusHistory = (repo: string, n: number) => {
    const c = status(repo, n);
    return c ? [...c.edits, c.body] : [];
  };
  const statusSays = (repo: string, n: number, re: RegExp, timeoutMs = 90_000) =>
    waitFor(() => re.test(status(repo, n)?.body ?? ''), `status of ${repo}#${n} to match ${re} (now: ${status(repo, n)?.body ?? 'none'})`, timeoutMs);
  const containersFor = (repo: string, n: number) => docker.listContainers({ all: true, filters: { label: [`dev.lilypad.issue=${OWNER}/${repo}#${n}`] } });
  const prsFor = (repo: string, n: number) => gh.pulls(OWNER, repo).filter((p) => p.head.ref === `lilypad/issue-${n}`);
  const chatsFor = (title: string) => web.model.chatRequests().filter((b) => titleOf(b) === title);
  const worker = (n: number, share: { prefix: string }) =>
    startApp({ book, role: 'worker', share: { gh, model: web.model, prefix: share.prefix }, env: { LILYPAD_WORKER_ID: `${share.prefix}-w${n}` } });

  before(async () => {
    web = await startApp({ book, role: 'web' });
    gh = web.gh;
    prefixes.add(web.prefix);
    [w1, w2] = await Promise.all([worker(1, web), worker(2, web)]);
    gh.createInstallation({ login: OWNER, type: 'Organization' });
    gh.createUser('alice');
    for (const repo of ['calc', 'flaky']) {
      repoIds.set(repo, gh.createRepo(OWNER, repo, { files: { ...CALC_REPO, '.github/lilypad.yml': CONFIG } }).id);
      gh.addCollaborator(OWNER, repo, 'alice', 'maintain');
    }
  });

  after(async () => {
    // Workers first: the web harness owns the stand-in and the model server they talk to.
    for (const app of [...extra, w1, w2]) await app?.stop().catch(() => undefined);
    await web?.stop().catch(() => undefined);
    for (const q of queues) await q.close().catch(() => undefined);
    for (const prefix of prefixes) {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
    }
    redis.disconnect();
    const left = await docker.listContainers({ all: true, filters: { label: ['dev.lilypad.issue'] } });
    for (const c of left.filter((c) => (c.Labels['dev.lilypad.issue'] ?? '').startsWith(`${OWNER}/`))) {
      await docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined);
    }
  });

  test('lilypad web and two lilypad workers on one prefix: a label sent to the web process ends in one draft pull request', async () => {
    assert.ok(!web.logs().includes('worker started'), 'the web process runs no worker');
    const n = newIssue('calc', 'Split roles fix add');
    const res = await web.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    assert.equal(res.status, 200);
    await statusSays('calc', n, /Done/);

    const [pr, ...others] = prsFor('calc', n);
    assert.ok(pr, 'a pull request was opened');
    assert.equal(others.length, 0);
    assert.equal(pr.draft, true);
    assert.equal(pr.base.ref, 'main');
    assert.match(pr.title, /Split roles fix add/);
    assert.match(pr.body ?? '', /\*\*After the change:\*\* ✅ passed/);
    assert.match(pr.body ?? '', /Closes #\d+$/);
    assert.equal(gh.readFile(OWNER, 'calc', `lilypad/issue-${n}`, 'calc.py'), FIXED_CALC);
    assert.equal(gh.comments(OWNER, 'calc', n).filter((c) => c.body.includes('lilypad:status')).length, 1, 'one status comment');
    const history = statusHistory('calc', n).join('\n');
    for (const state of ['Queued', 'Running', 'Done']) assert.match(history, new RegExp(state));

    // Exactly one of the two workers ran it; the web process ran nothing.
    const jobId = jobIdOf('calc', n);
    // The status says Done just before the worker logs the outcome.
    await waitFor(() => [w1, w2].some((w) => logged(w, 'job finished', jobId)), 'a worker to log the outcome', 10_000);
    const ranOn = [w1, w2].filter((w) => logged(w, 'job finished', jobId));
    assert.equal(ranOn.length, 1, 'one worker finished the job');
    assert.ok(!logged(web, 'job finished', jobId));
    assert.equal(chatsFor('Split roles fix add').filter((b) => b.messages.length === 2).length, 1, 'one run');
    assert.equal((await containersFor('calc', n)).length, 0, 'the sandbox is gone');
  });

  test('/lilypad cancel sent to the web process stops the job on whichever worker runs it', async () => {
    const n = newIssue('calc', 'Cancel me across processes');
    await web.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => chatsFor('Cancel me across processes').length > 0, 'the agent to call the model', 90_000);

    // Which worker runs it: the container's instance label is `<worker id>-<pid>-<time>`.
    // The agent's sandbox (a kept environment's baseline may run beside it, in a sandbox of its own).
    const [container, ...more] = (await containersFor('calc', n)).filter((c) => !(c.Labels['dev.lilypad.run'] ?? '').endsWith('-baseline'));
    assert.ok(container, 'a sandbox runs');
    assert.equal(more.length, 0);
    const instance = container.Labels['dev.lilypad.instance'] ?? '';
    const runner = [w1, w2].find((w) => instance.includes(`-${w.proc.pid}-`));
    assert.ok(runner, `the sandbox belongs to one of the worker processes (instance ${instance})`);

    const t = Date.now();
    await web.send('issue_comment', gh.commentOnIssue(OWNER, 'calc', n, '/lilypad cancel', 'alice'));
    await statusSays('calc', n, /Cancelled\*\* by @alice/, 15_000);
    await waitFor(async () => (await containersFor('calc', n)).length === 0, 'the sandbox to be removed', 15_000);
    assert.ok(Date.now() - t < 15_000, `within seconds (took ${Date.now() - t} ms)`);
    await waitFor(() => logged(runner, 'job cancelled', jobIdOf('calc', n)), 'the worker that ran it to log the cancel', 10_000);
    assert.equal(prsFor('calc', n).length, 0);
    assert.equal(gh.branchSha(OWNER, 'calc', `lilypad/issue-${n}`), null);
    await jobEnds(runsQueue(web.prefix), jobIdOf('calc', n)); // as cancelled: not left active, not retried
    assert.deepEqual((await runsQueue(web.prefix).getJob(jobIdOf('calc', n)))?.returnvalue, { result: 'cancelled' });
  });

  test('SIGTERM to a worker mid-run hands the job back; a new worker on the same prefix finishes it', async () => {
    handBackHangs = true;
    // Its own prefix, so the two workers above cannot take the handed-back job.
    const first = await startApp({ book, role: 'start', share: { gh, model: web.model } });
    extra.push(first);
    prefixes.add(first.prefix);
    const queue = runsQueue(first.prefix);

    const tokensBefore = new Set(gh.tokens().map((tk) => tk.token));
    const n = newIssue('calc', 'Handed back on SIGTERM');
    const jobId = jobIdOf('calc', n);
    await first.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => chatsFor('Handed back on SIGTERM').length > 0, 'the agent to call the model', 90_000);
    assert.ok((await containersFor('calc', n)).length >= 1, 'the sandbox (and a kept environment\'s baseline) while the agent runs');
    assert.equal(await (await queue.getJob(jobId))?.getState(), 'active');

    const t = Date.now();
    first.proc.kill('SIGTERM');
    const code = await exitOf(first, 30_000);
    assert.equal(code, 0, `the process exits with 0 within 30 s (got ${code} after ${Date.now() - t} ms)\n${first.logs().slice(-3000)}`);
    assert.equal((await containersFor('calc', n)).length, 0, 'its sandbox is gone');
    // The run's repository token was given up on the way out (DELETE /installation/token).
    const scoped = gh.tokens().filter((tk) => !tokensBefore.has(tk.token) && tk.repositories?.length === 1 && tk.repositories[0] === 'calc');
    assert.equal(scoped.length, 1, 'one repository token for the interrupted run');
    assert.ok(
      gh.requests.some((r) => r.method === 'DELETE' && r.path.startsWith('/api/v3/installation/token') && r.token === scoped[0]!.token),
      'the interrupted run revoked its repository token',
    );
    const state = await (await queue.getJob(jobId))?.getState();
    assert.ok(state === 'delayed' || state === 'waiting', `the job is back in the queue (state: ${state})`);
    assert.match(status('calc', n)?.body ?? '', /Queued.*it will start again/);
    assert.equal(prsFor('calc', n).length, 0);

    handBackHangs = false;
    const second = await worker(3, first);
    extra.push(second);
    await statusSays('calc', n, /Done/);
    const [pr, ...others] = prsFor('calc', n);
    assert.ok(pr, 'a pull request was opened');
    assert.equal(others.length, 0);
    assert.equal(pr.draft, true);
    assert.equal(gh.readFile(OWNER, 'calc', `lilypad/issue-${n}`, 'calc.py'), FIXED_CALC);
    await waitFor(() => logged(second, 'job finished', jobId), 'the new worker to log the outcome', 10_000);
    await jobEnds(queue, jobId);
    assert.equal(chatsFor('Handed back on SIGTERM').filter((b) => b.messages.length === 2).length, 2, 'two runs from the start');
    assert.equal((await containersFor('calc', n)).length, 0);
  });

  test('a transient GitHub failure (502 minting the repository token) is retried and ends in a pull request', async () => {
    const n = newIssue('flaky', 'GitHub hiccups while minting');
    const saidRetrying = () => statusHistory('flaky', n).some((s) => /Retrying/.test(s));
    // Every mint of a token for this repository fails (Octokit's own retries included) until the
    // job has given up once and said it will retry: independent of how often Octokit retries.
    const fault = gh.failApiRequests({
      status: 502,
      times: Number.POSITIVE_INFINITY,
      match: ({ method, path, body }) =>
        method === 'POST' &&
        /^\/app\/installations\/\d+\/access_tokens$/.test(path) &&
        Array.isArray((body as { repositories?: unknown })?.repositories) &&
        (body as { repositories: string[] }).repositories.includes('flaky') &&
        !saidRetrying(),
    });
    try {
      await web.send('issues', gh.labelIssue(OWNER, 'flaky', n, 'lilypad', 'alice'));
      await statusSays('flaky', n, /Done|Failed/, 90_000);
    } finally {
      fault.remove();
    }
    assert.ok(fault.hits >= 1, 'the fault was hit');
    const history = statusHistory('flaky', n).join('\n---\n');
    assert.match(history, /Queued.*Retrying after an infrastructure problem: GitHub answered HTTP 502/);
    assert.doesNotMatch(history, /Failed/);
    assert.match(status('flaky', n)!.body, /Done/);
    const [pr, ...others] = prsFor('flaky', n);
    assert.ok(pr, 'a pull request was opened');
    assert.equal(others.length, 0);
    assert.equal(gh.readFile(OWNER, 'flaky', `lilypad/issue-${n}`, 'calc.py'), FIXED_CALC);
    await jobEnds(runsQueue(web.prefix), jobIdOf('flaky', n));
    const job = await runsQueue(web.prefix).getJob(jobIdOf('flaky', n));
    assert.equal(job?.attemptsMade, 2, 'the second attempt succeeded');
    assert.equal((await containersFor('flaky', n)).length, 0);
  });
});
