// A kept environment through the whole sandbox session, under the sandboxes' runtime
// (LILYPAD_SANDBOX_RUNTIME=runsc runs it under gVisor): the first session on the Go fixture runs
// setup and keeps its environment; the second, on the same commit, starts from it (setup skipped)
// and judges the same fix the same way: the tests on the untouched code fail, after the change
// they pass. A runtime under which kept environments cannot work must turn them off by itself,
// saying so, and never hand the agent or the tests a broken worktree.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type Docker from 'dockerode';
import { ModelClient } from '../../src/agent/model-client.ts';
import { JsonlTrajectory } from '../../src/agent/trajectory.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { runSandboxSession, type SandboxSessionResult } from '../../src/pipeline/sandbox-session.ts';
import type { EnvCache } from '../../src/sandbox/env-cache/index.ts';
import { makeRepo } from '../support/fixture-repo.ts';
import { newCache, removeOwnerImages, testOwner } from '../support/env-cache-harness.ts';
import { startModelServer, type ModelServer } from '../support/model-server.ts';
import { TEST_IMAGE, testDocker } from '../support/sandbox-harness.ts';
import { fixtureFiles, GO_CASE } from '../support/zero-config-fixtures.ts';

let docker: Docker;
const servers: ModelServer[] = [];
const dirs: string[] = [];
let owner = '';

async function session(repo: string, cache: EnvCache): Promise<SandboxSessionResult> {
  const server = await startModelServer({ script: [GO_CASE.script[1]!, GO_CASE.script[2]!] });
  servers.push(server);
  const baseCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repo }).toString().trim();
  const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-kept-hit-'));
  dirs.push(out);
  const trajectory = new JsonlTrajectory(path.join(out, 'trajectory.jsonl'), new SecretScanner([]));
  try {
    return await runSandboxSession({
      docker,
      checkoutDir: repo,
      baseCommit,
      sandbox: { image: TEST_IMAGE, workdir: '/testbed', memoryMb: 2048, cpus: 1, pids: 512 },
      runId: `test-kept-hit-${process.pid}-${Date.now().toString(36)}`,
      workerId: os.hostname(),
      setup: ['go mod download', 'echo kept > "$HOME/setup-marker"'],
      keep: { cache, repoId: `local:${repo}`, keyFiles: [] },
      setupNetwork: null,
      setupTimeoutSeconds: 120,
      testCommand: 'go test ./...',
      testRunner: 'go',
      ecosystem: 'go',
      testTimeoutSeconds: 300,
      issue: { title: GO_CASE.title, body: GO_CASE.body },
      model: 'frognano-4b',
      client: new ModelClient({ baseURL: server.url, timeoutMs: 30_000, maxRetries: 2, retryBaseMs: 5 }),
      budgets: { maxSteps: 20, maxContextTokens: 131072, maxTokensPerTurn: 8192, maxWallSeconds: 300, bashTimeoutCapSeconds: 300 },
      trajectory,
      phase: (_name, fn) => fn(),
    });
  } finally {
    await trajectory.close();
  }
}

describe('a kept environment through the sandbox session', () => {
  before(async () => {
    docker = await testDocker();
  });
  after(async () => {
    for (const s of servers) await s.close();
    if (owner) await removeOwnerImages(docker, owner);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('the second session starts from what the first kept and judges the fix as the first did', async () => {
    owner = testOwner('hit-session');
    const { cache } = newCache(docker, owner);
    const repo = makeRepo(fixtureFiles('go'));
    dirs.push(repo);
    const first = await session(repo, cache);
    assert.equal(first.setup.envCache.result, 'miss', JSON.stringify(first.setup.envCache));
    assert.equal(first.tests?.before?.outcome, 'failed', first.tests?.before?.outputTail);
    assert.equal(first.tests?.after?.outcome, 'passed', first.tests?.after?.outputTail);
    const second = await session(repo, cache);
    assert.equal(second.setup.envCache.result, 'hit', JSON.stringify(second.setup.envCache));
    assert.deepEqual(second.setup.commands, [], 'setup is skipped on a hit');
    assert.equal(second.tests?.before?.outcome, 'failed', second.tests?.before?.outputTail);
    assert.equal(second.tests?.after?.outcome, 'passed', second.tests?.after?.outputTail);
    assert.ok(second.patch && second.patch.files.length > 0, `the patch: ${second.patch?.diff.toString().slice(0, 300)}`);
  });
});
