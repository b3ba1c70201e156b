/**
 * Redis in trouble while jobs run: paused past the job lock (SIGSTOP of the server), and shut down
 * without saving. The real processes (`lilypad web`, two `lilypad worker`s) run against a
 * redis-server of this test's own, the GitHub stand-in, the scripted model server and Docker.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before } from 'node:test';
import { createDockerClient } from '../../../src/sandbox/sandbox.ts';
import { startApp, titleOf, waitFor, type AppHarness, type ScriptBook } from '../../support/app-harness.ts';
import { startGitHubStandin, type GitHubStandin } from '../../support/github-standin/index.ts';
import { faultTest } from '../../support/fault-table.ts';
import { CALC_REPO } from '../../support/fixture-repo.ts';
import { FIX_ADD_SCRIPT, hangOnce } from '../../support/fault-scripts.ts';
import { startPrivateRedis, type PrivateRedis } from '../../support/private-redis.ts';

const OWNER = 'acme';
/** The job lock, scaled down from the default 60 s so that a pause past it takes seconds. */
const LOCK_S = 4;
const PAUSE_MS = LOCK_S * 1000 * 3;
const docker = createDockerClient();
const FIX = FIX_ADD_SCRIPT;
const book: ScriptBook = { 'Paused mid-agent': hangOnce(), 'Paused while publishing': FIX, 'Redis shut down': hangOnce() };

let redis: PrivateRedis;
let gh: GitHubStandin;
let web: AppHarness;
const workers: AppHarness[] = [];
const pushLog = () => path.join(gh.gitRoot, 'pushes.log');
const status = (n: number) => gh.comments(OWNER, 'calc', n).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? '';
const prsFor = (n: number) => gh.pulls(OWNER, 'calc').filter((p) => p.head.ref.startsWith(`lilypad/issue-${n}`));
/** Every ref update the server accepted for this issue's branches (a post-receive hook writes them). */
const pushesFor = (n: number) =>
  (existsSync(pushLog()) ? readFileSync(pushLog(), 'utf8') : '')
    .split('\n')
    .filter((l) => new RegExp(`refs/heads/lilypad/issue-${n}(-\\d+)?$`).test(l));
const lostLockLogged = () => workers.some((w) => /lost the job lock/.test(w.logs()));

