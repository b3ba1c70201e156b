/**
 * The Docker engine restarts under a running job. The real `lilypad start` against the GitHub
 * stand-in and the scripted model server; the engine is this machine's dockerd, stopped with
 * SIGTERM and started again with the same command line (as `.ci/run` starts it). Every container
 * on the machine stops with it, so scripts/run-faults.mjs runs this file by itself:
 */
// fault-suite: alone
import { spawn, spawnSync } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import { after, before } from 'node:test';
import { createDockerClient } from '../../../src/sandbox/sandbox.ts';
import { startApp, titleOf, waitFor, type AppHarness, type ScriptBook } from '../../support/app-harness.ts';
import { startGitHubStandin, type GitHubStandin } from '../../support/github-standin/index.ts';
import { faultTest } from '../../support/fault-table.ts';
import { CALC_REPO } from '../../support/fixture-repo.ts';

const OWNER = 'acme';
const docker = createDockerClient();
const FIX = [
  { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
  { content: 'Fixed add().' },
];
/** The first conversation's first reply waits until the engine has restarted; then it edits. */
let engineRestarted: () => void = () => undefined;
const restarted = new Promise<void>((resolve) => (engineRestarted = resolve));
let firstConversation = true;
const book: ScriptBook = {
  'Engine restarted': async (turn) => {
    if (turn === 0 && firstConversation) {
      firstConversation = false;
      await restarted;
    }
    return FIX[turn] ?? { content: 'done' };
  },
};

let gh: GitHubStandin;
let app: AppHarness;
const status = (n: number) => gh.comments(OWNER, 'calc', n).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? '';
const sandboxesOf = async (prefix: string) => (await docker.listContainers({ all: true, filters: { label: [`dev.lilypad.prefix=${prefix}`, 'dev.lilypad.run'] } })).length;

/** dockerd's pid and command line, read from /proc; null when no dockerd runs as a plain process here. */
function findDockerd(): { pid: number; argv: string[] } | null {
  const out = spawnSyncText('pgrep', ['-x', 'dockerd']).trim().split('\n').filter(Boolean);
  if (out.length !== 1) return null;
  const pid = Number(out[0]);
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  return argv.length > 0 ? { pid, argv } : null;
}

function spawnSyncText(cmd: string, args: string[]): string {
  return spawnSync(cmd, args, { encoding: 'utf8' }).stdout ?? '';
}

const engineAnswers = async () => {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
};

/** Stops dockerd (SIGTERM: it stops every container first) and starts it again the same way. */
async function restartEngine(): Promise<{ downMs: number }> {
  const d = findDockerd();
  if (!d) throw new Error('no dockerd process to restart on this machine (is the engine run by a service manager?); the CI script starts dockerd as a plain process');
  const started = Date.now();
  process.kill(d.pid, 'SIGTERM');
  await waitFor(() => !isRunning(d.pid), 'dockerd to exit', 60_000);
  const log = openSync('/var/log/dockerd.log', 'a');
  const child = spawn(d.argv[0]!, d.argv.slice(1), { detached: true, stdio: ['ignore', log, log] });
  child.unref();
  await waitFor(engineAnswers, 'the Docker engine to answer again', 60_000);
  return { downMs: Date.now() - started };
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').split(' ')[2]?.startsWith('Z');
  } catch {
    return false;
  }
}

before(async () => {
  gh = await startGitHubStandin({ appSlug: 'lilypad' });
  // Retries come quickly here (the default first wait is 30 s); the engine must be back by then.
  // A 3 s heartbeat: the worker's own sweep, which removes the stopped sandbox, comes every 12 s
  // instead of every minute.
  app = await startApp({ book, share: { gh }, env: { LILYPAD_JOB_RETRY_DELAY_MS: '3000', LILYPAD_HEARTBEAT_SECONDS: '3' } });
  gh.createInstallation({ login: OWNER, type: 'Organization' });
  gh.createUser('alice');
  gh.createRepo(OWNER, 'calc', { files: { ...CALC_REPO, '.github/lilypad.yml': 'test: python3 -m unittest -q\nsetup:\n  - "true"\n' } });
  gh.addCollaborator(OWNER, 'calc', 'alice', 'maintain');
});
after(async () => {
  engineRestarted();
  await waitFor(engineAnswers, 'the Docker engine', 60_000).catch(() => undefined);
  await app?.stop();
  for (const c of await docker.listContainers({ all: true, filters: { label: [`dev.lilypad.prefix=${app?.prefix}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  }
  await gh?.close();
});

faultTest(
  'the Docker engine restarts (SIGTERM to dockerd, then started again) while the agent runs; its sandbox and the egress proxy are stopped with it',
  'the job fails transiently and is retried: one pull request; the stopped sandbox is removed, no container is leaked',
  async () => {
    const n = gh.createIssue(OWNER, 'calc', { title: 'Engine restarted', body: 'add is wrong', author: 'alice' }).number;
    await app.send('issues', gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => app.model.chatRequests().some((b) => titleOf(b) === 'Engine restarted'), 'the agent to start', 120_000);
    const { downMs } = await restartEngine();
    const leftAfterRestart = await sandboxesOf(app.prefix);
    engineRestarted();
    await waitFor(() => /Done|Failed/.test(status(n)), `the job to finish (status: ${status(n).slice(0, 300)})`, 300_000);
    const retried = gh.comments(OWNER, 'calc', n).some((c) => c.edits.some((h) => /Retrying after an infrastructure problem/.test(h)));
    // The stopped sandbox of the first attempt goes at the next sweep (every four heartbeats: 12 s here).
    await waitFor(async () => (await sandboxesOf(app.prefix)) === 0, 'no sandbox left', 150_000).catch(() => undefined);
    const left = await sandboxesOf(app.prefix);
    const prs = gh.pulls(OWNER, 'calc').filter((p) => p.head.ref.startsWith(`lilypad/issue-${n}`)).length;
    return {
      observed: `engine down for ${(downMs / 1000).toFixed(1)} s; ${leftAfterRestart} stopped sandbox after the restart; retried with a note: ${retried}; ${prs} pull request(s); status ${/Done/.test(status(n)) ? 'Done' : status(n).slice(0, 160)}; sandboxes left: ${left}`,
      pass: retried && prs === 1 && /Done/.test(status(n)) && left === 0,
    };
  },
  { timeout: 500_000 },
);
