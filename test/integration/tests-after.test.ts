// The tests after the change, through runSandboxSession with the real Docker engine, real git and
// the real agent loop driven by the scripted model server, on the Go fixture (a second package
// added, which no change touches): they are skipped when the change is empty, and with the
// baseline beside the agent (a kept environment) Go's cache comes along from the baseline's own
// sandbox, so the untouched package's result is answered from it, as when the baseline ran in the
// agent's sandbox. LILYPAD_SANDBOX_RUNTIME=runsc runs the same under gVisor.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type Docker from 'dockerode';
import { ModelClient } from '../../src/agent/model-client.ts';
import { JsonlTrajectory } from '../../src/agent/trajectory.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { runSandboxSession, type SandboxSessionResult } from '../../src/pipeline/sandbox-session.ts';
import { testsSection } from '../../src/pipeline/run-report.ts';
import type { EffectiveConfig } from '../../src/pipeline/effective-config.ts';
import type { EnvCache } from '../../src/sandbox/env-cache/index.ts';
import { makeRepo } from '../support/fixture-repo.ts';
import { newCache, removeOwnerImages, testOwner } from '../support/env-cache-harness.ts';
import { startModelServer, type ModelServer, type ScriptedReply } from '../support/model-server.ts';
import { TEST_IMAGE, testDocker } from '../support/sandbox-harness.ts';
import { fixtureFiles, GO_CASE } from '../support/zero-config-fixtures.ts';

const TEST_COMMAND = 'go test ./...';
/** A package of its own that the fix does not touch: its result can come from a cache. */
const GO_REPO = {
  ...fixtureFiles('go'),
  'words/words.go': 'package words\n\nimport "strings"\n\n// Count counts the words in text.\nfunc Count(text string) int { return len(strings.Fields(text)) }\n',
  'words/words_test.go': 'package words\n\nimport "testing"\n\nfunc TestCount(t *testing.T) {\n\tif Count(" a  b ") != 2 {\n\t\tt.Fatal("want 2")\n\t}\n}\n',
};
/** The fix and its test, without running a test on the way (the agent's own `go test` would fill the cache itself). */
const FIX: ScriptedReply[] = [GO_CASE.script[1]!, GO_CASE.script[2]!];
const NO_CHANGE: ScriptedReply[] = [{ content: 'Wrap already keeps a line that fits exactly; nothing to change.' }];
const UNTOUCHED_CACHED = /ok(?:\s|\\t)+example\.test\/wordwrap\/words(?:\s|\\t)+\(cached\)/;

let docker: Docker;
const servers: ModelServer[] = [];
const owners: string[] = [];
const dirs: string[] = [];

interface Session {
  result: SandboxSessionResult;
  phases: string[];
}

async function session(script: ScriptedReply[], opts: { keep?: EnvCache; testCacheMaxBytes?: number } = {}): Promise<Session> {
  const repo = makeRepo(GO_REPO);
  dirs.push(repo);
  const server = await startModelServer({ script });
  servers.push(server);
  const baseCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repo }).toString().trim();
  const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-tests-after-'));
  dirs.push(out);
  const trajectory = new JsonlTrajectory(path.join(out, 'trajectory.jsonl'), new SecretScanner([]));
  const phases: string[] = [];
  const result = await runSandboxSession({
    docker,
    checkoutDir: repo,
    baseCommit,
    sandbox: { image: TEST_IMAGE, workdir: '/testbed', memoryMb: 2048, cpus: 1, pids: 512 },
    runId: `test-tests-after-${process.pid}-${Date.now().toString(36)}`,
    workerId: os.hostname(),
    setup: ['go mod download'],
    keep: opts.keep ? { cache: opts.keep, repoId: `local:${repo}`, keyFiles: [] } : null,
    setupNetwork: null,
    setupTimeoutSeconds: 120,
    testCommand: TEST_COMMAND,
    testRunner: 'go',
    ecosystem: 'go',
    ...(opts.testCacheMaxBytes !== undefined ? { testCacheMaxBytes: opts.testCacheMaxBytes } : {}),
    testTimeoutSeconds: 300,
    issue: { title: GO_CASE.title, body: GO_CASE.body },
    model: 'frognano-4b',
    client: new ModelClient({ baseURL: server.url, timeoutMs: 30_000, maxRetries: 2, retryBaseMs: 5 }),
    budgets: { maxSteps: 20, maxContextTokens: 131072, maxTokensPerTurn: 8192, maxWallSeconds: 300, bashTimeoutCapSeconds: 300 },
    trajectory,
    phase: (name, fn) => {
      phases.push(name);
      return fn();
    },
  });
  await trajectory.close();
  return { result, phases };
}

