/**
 * Workers that die and queue data that is lost: the real processes (`lilypad web`, `lilypad
 * worker`) against the GitHub stand-in, the scripted model server, real Redis and Docker.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before } from 'node:test';
import { Redis } from 'ioredis';
import { createDockerClient } from '../../../src/sandbox/sandbox.ts';
import { startApp, titleOf, waitFor, type AppHarness, type ScriptBook } from '../../support/app-harness.ts';
import { startGitHubStandin, type GitHubStandin } from '../../support/github-standin/index.ts';
import { faultTest } from '../../support/fault-table.ts';
import { CALC_REPO } from '../../support/fixture-repo.ts';
import { FIX_ADD_SCRIPT, hangOnce } from '../../support/fault-scripts.ts';

const OWNER = 'acme';
const docker = createDockerClient();
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 3 });
const FIX = FIX_ADD_SCRIPT;
const book: ScriptBook = { 'Worker killed': hangOnce(), 'Queue data lost': hangOnce(), 'Killed before its pull request': FIX };

let gh: GitHubStandin;
let web: AppHarness;
const extra: AppHarness[] = [];
const status = (n: number) => gh.comments(OWNER, 'calc', n).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? '';
const prsFor = (n: number) => gh.pulls(OWNER, 'calc').filter((p) => p.head.ref.startsWith(`lilypad/issue-${n}`));
const containersOf = async (prefix: string) => (await docker.listContainers({ all: true, filters: { label: [`dev.lilypad.prefix=${prefix}`, 'dev.lilypad.run'] } })).length;
/**
 * Scaled: a job lock of 6 s instead of 60 s (a killed worker's job comes back once its lock has
 * lapsed and the stalled check, every half lock, sees it) and a heartbeat of 3 s instead of 15 s
 * (a dead instance's leftovers are swept every four beats, after its beat has expired).
 */
const SCALED = { LILYPAD_JOB_LOCK_SECONDS: '6', LILYPAD_HEARTBEAT_SECONDS: '3' };
const worker = async (id: string, env: Record<string, string> = {}) => {
  const w = await startApp({ book, role: 'worker', share: { gh, model: web.model, prefix: web.prefix }, env: { LILYPAD_WORKER_ID: id, ...SCALED, ...env } });
  extra.push(w);
  return w;
};