before(async () => {
  redis = await startPrivateRedis();
  gh = await startGitHubStandin({ appSlug: 'lilypad' });
  const env = { REDIS_URL: redis.url, LILYPAD_JOB_LOCK_SECONDS: String(LOCK_S) };
  web = await startApp({ book, role: 'web', share: { gh }, env });
  gh.createInstallation({ login: OWNER, type: 'Organization' });
  gh.createUser('alice');
  gh.createRepo(OWNER, 'calc', { files: { ...CALC_REPO, '.github/lilypad.yml': 'test: python3 -m unittest -q\n' } });
  gh.addCollaborator(OWNER, 'calc', 'alice', 'maintain');
  // Count what reaches the server, whoever pushed it.
  const hook = path.join(gh.gitRoot, OWNER, 'calc.git', 'hooks', 'post-receive');
  writeFileSync(hook, `#!/bin/sh\nwhile read old new ref; do echo "$old $new $ref" >> '${pushLog()}'; done\n`);
  chmodSync(hook, 0o755);
  for (const id of ['host-a', 'host-b']) {
    workers.push(await startApp({ book, role: 'worker', share: { gh, model: web.model, prefix: web.prefix }, env: { ...env, LILYPAD_WORKER_ID: id, LILYPAD_RECONCILE_SECONDS: '2' } }));
  }
});
after(async () => {
  redis?.resume();
  for (const w of workers) await w.stop('SIGTERM').catch(() => undefined);
  await web?.stop();
  for (const c of await docker.listContainers({ all: true, filters: { label: [`dev.lilypad.prefix=${web?.prefix}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  }
  await gh?.close();
  await redis?.close();
});

faultTest(
  `Redis paused (SIGSTOP) past the job lock while a worker is mid-agent (scaled: lock ${LOCK_S} s instead of 60 s, paused ${PAUSE_MS / 1000} s), two workers`,
  'the worker whose lock lapsed stops its copy; the job runs once more and only one worker publishes: one push, one pull request',
  async () => {
    const n = gh.createIssue(OWNER, 'calc', { title: 'Paused mid-agent', body: 'add is wrong', author: 'alice' }).number;
    await web.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => web.model.chatRequests().some((b) => titleOf(b) === 'Paused mid-agent'), 'the agent to start', 120_000);
    redis.pause();
    const resumeAt = Date.now() + PAUSE_MS;
    await waitFor(() => Date.now() >= resumeAt, 'the pause to last past the lock', PAUSE_MS + 1000);
    redis.resume();
    await waitFor(() => /Done|Failed/.test(status(n)), 'the job to finish', 240_000);
    await waitFor(async () => (await docker.listContainers({ all: true, filters: { label: [`dev.lilypad.prefix=${web.prefix}`, 'dev.lilypad.run'] } })).length === 0, 'the sandboxes to be removed', 60_000);
    const pushes = pushesFor(n).length;
    const prs = prsFor(n).length;
    return {
      observed: `a worker logged that it lost the job lock: ${lostLockLogged()}; ${pushes} push(es) to lilypad/issue-${n}*; ${prs} pull request(s); status ${/Done/.test(status(n)) ? 'Done' : status(n).slice(0, 160)}`,
      pass: pushes === 1 && prs === 1 && /Done/.test(status(n)) && lostLockLogged(),
    };
  },
  { timeout: 400_000 },
);

faultTest(
  `Redis paused past the job lock right as a worker opens its pull request (scaled as above), two workers`,
  "the publishing worker finishes; the job's other copy sees the trigger already published and does not push again: one push, one pull request",
  async () => {
    const n = gh.createIssue(OWNER, 'calc', { title: 'Paused while publishing', body: 'add is wrong', author: 'alice' }).number;
    let pausedAt = 0;
    const spy = gh.failApiRequests({
      status: 500,
      times: 1,
      match: ({ method, path: p }) => {
        if (pausedAt || method !== 'POST' || p !== '/repos/acme/calc/pulls') return false;
        redis.pause();
        pausedAt = Date.now();
        return false; // the request goes through; Redis is what stops
      },
    });
    try {
      await web.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
      await waitFor(() => pausedAt > 0, 'the worker to reach POST /pulls', 120_000);
      await waitFor(() => Date.now() >= pausedAt + PAUSE_MS, 'the pause to last past the lock', PAUSE_MS + 1000);
      redis.resume();
      await waitFor(() => /Done|Failed/.test(status(n)), 'the job to finish', 120_000);
      // The copy that took the job over must have come and gone: wait until the queue has no active job.
      await waitFor(async () => (await redis.client.llen(`${web.prefix}:runs:active`)) === 0, 'no active job', 120_000);
      const chats = web.model.chatRequests().filter((b) => titleOf(b) === 'Paused while publishing').length;
      const pushes = pushesFor(n).length;
      const prs = prsFor(n).length;
      return {
        observed: `${pushes} push(es) to lilypad/issue-${n}*; ${prs} pull request(s); ${chats} model request(s) for the issue (one run makes ${FIX.length}); status ${/Done/.test(status(n)) ? 'Done' : status(n).slice(0, 160)}`,
        pass: pushes === 1 && prs === 1 && /Done/.test(status(n)),
      };
    } finally {
      spy.remove();
      redis.resume();
    }
  },
  { timeout: 400_000 },
);

faultTest(
  'Redis `SHUTDOWN NOSAVE` while a worker is mid-agent, then Redis starts again empty; no worker is restarted',
  'the workers reconnect; the worker stops its copy (its lock is gone); the reconcile sweep queues the job again, once, saying so; one pull request',
  async () => {
    const n = gh.createIssue(OWNER, 'calc', { title: 'Redis shut down', body: 'add is wrong', author: 'alice' }).number;
    await web.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => web.model.chatRequests().some((b) => titleOf(b) === 'Redis shut down'), 'the agent to start', 120_000);
    await redis.shutdownNoSave();
    await redis.restart();
    await waitFor(() => /Done|Failed/.test(status(n)), 'the recovered job to finish', 300_000);
    const sawNote = gh.comments(OWNER, 'calc', n).some((c) => c.edits.some((h) => /lost track of this job/.test(h)));
    const prs = prsFor(n).length;
    const alive = workers.every((w) => w.proc.exitCode === null);
    return {
      observed: `workers still running: ${alive}; recovered with a note: ${sawNote}; ${prs} pull request(s); ${pushesFor(n).length} push(es); status ${/Done/.test(status(n)) ? 'Done' : status(n).slice(0, 160)}`,
      pass: alive && sawNote && prs === 1 && pushesFor(n).length === 1 && /Done/.test(status(n)),
    };
  },
  { timeout: 500_000 },
);
