// Kept environments end to end, with `lilypad run` on the Node fixture nobody configured: the
// inferred `npm ci` installs from the test registry through the egress proxy once; the next run on
// the same commit starts from the kept environment (setup skipped: the registry sees no second
// download) with the tests on the untouched code still run, in a sandbox of their own beside the
// agent; a commit that changes the lockfile makes a new environment; and another repository with
// the very same files never gets the first one's.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import { testDocker } from '../support/sandbox-harness.ts';
import { makeRepo } from '../support/fixture-repo.ts';
import { npmProject, startNpmRegistry, type NpmRegistry } from '../support/npm-registry.ts';
import { lpPad, nodeRepoFiles, NODE_CASE } from '../support/zero-config-fixtures.ts';
import { leftBehind, ZeroConfigRunner, type ZeroConfigRun } from '../support/zero-config-run.ts';

// A test that takes a few seconds, as integration tests do: long enough that the agent's first
// model request, which does not wait for the baseline, comes while the baseline is still running.
const SLOW_TEST = "'use strict';\nconst test = require('node:test');\n\ntest('the slow end-to-end check', async () => {\n  await new Promise((r) => setTimeout(r, 2500));\n});\n";

describe('kept environments end to end (lilypad run, the inferred npm ci)', () => {
  let docker: Docker;
  let registry: NpmRegistry;
  let runner: ZeroConfigRunner;
  const id = `${process.pid}-${Date.now().toString(36)}`;
  const v1 = lpPad('1.0.0');
  const v2 = lpPad('1.0.1');
  const files = { ...nodeRepoFiles([v1]), 'test/slow.test.js': SLOW_TEST };
  let repo = '';
  let first: ZeroConfigRun;
  let second: ZeroConfigRun;

  before(async () => {
    docker = await testDocker();
    registry = await startNpmRegistry(docker, { name: `lilypad-test-npm-kept-${id}`, packages: [v1, v2], labels: { 'dev.lilypad.test': `zero-config-kept-${id}` } });
    runner = new ZeroConfigRunner(registry);
    repo = makeRepo(files);
  });
  after(async () => {
    await runner?.close(docker);
    await registry?.remove();
  });

  const run = async () => {
    const r = await runner.run(repo, { title: NODE_CASE.title, body: NODE_CASE.body }, NODE_CASE.script);
    assert.equal(r.run.code, 0, r.run.stderr + r.run.stdout);
    assert.equal(r.result.tests?.before?.outcome, 'failed', r.result.tests?.before?.outputTail);
    assert.equal(r.result.tests?.after?.outcome, 'passed', r.result.tests?.after?.outputTail);
    assert.deepEqual(r.result.tests?.fixed, ['fewer than ten cents keep their zero']);
    assert.equal(await leftBehind(docker, r.run.runId), 0);
    return r;
  };

  test('the first run misses: npm ci downloads from the registry, and the environment is kept', async () => {
    first = await run();
    const setup = first.result.setup!;
    assert.equal(setup.source, 'inferred');
    assert.deepEqual(setup.commands.map((c) => [c.command, c.outcome]), [['npm ci --no-audit --no-fund', 'passed']]);
    assert.equal(setup.env_cache?.result, 'miss');
    assert.equal(setup.env_cache?.stored, true, JSON.stringify(setup.env_cache));
    assert.match(setup.env_cache?.image ?? '', /^lilypad-env-local:[0-9a-f]{64}$/);
    assert.equal(await registry.tarballRequests('lp-pad'), 1);
    assert.match(first.run.stdout, /^environment: setup ran; its environment is kept for the next runs$/m);
  });

  test('the second run on the same commit hits: setup is skipped (no download), and the tests before still ran, beside the agent', async () => {
    second = await run();
    const setup = second.result.setup!;
    assert.equal(setup.env_cache?.result, 'hit', JSON.stringify(setup.env_cache));
    assert.equal(setup.env_cache?.key, first.result.setup?.env_cache?.key);
    assert.equal(setup.env_cache?.image, first.result.setup?.env_cache?.image);
    assert.ok((setup.env_cache?.setup_seconds_saved ?? 0) > 0, JSON.stringify(setup.env_cache));
    assert.ok((setup.env_cache?.age_seconds ?? -1) >= 0);
    assert.deepEqual(setup.commands, [], 'no setup command ran');
    assert.equal(second.result.durations_ms['setup'], undefined, 'no setup phase');
    assert.equal(await registry.tarballRequests('lp-pad'), 1, 'the registry saw no second download');
    assert.match(second.run.stdout, /^environment: environment kept from \d+ s ago reused, setup skipped \(it took [\d.]+ s\)$/m);
    // The tests on the untouched code ran from the kept environment (lp-pad installed: its own test passed)...
    assert.match(second.result.tests!.before!.outputTail, /^ok \d+ - the padding library pads on the left$/m);
    assert.deepEqual(second.result.tests!.before!.counts, { passed: 3, failed: 1 });
    // ...in their own sandbox, while the agent worked: the model's first request came before they ended.
    const baseline = phaseInterval(second.out, 'tests_before');
    const firstRequest = second.model.requests.find((r) => r.path.startsWith('/v1/chat/completions'))!.receivedAt;
    assert.ok(firstRequest < baseline.end, `the first model request (${new Date(firstRequest).toISOString()}) came after the baseline ended (${new Date(baseline.end).toISOString()})`);
    assert.ok(baseline.end - baseline.start >= 2500, `the baseline ran the slow test (${baseline.end - baseline.start} ms)`);
  });

  test('a commit that changes package-lock.json misses: setup runs again and keeps a new environment', async () => {
    const project = npmProject({ name: 'price-column', version: '2.1.0', scripts: { test: 'node --test' } }, [v2]);
    for (const [name, text] of Object.entries(project)) writeFileSync(path.join(repo, name), text);
    execFileSync('git', ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@localhost', 'commit', '-qam', 'lp-pad 1.0.1'], { cwd: repo });
    const third = await run();
    const setup = third.result.setup!;
    assert.equal(setup.env_cache?.result, 'miss', JSON.stringify(setup.env_cache));
    assert.notEqual(setup.env_cache?.key, first.result.setup?.env_cache?.key);
    assert.equal(setup.env_cache?.stored, true);
    assert.deepEqual(setup.commands.map((c) => [c.command, c.outcome]), [['npm ci --no-audit --no-fund', 'passed']]);
    assert.equal((await registry.requests()).filter((r) => r === 'GET /lp-pad/-/lp-pad-1.0.1.tgz').length, 1, 'the new version was downloaded');
  });

  test('another repository with identical files never gets the first one\'s environment', async () => {
    const twin = makeRepo(files);
    assert.equal(readFileSync(path.join(twin, 'package-lock.json'), 'utf8'), nodeRepoFiles([v1])['package-lock.json']);
    const before = (await registry.requests()).filter((r) => r === 'GET /lp-pad/-/lp-pad-1.0.0.tgz').length;
    const r = await runner.run(twin, { title: NODE_CASE.title, body: NODE_CASE.body }, NODE_CASE.script);
    assert.equal(r.run.code, 0, r.run.stderr + r.run.stdout);
    const setup = r.result.setup!;
    assert.equal(setup.env_cache?.result, 'miss', JSON.stringify(setup.env_cache));
    assert.notEqual(setup.env_cache?.key, first.result.setup?.env_cache?.key);
    assert.deepEqual(setup.commands.map((c) => [c.command, c.outcome]), [['npm ci --no-audit --no-fund', 'passed']]);
    assert.equal((await registry.requests()).filter((x) => x === 'GET /lp-pad/-/lp-pad-1.0.0.tgz').length, before + 1, 'it set up on its own');
    assert.equal(r.result.tests?.after?.outcome, 'passed');
  });
});

/** When a phase ran, from the run's structured log (lilypad.log: one line per phase, at its end, with its length). */
function phaseInterval(outDir: string, phase: string): { start: number; end: number } {
  const lines = readFileSync(path.join(outDir, 'lilypad.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { time: number; phase?: string; ms?: number });
  const line = lines.find((l) => l.phase === phase);
  assert.ok(line && typeof line.ms === 'number', `no "${phase}" phase in lilypad.log`);
  return { start: line.time - line.ms!, end: line.time };
}
