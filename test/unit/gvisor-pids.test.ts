import { test } from 'node:test';
import assert from 'node:assert/strict';

import { gvisorPidsCheck, hostPidsLimit } from '../../src/sandbox/runtime.ts';

// Under gVisor (ptrace platform) each sandbox process is backed by many host threads, and the
// sentry dies when Docker's pids limit refuses it one: the fault suite's fork bomb peaked at 3463
// host tasks for 128 processes with the machine busy here, and at 6163 in CI. The backstop must stay above that, and the
// doctor must say when the backstops of a worker's sandboxes together outgrow the host's pid space.

test('under runc the pids limit is the process cap itself', () => {
  assert.equal(hostPidsLimit(128, false), 128);
  assert.equal(hostPidsLimit(1024, false), 1024);
});

test("under gVisor the host's pids limit leaves room above the highest peak measured", () => {
  // 3463 host tasks for a fork bomb capped at 128 processes (four busy loops beside it).
  assert.ok(hostPidsLimit(128, true) >= 2 * 3463, `backstop ${hostPidsLimit(128, true)} for 128 processes`);
  // 6163 in a CI run, where a backstop of 7168 was nearly reached.
  assert.ok(hostPidsLimit(128, true) >= 1.5 * 6163, `backstop ${hostPidsLimit(128, true)} for 128 processes`);
  // The registry-discovery container (64 processes) and the idle sentry (54 host tasks).
  assert.ok(hostPidsLimit(64, true) > 64 * 27 + 54);
});

test('the doctor has nothing to say about pids under runc', () => {
  assert.equal(gvisorPidsCheck({ gvisor: false, pids: 1024, concurrency: 8, pidMax: 32768 }), undefined);
});

test("the doctor warns when a worker's gVisor sandboxes could use up the host's process ids, and says what fits", () => {
  const r = gvisorPidsCheck({ gvisor: true, pids: 1024, concurrency: 2, pidMax: 32768 });
  assert.equal(r?.status, 'WARN');
  assert.match(r?.detail ?? '', /kernel\.pid_max \(32768\)/);
  const fits = Number(/LILYPAD_SANDBOX_PIDS to (\d+)/.exec(r?.fix ?? '')?.[1]);
  assert.ok(hostPidsLimit(fits, true) * 2 <= 32768, `suggested ${fits} does not fit`);
  assert.ok(hostPidsLimit(fits + 1, true) * 2 > 32768, `suggested ${fits} is not the largest that fits`);
  assert.match(r?.fix ?? '', /kernel\.pid_max/);
});

test('the doctor is content when they fit, and says so when pid_max cannot be read', () => {
  assert.equal(gvisorPidsCheck({ gvisor: true, pids: 256, concurrency: 2, pidMax: 4194304 })?.status, 'OK');
  const unknown = gvisorPidsCheck({ gvisor: true, pids: 256, concurrency: 2, pidMax: undefined });
  assert.equal(unknown?.status, 'OK');
  assert.match(unknown?.detail ?? '', /could not be read/);
});
