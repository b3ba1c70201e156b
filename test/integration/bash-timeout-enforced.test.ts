// The Bash timeout is decided once, on the host (src/sandbox/bash-timeout.ts): the toolbox runs a
// command for exactly the seconds it is handed and refuses a Bash request without them, and the
// host waits for that timeout plus its margin, not for the cap.
import os from 'node:os';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { probeAgentIdentity } from '../../src/sandbox/agent-identity.ts';
import { ToolboxChannel } from '../../src/sandbox/channel.ts';
import { toolReplySchema } from '../../src/sandbox/protocol.ts';
import { Sandbox } from '../../src/sandbox/sandbox.ts';
import { ROOT_USER, TOOLBOX_SOURCE, toolboxEnv, toolboxLaunchArgv } from '../../src/sandbox/toolbox-launch.ts';
import { signalToolbox, TEST_IMAGE, testDocker } from '../support/sandbox-harness.ts';

const docker = await testDocker();
const options = (runId: string, marginMs?: number) => ({
  image: TEST_IMAGE,
  workdir: '/testbed',
  memoryMb: 512,
  cpus: 1,
  pids: 128,
  network: 'none' as const,
  runId,
  workerId: os.hostname(),
  ...(marginMs !== undefined ? { deadlineMarginMs: marginMs } : {}),
});
const uniq = (p: string) => `${p}-${process.pid}-${Date.now()}-${Math.random().toString(16).slice(2, 6)}`;

describe("the toolbox enforces the host's Bash timeout", () => {
  let sb: Sandbox;
  let channel: ToolboxChannel;
  before(async () => {
    sb = await Sandbox.create(docker, options(uniq('bash-timeout')));
    // A second toolbox in the same container, started and spoken to directly, as the host does its own.
    const identity = await probeAgentIdentity(sb.container, { user: sb.options.user, image: TEST_IMAGE, timeoutMs: 30_000 });
    channel = await ToolboxChannel.open(docker, sb.container, {
      argv: toolboxLaunchArgv(identity.python),
      env: toolboxEnv(identity, '/testbed'),
      user: ROOT_USER,
      maxLineBytes: 1 << 20,
    });
    channel.send(JSON.stringify(TOOLBOX_SOURCE));
  });
  after(async () => {
    channel?.close();
    await sb?.destroy();
  });

  const bash = (args: Record<string, unknown>, decided: Record<string, unknown>) =>
    channel.request({ op: 'tool', name: 'Bash', arguments: JSON.stringify(args), ...decided }, toolReplySchema);

  test('the seconds it is handed, whatever the model asked for', async () => {
    const res = await bash({ command: 'echo early; sleep 5', timeout: 60 }, { timeout: 0.5 });
    assert.equal(res.observation, 'Timed out after 0.5s\nSTDOUT:\nearly\n\nSTDERR:\n');
    assert.deepEqual(res.meta, { timed_out: true });
  });

  test('a command that ends in time: the ordinary result, and the toolbox reports only that it did not time out', async () => {
    const res = await bash({ command: 'echo ok', timeout: 0.01 }, { timeout: 5 });
    assert.equal(res.observation, 'Exit code: 0\nSTDOUT:\nok\n\nSTDERR:\n');
    assert.deepEqual(res.meta, { timed_out: false });
  });

  test("the host's error is the observation, after the command check", async () => {
    const error = 'OverflowError: int too large to convert to float';
    assert.equal((await bash({ command: 'echo never' }, { timeout_error: error })).observation, error);
    assert.equal((await bash({}, { timeout_error: error })).observation, 'ValueError: command is required');
  });

  test('a Bash request without a usable timeout is refused as a protocol error, not run', async () => {
    for (const decided of [{}, { timeout: null }, { timeout: '5' }, { timeout: 0 }, { timeout: -1 }, { timeout: true }]) {
      await assert.rejects(bash({ command: 'touch /tmp/ran' }, decided), /needs the host's timeout in seconds/, JSON.stringify(decided));
    }
    const ran = await sb.exec(['test', '-e', '/tmp/ran']);
    assert.notEqual(ran.exitCode, 0, 'a refused request ran its command');
  });
});

describe('the host side of a Bash call', () => {
  test("the meta names the timeout the host decided and whether the cap cut it", async () => {
    const sb = await Sandbox.create(docker, options(uniq('bash-meta')));
    try {
      assert.deepEqual((await sb.tool('Bash', JSON.stringify({ command: 'true', timeout: 5 }), 1)).meta, { capped: true, timed_out: false, timeout: 1 });
      assert.deepEqual((await sb.tool('Bash', JSON.stringify({ command: 'sleep 2', timeout: 0.2 }), 1800)).meta, { capped: false, timed_out: true, timeout: 0.2 });
      const overflow = await sb.tool('Bash', `{"command": "true", "timeout": ${'9'.repeat(400)}}`, 60);
      assert.deepEqual([overflow.observation, overflow.meta], ['OverflowError: int too large to convert to float', { error: true }]);
    } finally {
      await sb.destroy();
    }
  });

  test('a stopped toolbox is given up on at the timeout plus the margin, not at the cap', async () => {
    const sb = await Sandbox.create(docker, options(uniq('bash-deadline'), 1000));
    try {
      const started = Date.now();
      const call = sb.tool('Bash', JSON.stringify({ command: 'sleep 60', timeout: 1 }), 1800);
      // The agent cannot stop its toolbox (a different real uid); a root exec stands in for whatever could.
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await signalToolbox(sb, 'STOP'), 0);
      const res = await call;
      const waited = Date.now() - started;
      // The model reads the timeout its call was given (1.0s), as the reference shows a timeout; the
      // host's deadline (1 s plus the 1 s margin) is what ended it.
      assert.equal(res.observation, 'Timed out after 1.0s\nSTDOUT:\n\nSTDERR:\n');
      assert.equal(res.meta.interrupted, true);
      assert.ok(waited >= 1900, `the host gave up after ${waited} ms, before its deadline`);
      assert.ok(waited < 15_000, `the host waited ${waited} ms`);
      assert.equal((await sb.tool('Bash', JSON.stringify({ command: 'echo next' }), 60)).observation, 'Exit code: 0\nSTDOUT:\nnext\n\nSTDERR:\n');
    } finally {
      await sb.destroy();
    }
  });
});
