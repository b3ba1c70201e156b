import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type Docker from 'dockerode';
import { Sandbox } from '../../src/sandbox/sandbox.ts';
import { TEST_IMAGE, TEST_WORKDIR, testDocker } from '../support/sandbox-harness.ts';

// The default sandbox image runs each ecosystem's tests with no network, the way Lilypad runs a
// test command (bash -lc in the repository). Each fixture (test/fixtures/toolchains/) passes as
// written and must fail once its add() subtracts.

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/toolchains');

interface Ecosystem {
  fixture: string;
  command: string;
  /** The file whose `a + b` becomes `a - b`. */
  source: string;
  passed: RegExp[];
  failed: RegExp[];
}

const PATH_CHECK = String.raw`IFS=:; for d in $PATH; do e="$d"; while [ ! -e "$e" ]; do e=$(dirname "$e"); done; if [ -w "$e" ]; then echo "writable $d"; else echo "locked $d"; fi; done`;

const ECOSYSTEMS: Record<string, Ecosystem> = {
  'Python (pytest)': { fixture: 'python', command: 'python3 -m pytest -q', source: 'calc.py', passed: [/\b1 passed\b/], failed: [/\b1 failed\b/, /assert -1 == 5/] },
  'Node (node --test)': { fixture: 'node', command: 'node --test', source: 'calc.js', passed: [/^# pass 1$/m, /^# fail 0$/m], failed: [/^# fail 1$/m] },
  'Node (npm test)': { fixture: 'node', command: 'npm test', source: 'calc.js', passed: [/> node --test/, /^# pass 1$/m], failed: [/^# fail 1$/m] },
  'Rust (cargo test --offline)': {
    fixture: 'rust',
    command: 'cargo test --offline',
    source: 'src/lib.rs',
    passed: [/test tests::add \.\.\. ok/, /test result: ok\. 1 passed; 0 failed/],
    failed: [/test tests::add \.\.\. FAILED/, /test result: FAILED\. 0 passed; 1 failed/],
  },
  'Go (go test ./...)': { fixture: 'go', command: 'go test ./...', source: 'calc.go', passed: [/^ok\s+example\.test\/calc\b/m], failed: [/--- FAIL: TestAdd/, /Add\(2, 3\) = -1, want 5/] },
  'Java (mvn -o test, JUnit 5)': {
    fixture: 'java',
    command: 'mvn -B -o test',
    source: 'src/main/java/dev/lilypad/fixture/Calc.java',
    passed: [/Tests run: 1, Failures: 0, Errors: 0, Skipped: 0/, /BUILD SUCCESS/],
    failed: [/Tests run: 1, Failures: 1/, /expected: <5> but was: <-1>/, /BUILD FAILURE/],
  },
};

describe(`the sandbox image ${TEST_IMAGE} runs every ecosystem's tests offline`, () => {
  let docker: Docker;
  let sandbox: Sandbox;

  /** As Lilypad runs a test command: a login shell in the repository, output and errors together. */
  let run = 0;
  const runTests = async (command: string) => {
    // A fresh bytecode cache per run, as Lilypad's test runs have: the edit below keeps calc.py's size.
    const env = { PYTHONPYCACHEPREFIX: `/tmp/pycache-${++run}` };
    const res = await sandbox.exec(['/bin/bash', '-c', '/bin/bash -lc "$0" 2>&1', command], { cwd: TEST_WORKDIR, env, timeoutSeconds: 300, keepBytes: 4 << 20 });
    return { exitCode: res.exitCode, out: res.stdout.toString('utf8') };
  };
  const sh = async (script: string) => {
    const res = await sandbox.exec(['/bin/bash', '-c', script], { cwd: '/' });
    assert.equal(res.exitCode, 0, `\`${script}\` failed: ${res.stderr.toString()}`);
    return res.stdout.toString('utf8');
  };

  before(async () => {
    docker = await testDocker();
    const label = (await docker.getImage(TEST_IMAGE).inspect()).Config.Labels?.['dev.lilypad.toolchains'] ?? '';
    if (!['rust', 'go', 'java'].every((t) => label.split(/\s+/).includes(t))) {
      throw new Error(`the image ${TEST_IMAGE} has toolchains "${label || 'none recorded'}", not rust, go and java: rebuild it with \`npm run images\``);
    }
    sandbox = await Sandbox.create(docker, {
      image: TEST_IMAGE,
      workdir: TEST_WORKDIR,
      memoryMb: 2048,
      cpus: 2,
      pids: 512,
      network: 'none',
      runId: `toolchains-${process.pid}-${Date.now()}`,
      workerId: os.hostname(),
    });
  });
  after(async () => {
    await sandbox?.destroy();
  });

  test('the sandbox has no network and runs as uid 1000', async () => {
    const info = await docker.getContainer(sandbox.id).inspect();
    assert.equal(info.HostConfig.NetworkMode, 'none');
    const out = await sh('id -u; ls /sys/class/net | sort | tr "\\n" " "');
    assert.equal(out, '1000\nlo ');
  });

  for (const [name, eco] of Object.entries(ECOSYSTEMS)) {
    test(`${name}: the fixture's test passes, and fails once the code is broken`, async () => {
      await sh(`find ${TEST_WORKDIR} -mindepth 1 -delete`);
      await sandbox.copyIn(path.join(FIXTURES, eco.fixture));
      const pass = await runTests(eco.command);
      assert.equal(pass.exitCode, 0, `${eco.command} failed on the fixture:\n${pass.out.slice(-4000)}`);
      for (const re of eco.passed) assert.match(pass.out, re, `${eco.command}:\n${pass.out.slice(-4000)}`);

      await sh(`sed -i 's/a + b/a - b/' ${TEST_WORKDIR}/${eco.source} && grep -q 'a - b' ${TEST_WORKDIR}/${eco.source}`);
      const fail = await runTests(eco.command);
      assert.notEqual(fail.exitCode, 0, `${eco.command} passed on broken code:\n${fail.out.slice(-4000)}`);
      for (const re of eco.failed) assert.match(fail.out, re, `${eco.command} on broken code:\n${fail.out.slice(-4000)}`);
    });
  }

  test('Maven leaves JUnit XML reports (per-test results) in target/surefire-reports', async () => {
    // The Java test above ran last: its broken build is still in the working tree.
    const xml = await sh(`cat ${TEST_WORKDIR}/target/surefire-reports/TEST-dev.lilypad.fixture.CalcTest.xml`);
    assert.match(xml, /<testsuite [^>]*tests="1"[^>]*failures="1"/);
    assert.match(xml, /<testcase name="add" classname="dev\.lilypad\.fixture\.CalcTest"/);
  });

  test('yarn is there, and `npm install -g` lands in a folder the user owns', async () => {
    const out = await sh('yarn --version; npm config get prefix; stat -c %u "$(npm config get prefix)" 2>/dev/null || echo absent');
    const [yarn, prefix] = out.trim().split('\n');
    assert.match(yarn ?? '', /^1\.22\./);
    assert.equal(prefix, '/home/lilypad/.local');
  });

  test('no folder the sandbox user can write comes before the system folders on the PATH Lilypad starts its toolbox with', async () => {
    // The toolbox and the reaper are started as `python3` through this PATH: an agent that could put a
    // python3 earlier on it would be running Lilypad's side of the boundary at the next takeOver().
    // A folder that does not exist yet counts as writable when the agent could create it.
    const out = await sh(PATH_CHECK);
    const lines = out.trim().split('\n');
    const firstWritable = lines.findIndex((l) => l.startsWith('writable'));
    const usrBin = lines.indexOf('locked /usr/bin');
    assert.ok(usrBin >= 0, `PATH has /usr/bin:\n${out}`);
    assert.ok(firstWritable === -1 || firstWritable > usrBin, `a writable folder comes before /usr/bin:\n${out}`);
  });

  test('the image says which toolchains it has', async () => {
    const info = await docker.getImage(TEST_IMAGE).inspect();
    assert.deepEqual((info.Config.Labels?.['dev.lilypad.toolchains'] ?? '').split(/\s+/).sort(), ['go', 'java', 'rust']);
  });
});
