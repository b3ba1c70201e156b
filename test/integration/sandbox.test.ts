import os from 'node:os';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LABEL_RUN, removeLabelled, Sandbox } from '../../src/sandbox/sandbox.ts';
import { SandboxError } from '../../src/sandbox/errors.ts';
import { CancelledError } from '../../src/shared/cancel.ts';
import { isGvisor } from '../../src/sandbox/runtime.ts';
import { TEST_IMAGE, TEST_RUNTIME, testDocker } from '../support/sandbox-harness.ts';

// Under LILYPAD_SANDBOX_RUNTIME (e.g. runsc) when it is set, as a worker would run them.
const docker = await testDocker();
const opts = (runId: string) => ({
  image: TEST_IMAGE,
  workdir: '/testbed',
  memoryMb: 512,
  cpus: 1,
  pids: 128,
  network: 'none' as const,
  runId,
  workerId: os.hostname(),
});
const uniq = (p: string) => `${p}-${process.pid}-${Date.now()}-${Math.random().toString(16).slice(2, 6)}`;
const survivors = async (runId: string) => (await docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN}=${runId}`] } })).length;

describe('sandbox container', () => {
  let sandbox: Sandbox;
  const runId = uniq('hardening');
  before(async () => {
    process.env['LILYPAD_TEST_SECRET'] = 'ghs_abcdefghijklmnopqrstuvwxyz0123456789AB';
    sandbox = await Sandbox.create(docker, opts(runId));
  });
  after(async () => {
    await sandbox.destroy();
    delete process.env['LILYPAD_TEST_SECRET'];
  });

  test('is hardened: no network, every capability dropped but the two uid 0 needs to become the agent, no-new-privileges, limits, labels, init', async () => {
    const info = await docker.getContainer(sandbox.id).inspect();
    const hc = info.HostConfig;
    assert.equal(hc.NetworkMode, 'none');
    assert.deepEqual(hc.CapDrop, ['ALL']);
    assert.deepEqual(hc.CapAdd, ['CAP_SETUID', 'CAP_SETGID']);
    assert.deepEqual(hc.SecurityOpt, ['no-new-privileges']);
    assert.equal(hc.Privileged, false);
    assert.equal(hc.Memory, 512 * 1024 * 1024);
    assert.equal(hc.MemorySwap, 512 * 1024 * 1024);
    assert.equal(hc.NanoCpus, 1e9);
    if (isGvisor(docker, TEST_RUNTIME)) {
      // gVisor: the sandbox's own RLIMIT_NPROC counts processes; Docker's pids limit is the backstop for the sentry's threads.
      assert.deepEqual(hc.Ulimits?.find((u) => u.Name === 'nproc'), { Name: 'nproc', Soft: 128, Hard: 128 });
      assert.ok((hc.PidsLimit ?? 0) > 128, `pids backstop ${hc.PidsLimit}`);
    } else {
      assert.equal(hc.PidsLimit, 128);
    }
    assert.equal(hc.Init, true);
    assert.deepEqual(hc.Binds ?? [], []);
    assert.equal(info.Config.Labels[LABEL_RUN], runId);
    assert.equal(info.Config.Labels['dev.lilypad.managed'], 'true');
    assert.equal(info.Config.Labels['dev.lilypad.worker'], os.hostname());
  });

  test('runs the agent as a non-root user and reaches no network', async () => {
    const res = await sandbox.exec(['/bin/bash', '-c', 'id -u; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "; (exec 3<>/dev/tcp/1.1.1.1/53) 2>/dev/null || echo unreachable']);
    const lines = res.stdout.toString().trim().split('\n');
    assert.equal(lines[0], '1000');
    assert.deepEqual(lines.slice(1, -1).filter(Boolean), ['lo']);
    assert.equal(lines.at(-1), 'unreachable');
  });

  test('no value from the host environment reaches the container', async () => {
    const res = await sandbox.exec(['/bin/bash', '-c', 'env; cat /proc/1/environ | tr "\\0" "\\n"; ps -eo args']);
    const out = res.stdout.toString();
    assert.doesNotMatch(out, /ghs_abcdefghijklmnop/);
    assert.doesNotMatch(out, /LILYPAD_TEST_SECRET/);
  });

  test('a command printing a gigabyte is captured with bounded memory and truncated exactly', async () => {
    const obs = (await sandbox.tool('Bash', JSON.stringify({ command: 'head -c 1000000000 /dev/zero | tr "\\0" a; echo done >&2' }), 600)).observation;
    // "Exit code: 0\nSTDOUT:\n" + 1e9 chars + "\nSTDERR:\n" + "done\n" = 1e9 + 35 chars, 30000 kept.
    assert.equal(obs.length, 30000 + '\n[truncated 999970035 chars]'.length);
    assert.ok(obs.startsWith('Exit code: 0\nSTDOUT:\naaaa'));
    assert.ok(obs.endsWith('a\n[truncated 999970035 chars]'));
    const ps = await sandbox.exec(['/bin/bash', '-c', 'ps -o rss= -C python3']);
    const rssKb = Math.max(...ps.stdout.toString().trim().split('\n').map(Number));
    assert.ok(rssKb < 64 * 1024, `toolbox RSS ${rssKb} kB stays small`);
  });

  test('a tool call cannot reach host files through a symlink', async () => {
    await sandbox.exec(['/bin/bash', '-c', 'ln -sf /etc/hostname /testbed/link']);
    const obs = (await sandbox.tool('Read', JSON.stringify({ file_path: 'link' }), 60)).observation;
    const containerHostname = (await sandbox.exec(['cat', '/etc/hostname'])).stdout.toString().trim();
    // The target lies outside the repository, so the display path is the path as given.
    assert.equal(obs, `link\n1. ${containerHostname}`);
    assert.notEqual(containerHostname, os.hostname());
  });
});

describe('sandbox cleanup', () => {
  test('destroy() removes the container and is idempotent', async () => {
    const runId = uniq('destroy');
    const sb = await Sandbox.create(docker, opts(runId));
    assert.equal(await survivors(runId), 1);
    await sb.destroy();
    await sb.destroy();
    assert.equal(await survivors(runId), 0);
    await assert.rejects(sb.tool('Read', '{}', 10), SandboxError);
  });

  test('an abort signal during a long Bash call removes the container within seconds', async () => {
    const runId = uniq('abort');
    const controller = new AbortController();
    const sb = await Sandbox.create(docker, opts(runId), controller.signal);
    sb.destroyOnAbort(controller.signal);
    const started = Date.now();
    const call = sb.tool('Bash', JSON.stringify({ command: 'sleep 60' }), 1800);
    setTimeout(() => controller.abort(new Error('test abort')), 300);
    await assert.rejects(call, SandboxError);
    await sb.destroy(); // what every caller's finally does: waits for the removal already under way
    assert.ok(Date.now() - started < 10_000);
    assert.equal(await survivors(runId), 0);
  });

  test('an already-aborted signal creates nothing', async () => {
    const runId = uniq('preabort');
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(Sandbox.create(docker, opts(runId), controller.signal), CancelledError);
    assert.equal(await survivors(runId), 0);
  });

  test('a missing image is reported with the command that builds it', async () => {
    const runId = uniq('noimage');
    await assert.rejects(Sandbox.create(docker, { ...opts(runId), image: 'lilypad-no-such-image:never' }), /npm run images/);
    assert.equal(await survivors(runId), 0);
  });

  test('an image without python3 fails with an actionable message and leaves nothing behind', async () => {
    const runId = uniq('nopython');
    await assert.rejects(Sandbox.create(docker, { ...opts(runId), image: 'debian:bookworm-slim', user: '1000:1000' }), /needs python3/);
    assert.equal(await survivors(runId), 0);
  });

  test('removeLabelled() sweeps orphans by label', async () => {
    const runId = uniq('orphan');
    await Sandbox.create(docker, opts(runId));
    assert.equal(await removeLabelled(docker, LABEL_RUN, runId), 1);
    assert.equal(await survivors(runId), 0);
  });
});

describe('sandbox resilience', () => {
  test('an agent that kills every process it can (kill -9 -1) ends only its own processes: the toolbox answers on', async () => {
    const sb = await Sandbox.create(docker, opts(uniq('killall')));
    try {
      await sb.exec(['/bin/bash', '-c', 'echo keep > /testbed/work.txt']);
      await sb.tool('Bash', JSON.stringify({ command: 'sleep 300 >/dev/null 2>&1 &' }), 60);
      // kill(-1) spares the caller, so the shell itself lives to report; the background sleep does not.
      const killed = await sb.tool('Bash', JSON.stringify({ command: 'kill -9 -1; echo survived' }), 60);
      assert.equal(killed.observation, 'Exit code: 0\nSTDOUT:\nsurvived\n\nSTDERR:\n');
      assert.equal(killed.meta.interrupted, undefined);
      // SIGKILL is delivered as the target next runs, and init reaps it after: on a busy machine the
      // sleep can still be listed a few milliseconds on (a CI run saw it), so give it 5 s to go.
      const gone = 'for i in $(seq 50); do pgrep -u "$(id -u)" -x sleep >/dev/null || { echo none; exit 0; }; sleep 0.1; done; pgrep -u "$(id -u)" -x sleep';
      const left = await sb.tool('Bash', JSON.stringify({ command: gone }), 60);
      assert.equal(left.observation, 'Exit code: 0\nSTDOUT:\nnone\n\nSTDERR:\n');
      const after = await sb.tool('Read', JSON.stringify({ file_path: 'work.txt' }), 60);
      assert.equal(after.observation, 'work.txt\n1. keep');
      assert.equal(sb.recoveries, 0);
    } finally {
      await sb.destroy();
    }
  });

  test('pkill python does not reach the toolbox', async () => {
    const sb = await Sandbox.create(docker, opts(uniq('pkill')));
    try {
      // Spelled so that the command line of this very command does not match the pattern.
      const res = await sb.tool('Bash', JSON.stringify({ command: 'p=pyth; pkill ${p}on; pkill -f ${p}on3; echo still-here' }), 60);
      assert.match(res.observation, /still-here/);
      assert.equal(sb.recoveries, 0);
    } finally {
      await sb.destroy();
    }
  });

  test('devices and pipes are refused by Read instead of hanging the toolbox', async () => {
    const sb = await Sandbox.create(docker, opts(uniq('fifo')));
    try {
      await sb.exec(['/bin/bash', '-c', 'mkfifo /testbed/pipe']);
      assert.equal((await sb.tool('Read', JSON.stringify({ file_path: 'pipe' }), 60)).observation, "OSError: [Errno 22] Not a regular file: '/testbed/pipe'");
      assert.equal((await sb.tool('Read', JSON.stringify({ file_path: '/dev/zero' }), 60)).observation, "OSError: [Errno 22] Not a regular file: '/dev/zero'");
    } finally {
      await sb.destroy();
    }
  });
});

test('takeOver() kills what the agent left running and spares the container', async () => {
  const sb = await Sandbox.create(docker, opts(uniq('reap')));
  try {
    await sb.tool('Bash', JSON.stringify({ command: '(while true; do date >> /testbed/ticks; sleep 0.1; done) > /dev/null 2>&1 &' }), 60);
    // The processes that can still write the file: those whose command line names it (this one excepted).
    const writers = async () =>
      Number(
        (
          await sb.exec([
            'python3',
            '-c',
            "import os\nn=0\nfor p in filter(str.isdigit, os.listdir('/proc')):\n  try: n += p != str(os.getpid()) and b'/testbed/ticks' in open('/proc/'+p+'/cmdline','rb').read()\n  except OSError: pass\nprint(n)",
          ])
        ).stdout.toString(),
      );
    assert.ok((await writers()) >= 1, 'the loop runs');
    assert.ok((await sb.takeOver()) >= 1, 'the loop was found and killed');
    assert.equal(await writers(), 0, 'nothing is left that writes');
    assert.equal((await sb.tool('Bash', JSON.stringify({ command: 'echo alive' }), 60)).observation, 'Exit code: 0\nSTDOUT:\nalive\n\nSTDERR:\n');
  } finally {
    await sb.destroy();
  }
});