before(async () => {
  gh = await startGitHubStandin({ appSlug: 'lilypad' });
  web = await startApp({ book, role: 'web', share: { gh } });
  gh.createInstallation({ login: OWNER, type: 'Organization' });
  gh.createUser('alice');
  gh.createRepo(OWNER, 'calc', { files: { ...CALC_REPO, '.github/lilypad.yml': 'test: python3 -m unittest -q\n' } });
  gh.addCollaborator(OWNER, 'calc', 'alice', 'maintain');
});
after(async () => {
  for (const w of extra) await w.stop('SIGTERM').catch(() => undefined);
  // Sandboxes of the workers killed on purpose, should a test have failed before the sweep ran.
  for (const c of await docker.listContainers({ all: true, filters: { label: [`dev.lilypad.prefix=${web.prefix}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  }
  await web?.stop();
  await gh?.close();
  redis.disconnect();
});

faultTest(
  '`kill -9` of a worker mid-agent, then a worker under a new host name on the same data dir',
  "one pull request; the dead worker's sandbox and temp dir are removed",
  async () => {
    const first = await worker('host-a');
    const n = gh.createIssue(OWNER, 'calc', { title: 'Worker killed', body: 'add is wrong', author: 'alice' }).number;
    await web.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => web.model.chatRequests().some((b) => titleOf(b) === 'Worker killed'), 'the agent to start', 60_000);
    const deadTmp = path.join(first.dataDir, 'tmp');
    await first.stop('SIGKILL');
    const left = await containersOf(web.prefix);
    const started = Date.now();
    // Same data dir, another host name: the sweep must find the dead instance by its heartbeat.
    await worker('host-b', { LILYPAD_DATA_DIR: first.dataDir });
    await waitFor(() => /Done/.test(status(n)), 'the job to finish on the new worker', 240_000);
    const prAfter = Math.round((Date.now() - started) / 1000);
    const tmpDirs = () => (existsSync(deadTmp) ? readdirSync(deadTmp).length : 0);
    await waitFor(async () => (await containersOf(web.prefix)) === 0 && tmpDirs() === 1, 'the dead sandbox and temp dir to be swept', 150_000);
    const tmpLeft = tmpDirs();
    const prs = prsFor(n).length;
    return {
      observed: `${left} sandbox left by the killed worker; PR after ${prAfter} s, swept after ${Math.round((Date.now() - started) / 1000)} s (lock ${SCALED.LILYPAD_JOB_LOCK_SECONDS} s, heartbeat ${SCALED.LILYPAD_HEARTBEAT_SECONDS} s); ${prs} pull request(s); sandboxes left: 0; temp dirs left: ${tmpLeft - 1} besides the live worker's`,
      pass: prs === 1 && tmpLeft === 1,
    };
  },
  { timeout: 400_000 },
);

faultTest(
  "the queue's data is lost from Redis mid-run (every key of the installation's prefix deleted), then a worker restarts",
  'the reconcile sweep sees a status that says running with no job behind it and queues the job again, once, saying so; one pull request',
  async () => {
    const w = await worker('host-c');
    const n = gh.createIssue(OWNER, 'calc', { title: 'Queue data lost', body: 'add is wrong', author: 'alice' }).number;
    await web.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => web.model.chatRequests().some((b) => titleOf(b) === 'Queue data lost'), 'the agent to start', 60_000);
    await w.stop('SIGKILL');
    const keys = await redis.keys(`${web.prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await worker('host-d', { LILYPAD_RECONCILE_SECONDS: '2' });
    await waitFor(() => /Done/.test(status(n)), 'the recovered job to finish', 240_000);
    const sawNote = gh.comments(OWNER, 'calc', n).some((c) => c.edits.some((h) => /lost track of this job/.test(h)));
    const prs = prsFor(n).length;
    return { observed: `${keys.length} keys deleted; recovered with a note: ${sawNote}; ${prs} pull request(s)`, pass: prs === 1 && sawNote };
  },
  { timeout: 400_000 },
);

faultTest(
  'SIGKILL of the worker between its push and `POST /pulls`, then another worker',
  'the retry recognises the pushed branch as its own (lease against the recorded commit): one pull request, on lilypad/issue-N',
  async () => {
    // The workers of the rows above would take the job as well: only the one killed may run it.
    for (const x of extra.splice(0)) await x.stop('SIGTERM').catch(() => undefined);
    const w = await worker('host-e');
    const n = gh.createIssue(OWNER, 'calc', { title: 'Killed before its pull request', body: 'add is wrong', author: 'alice' }).number;
    let killed = false;
    const fault = gh.failApiRequests({
      status: 502,
      times: 1,
      match: ({ method, path: p }) => {
        if (killed || method !== 'POST' || !/\/repos\/acme\/calc\/pulls$/.test(p)) return false;
        killed = true;
        w.proc.kill('SIGKILL');
        return true;
      },
    });
    try {
      await web.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
      await waitFor(() => killed, 'the worker to reach POST /pulls', 120_000);
      const pushed = gh.branchSha(OWNER, 'calc', `lilypad/issue-${n}`);
      const started = Date.now();
      await worker('host-f');
      // The dead worker held the publish lock: the retry waits for it no longer than for the job lock.
      await waitFor(() => /Done/.test(status(n)), 'the retried job to finish', 120_000);
      const prs = prsFor(n);
      return {
        observed: `branch pushed before the kill: ${pushed ? 'yes' : 'no'}; after the retry (${Math.round((Date.now() - started) / 1000)} s, lock ${SCALED.LILYPAD_JOB_LOCK_SECONDS} s) ${prs.length} pull request(s) on ${prs.map((p) => p.head.ref).join(', ')}`,
        pass: pushed !== null && prs.length === 1 && prs[0]!.head.ref === `lilypad/issue-${n}`,
      };
    } finally {
      fault.remove();
    }
  },
  { timeout: 400_000 },
);