/** The worker's copies of a cache read out of a baseline's sandbox (src/sandbox/dir-copy.ts). */
const heldCopies = () => new Set(readdirSync(os.tmpdir()).filter((n) => n.startsWith('lilypad-dir-copy-')));
function assertNoNewCopies(before: Set<string>): void {
  const left = [...heldCopies()].filter((n) => !before.has(n));
  assert.deepEqual(left, [], 'the copy held on the worker is removed when the session ends');
}

function keptCache(name: string): EnvCache {
  const owner = testOwner(name);
  owners.push(owner);
  return newCache(docker, owner).cache;
}

/** result.json's `tests`, as `lilypad run` writes it from the session. */
function resultTests(result: SandboxSessionResult) {
  const effective = { config: { test: TEST_COMMAND }, sources: { test: 'config' }, inferred: null } as unknown as EffectiveConfig;
  return testsSection(effective, result, 'go');
}

describe('the tests after the change', () => {
  before(async () => {
    docker = await testDocker();
  });
  after(async () => {
    for (const s of servers) await s.close();
    for (const o of owners) await removeOwnerImages(docker, o);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('an empty change: the tests after it do not run, and the record says why', async () => {
    const { result, phases } = await session(NO_CHANGE);
    assert.equal(result.agent.exitReason, 'agent');
    assert.deepEqual(result.patch?.files, []);
    assert.equal(result.tests?.before?.outcome, 'failed', 'the baseline ran (TestExactWidth fails on the untouched code)');
    assert.ok(!phases.includes('tests_after'), `phases: ${phases.join(', ')}`);
    assert.equal(result.tests?.after, null);
    assert.equal(result.tests?.afterNotRun, 'no change');
    assert.equal(result.evidence, null, 'no evidence for a change that is not there');
    const section = resultTests(result);
    assert.equal(section?.after, null);
    assert.equal(section?.after_not_run, 'no change');
    assert.equal(section?.cache, null);
  });

  test('an empty change with the baseline beside the agent: no tests after it either, and nothing is carried', async () => {
    const copies = heldCopies();
    const { result, phases } = await session(NO_CHANGE, { keep: keptCache('empty') });
    assertNoNewCopies(copies);
    assert.equal(result.setup.envCache.result, 'miss');
    assert.equal(result.tests?.before?.outcome, 'failed');
    assert.ok(!phases.includes('tests_after') && !phases.includes('test_cache_write'), `phases: ${phases.join(', ')}`);
    assert.equal(result.tests?.afterNotRun, 'no change');
    assert.equal(result.tests?.cache, null, 'nothing was put into the agent\'s sandbox');
  });

  test("with the baseline beside the agent, Go's cache comes from the baseline's sandbox: the untouched package is answered from it", async () => {
    const copies = heldCopies();
    const { result, phases } = await session(FIX, { keep: keptCache('carry') });
    assertNoNewCopies(copies);
    assert.ok(result.setup.envCache.result === 'miss' && result.setup.envCache.stored, JSON.stringify(result.setup.envCache));
    assert.deepEqual(result.patch?.files.sort(), ['fit_test.go', 'wrap.go']);
    assert.equal(result.tests?.after?.outcome, 'passed', result.tests?.after?.outputTail);
    assert.match(result.tests!.after!.outputTail, UNTOUCHED_CACHED, 'the untouched package came from the carried cache');
    assert.doesNotMatch(result.tests!.after!.outputTail, /ok(?:\s|\\t)+example\.test\/wordwrap(?:\s|\\t)+\(cached\)/, 'the changed package ran');
    // Read out of the baseline's sandbox beside the agent; written into the agent's after its patch, before the tests after it.
    assert.ok(phases.indexOf('test_cache_read') > phases.indexOf('tests_before'), `phases: ${phases.join(', ')}`);
    assert.ok(phases.indexOf('test_cache_write') > phases.indexOf('patch') && phases.indexOf('test_cache_write') < phases.indexOf('tests_after'), `phases: ${phases.join(', ')}`);
    const cache = result.tests?.cache;
    assert.ok(cache?.carried, JSON.stringify(cache));
    assert.equal(cache.dir, '/home/lilypad/.cache/go-build');
    assert.ok(cache.bytes > 0 && cache.files > 0);
    assert.deepEqual(resultTests(result)?.cache, cache);
  });

  test('past the cap nothing is carried, the record says so, and the untouched package runs again', async () => {
    const { result } = await session(FIX, { keep: keptCache('cap'), testCacheMaxBytes: 1024 });
    const cache = result.tests?.cache;
    assert.ok(cache && !cache.carried, JSON.stringify(cache));
    assert.match(cache.why, /^it holds \d+ bytes in \d+ files, over the cap of 1024 bytes$/);
    assert.equal(result.tests?.after?.outcome, 'passed', result.tests?.after?.outputTail);
    assert.doesNotMatch(result.tests!.after!.outputTail, UNTOUCHED_CACHED, 'without the carried cache the agent\'s sandbox has no result to reuse');
  });
});
