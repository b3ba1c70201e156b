// `lilypad run` on repositories nobody configured (no .github/lilypad.yml, no --setup, no --test),
// one per ecosystem (test/fixtures/zero-config/): Lilypad infers setup and tests from the files,
// runs setup through the egress proxy (to the test npm registry only: PyPI, Maven Central and the
// rest are refused, as they are unreachable from this machine anyway), and the scripted model
// fixes the bug an existing test catches and adds a test of its own. Each run must show the
// inference (and from which files), what setup did, the tests failing before and passing after,
// the fixed test by name, and evidence that verifies the change with the new test.
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import { testDocker } from '../support/sandbox-harness.ts';
import { makeRepo } from '../support/fixture-repo.ts';
import { startNpmRegistry, type NpmRegistry } from '../support/npm-registry.ts';
import { fixtureFiles, GO_CASE, JAVA_CASE, lpPad, nodeRepoFiles, NODE_CASE, PYTHON_CASE, RUST_CASE, type ZeroConfigCase } from '../support/zero-config-fixtures.ts';
import { leftBehind, ZeroConfigRunner, type ZeroConfigRun } from '../support/zero-config-run.ts';

const VENV_PYTHON = '"$HOME/.lilypad-venv/bin/python"';

describe('zero-config: lilypad run infers setup and tests for a repository nobody configured', () => {
  let docker: Docker;
  let registry: NpmRegistry;
  let runner: ZeroConfigRunner;
  const timings: string[] = [];
  const id = `${process.pid}-${Date.now().toString(36)}`;
  const pkg = lpPad();

  before(async () => {
    docker = await testDocker();
    registry = await startNpmRegistry(docker, { name: `lilypad-test-npm-${id}`, packages: [pkg], labels: { 'dev.lilypad.test': `zero-config-${id}` } });
    runner = new ZeroConfigRunner(registry);
  });
  after(async () => {
    await runner?.close(docker);
    await registry?.remove();
    if (timings.length) process.stdout.write(`# zero-config run times: ${timings.join(', ')}\n`);
  });

  /** One run of a case; the parts every ecosystem must show are checked here. */
  const runCase = async (c: ZeroConfigCase, files: Record<string, string>): Promise<ZeroConfigRun> => {
    const repo = makeRepo(files);
    const started = Date.now();
    const r = await runner.run(repo, { title: c.title, body: c.body }, c.script);
    timings.push(`${c.fixture} ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const { result, run, patch } = r;
    assert.equal(run.code, 0, run.stderr + run.stdout);
    assert.equal(result.exit_reason, 'agent');
    assert.equal(result.outcome, 'patch');
    // No configuration anywhere: both values were inferred.
    assert.equal(result.config?.file, null);
    assert.equal(result.config?.sources['setup'], 'inferred');
    assert.equal(result.config?.sources['test'], 'inferred');
    assert.equal(result.setup?.source, 'inferred');
    assert.equal(result.setup?.network, 'egress proxy');
    assert.equal(result.tests?.source, 'inferred');
    // The tests ran on the untouched code and failed, and pass with the change.
    assert.equal(result.tests?.before?.outcome, 'failed', result.tests?.before?.outputTail);
    assert.equal(result.tests?.after?.outcome, 'passed', result.tests?.after?.outputTail);
    assert.equal(result.tests?.per_test_fallback, null);
    assert.deepEqual(result.tests?.broken, []);
    assert.deepEqual(result.tests?.still_failing, []);
    // The change is verified by the model's new test, which fails without the fix.
    assert.equal(result.evidence?.verdict, 'verified', JSON.stringify(result.evidence));
    assert.deepEqual(result.evidence?.change_tests.files, [c.newTestFile]);
    assert.deepEqual([...result.patch.files].sort(), [c.fixFile, c.newTestFile].sort());
    assert.ok(patch.includes(c.fixText), patch);
    assert.ok(patch.includes(c.newTestText), patch);
    execFileSync('git', ['apply', '--check', '-'], { cwd: repo, input: patch });
    // The summary says where setup and tests came from.
    assert.match(run.stdout, new RegExp(`^tests \\(.*, inferred from ${result.tests!.inferred_from.join(', ').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\): before failed \\(exit \\d+\\), after passed \\(exit 0\\)$`, 'm'));
    assert.equal(await leftBehind(docker, run.runId), 0, 'every sandbox, the proxy and its setup network are gone');
    return r;
  };

  test('Python (pyproject.toml, src/ layout, pytest): a venv, the editable install fails without PyPI and is reported, the run goes on with the image\'s pytest', async () => {
    const { result, run } = await runCase(PYTHON_CASE, fixtureFiles('python'));
    const setup = result.setup!;
    assert.deepEqual(setup.inferred_from, ['pyproject.toml']);
    assert.deepEqual(setup.planned, [`python3 -m venv --system-site-packages "$HOME/.lilypad-venv"`, `${VENV_PYTHON} -m pip install -e '.[test]'`]);
    // The venv is made; the install needs setuptools from PyPI for its build, which the proxy refuses.
    assert.deepEqual(setup.commands.map((c) => [c.command, c.outcome]), [[setup.planned[0], 'passed'], [setup.planned[1], 'failed']]);
    assert.match(setup.commands[1]!.outputTail, /Tunnel connection failed: 403 Forbidden/);
    assert.match(setup.commands[1]!.outputTail, /No matching distribution found for setuptools>=61/);
    assert.equal(setup.failed, setup.planned[1]);
    assert.equal(setup.env_cache?.result, 'miss');
    assert.equal(setup.env_cache?.stored, false, 'a setup that failed is never kept');
    assert.match(run.stdout, /setup: the inferred `"\$HOME\/\.lilypad-venv\/bin\/python" -m pip install -e '\.\[test\]'` failed; the run went on without the rest of setup/);
    // Under the failed command, the line of its output that says why (not pip's closing frame).
    assert.match(run.stdout, /^setup \(.*pip install.*\): failed \(exit 1\), [\d.]+s\n {2}ERROR: No matching distribution found for setuptools>=61\S* {3}\(the output's tail is in result\.json\)$/m);
    // The tests still ran: the venv's python (it sees the image's pytest 7.2), the package from
    // src/ through the project's own pytest `pythonpath` (it was never installed).
    const tests = result.tests!;
    assert.equal(tests.command, `${VENV_PYTHON} -m pytest`);
    assert.deepEqual(tests.inferred_from, ['pyproject.toml']);
    assert.equal(tests.runner, 'pytest');
    assert.match(tests.before!.outputTail, /pytest-7\.2\.\d+.*\n.*configfile: pyproject\.toml, testpaths: tests/);
    assert.deepEqual(tests.before!.counts, { passed: 2, failed: 1 });
    assert.deepEqual(tests.fixed, ['tests/test_core.py::test_runs_of_spaces']);
    assert.deepEqual(result.evidence?.reproduction, ['tests/test_whitespace.py::test_tabs_and_newlines_separate_words']);
    assert.deepEqual(result.evidence?.fixed, ['tests/test_core.py::test_runs_of_spaces']);
  });

  test('Node (package.json + package-lock.json, node --test): npm ci installs the dependency from the registry through the egress proxy; the tests import it', async () => {
    const { result } = await runCase(NODE_CASE, nodeRepoFiles([pkg]));
    const setup = result.setup!;
    assert.deepEqual(setup.inferred_from, ['package.json', 'package-lock.json']);
    assert.deepEqual(setup.commands.map((c) => [c.command, c.outcome, c.exitCode]), [['npm ci --no-audit --no-fund', 'passed', 0]]);
    assert.match(setup.commands[0]!.outputTail, /added 1 package/);
    assert.equal(setup.failed, null);
    assert.equal(setup.env_cache?.result, 'miss');
    assert.equal(setup.env_cache?.stored, true);
    // npm fetched the tarball the lockfile names, from the registry on this machine, once.
    assert.deepEqual(await registry.requests(), ['GET /lp-pad/-/lp-pad-1.0.0.tgz']);
    const tests = result.tests!;
    assert.equal(tests.command, 'npm test');
    assert.deepEqual(tests.inferred_from, ['package.json']);
    assert.equal(tests.runner, 'node-test');
    // The test that requires lp-pad itself passed before the change: the package was installed.
    assert.match(tests.before!.outputTail, /^ok \d+ - the padding library pads on the left$/m);
    assert.deepEqual(tests.before!.counts, { passed: 2, failed: 1 });
    assert.deepEqual(tests.fixed, ['fewer than ten cents keep their zero']);
    assert.deepEqual(result.evidence?.reproduction, ['one cent keeps both zeros']);
  });

  test('Rust (Cargo.toml, no dependencies): cargo fetch, cargo test --offline; the unit test in src/lib.rs is fixed, the new integration test reproduces', async () => {
    const { result } = await runCase(RUST_CASE, fixtureFiles('rust'));
    const setup = result.setup!;
    assert.deepEqual(setup.inferred_from, ['Cargo.toml']);
    assert.deepEqual(setup.commands.map((c) => [c.command, c.outcome]), [['cargo fetch', 'passed']]);
    assert.equal(setup.env_cache?.stored, true);
    const tests = result.tests!;
    assert.equal(tests.command, 'cargo test --offline');
    assert.deepEqual(tests.inferred_from, ['Cargo.toml']);
    assert.equal(tests.runner, 'cargo');
    assert.deepEqual(tests.fixed, ['src/lib.rs::tests::ninety']);
    assert.deepEqual(result.evidence?.reproduction, ['tests/subtractive.rs::forty_is_xl']);
    assert.equal(result.evidence?.change_tests.command, 'cargo test --offline --test subtractive');
  });

  test('Go (go.mod, no dependencies): go mod download, go test ./... read per test', async () => {
    const { result } = await runCase(GO_CASE, fixtureFiles('go'));
    const setup = result.setup!;
    assert.deepEqual(setup.inferred_from, ['go.mod']);
    assert.deepEqual(setup.commands.map((c) => [c.command, c.outcome]), [['go mod download', 'passed']]);
    const tests = result.tests!;
    assert.equal(tests.command, 'go test ./...');
    assert.deepEqual(tests.inferred_from, ['go.mod']);
    assert.equal(tests.runner, 'go');
    assert.deepEqual(tests.fixed, ['example.test/wordwrap::TestExactWidth']);
    assert.deepEqual(result.evidence?.reproduction, ['example.test/wordwrap::TestTwoShortWordsFit']);
    // The environment was kept, so the baseline ran beside the agent: Go's cache came along for the tests after.
    assert.equal(setup.env_cache?.result, 'miss');
    assert.deepEqual([tests.cache?.carried, tests.cache?.dir], [true, '/home/lilypad/.cache/go-build'], JSON.stringify(tests.cache));
  });

  test('Java (pom.xml, JUnit 5 from Debian\'s Maven repository): dependency:go-offline needs Maven Central and fails, reported; mvn -o test still runs, read from the JUnit reports', async () => {
    const { result } = await runCase(JAVA_CASE, fixtureFiles('java'));
    const setup = result.setup!;
    assert.deepEqual(setup.inferred_from, ['pom.xml']);
    assert.deepEqual(setup.planned, ['mvn -B -q dependency:go-offline', 'mvn -B -q -DskipTests test-compile']);
    // The dependency plugin is not among the plugins Debian packages: only Maven Central has it.
    assert.deepEqual(setup.commands.map((c) => [c.command, c.outcome]), [['mvn -B -q dependency:go-offline', 'failed']]);
    assert.match(setup.commands[0]!.outputTail, /No plugin found for prefix 'dependency'/);
    assert.equal(setup.failed, 'mvn -B -q dependency:go-offline');
    const tests = result.tests!;
    assert.equal(tests.command, 'mvn -B -o test');
    assert.deepEqual(tests.inferred_from, ['pom.xml']);
    assert.equal(tests.runner, 'maven');
    assert.deepEqual(tests.fixed, ['dev.lilypad.slug.SlugTest.punctuationBecomesOneDash']);
    assert.deepEqual(result.evidence?.reproduction, ['dev.lilypad.slug.SlugEdgesTest.noDashAtTheEnds']);
  });
});
