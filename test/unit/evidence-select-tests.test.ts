import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { selectTestsCommand } from '../../src/evidence/index.ts';
import { parseableCommand } from '../../src/test-results/index.ts';

const files = (...f: string[]) => ({ files: f, ids: [] });
const ids = (...i: string[]) => ({ files: [], ids: i });

describe('selectTestsCommand per runner', () => {
  test('pytest: files and node ids appended (ids in a file already named are dropped); assignments and quoted paths kept', () => {
    assert.equal(selectTestsCommand('pytest', 'python -m pytest', { files: ['tests/test_calc.py'], ids: ['tests/test_calc.py::test_a', 'tests/test_io.py::TestIO::test_read[utf-8]'] }), "python -m pytest tests/test_calc.py 'tests/test_io.py::TestIO::test_read[utf-8]'");
    assert.equal(selectTestsCommand('pytest', 'PYTHONPATH=src "/tmp/venv dir/bin/python" -m pytest -x', files('tests/test_calc.py')), 'PYTHONPATH=src "/tmp/venv dir/bin/python" -m pytest -x tests/test_calc.py');
    assert.equal(parseableCommand('pytest', selectTestsCommand('pytest', 'python3 -m pytest', files('tests/test_calc.py'))!), 'python3 -m pytest -rA -p no:cacheprovider --continue-on-collection-errors tests/test_calc.py');
    // Test data and conftest.py are not passed as modules; with nothing else, the whole command runs.
    assert.equal(selectTestsCommand('pytest', 'pytest', files('tests/data/input.json', 'tests/conftest.py', 'tests/test_calc.py')), 'pytest tests/test_calc.py');
    assert.equal(selectTestsCommand('pytest', 'pytest', files('tests/data/input.json', 'tests/conftest.py')), null);
  });

  test('unittest: dotted names; `discover` replaced when its top level is ".", one module chosen by -p otherwise, Django labels', () => {
    assert.equal(selectTestsCommand('unittest', 'python3 -m unittest', { files: ['tests/__init__.py', 'tests/test_calc.py'], ids: ['test_shapes.ShapeTest.test_area', 'test_x (app.tests.T)'] }), 'python3 -m unittest tests.test_calc test_shapes.ShapeTest.test_area app.tests.T.test_x');
    assert.equal(selectTestsCommand('unittest', 'python3 -m unittest discover -v -s tests -t .', files('tests/test_calc.py')), 'python3 -m unittest -v tests.test_calc');
    assert.equal(selectTestsCommand('unittest', '"/v/bin/python" -m unittest discover -s tests', files('tests/test_calc.py')), '"/v/bin/python" -m unittest discover -s tests -p test_calc.py');
    assert.equal(selectTestsCommand('unittest', '"/v/bin/python" -m unittest discover -s tests', ids('test_calc.AddTest.test_add')), '"/v/bin/python" -m unittest discover -s tests -p test_calc.py');
    assert.equal(selectTestsCommand('unittest', 'python3 -m unittest discover -s tests', files('tests/test_a.py', 'tests/test_b.py')), null);
    assert.equal(selectTestsCommand('unittest', 'python3 manage.py test', { files: ['shop/tests/test_cart.py'], ids: ['shop.tests.test_cart.CartTest.test_total', 'other.tests.T.test_x'] }), 'python3 manage.py test shop.tests.test_cart other.tests.T.test_x');
    assert.equal(parseableCommand('unittest', selectTestsCommand('unittest', 'python3 -m unittest discover -s tests', files('tests/test_calc.py'))!), 'python3 -m unittest discover -v -s tests -p test_calc.py');
  });

  test("node, jest, vitest, mocha: files, named to the runner or through the package manager's test script", () => {
    assert.equal(selectTestsCommand('node-test', 'node --test', { files: ['test/math.test.js'], ids: ['test/other.test.mjs::group > inner'] }), 'node --test test/math.test.js test/other.test.mjs');
    assert.equal(selectTestsCommand('node-test', 'node --test', ids('adds')), null);
    assert.equal(selectTestsCommand('jest', 'npx jest --ci', files('src/a.test.ts')), 'npx jest --ci --runTestsByPath src/a.test.ts');
    assert.equal(selectTestsCommand('jest', 'PATH="/t/bin:$PATH" npm test', files('src/a.test.ts')), 'PATH="/t/bin:$PATH" npm test -- --runTestsByPath src/a.test.ts');
    assert.equal(selectTestsCommand('jest', 'npm test -- --ci', files('src/a.test.ts')), 'npm test -- --ci --runTestsByPath src/a.test.ts');
    assert.equal(selectTestsCommand('vitest', 'yarn test', files('src/a.spec.ts')), 'yarn test src/a.spec.ts');
    assert.equal(selectTestsCommand('vitest', 'node .yarn/releases/yarn-4.1.0.cjs test', files('src/a.spec.ts')), 'node .yarn/releases/yarn-4.1.0.cjs test src/a.spec.ts');
    assert.equal(selectTestsCommand('mocha', 'pnpm run test', files('test/a.spec.js')), 'pnpm run test -- test/a.spec.js');
    assert.equal(selectTestsCommand('jest', 'npm run lint', files('src/a.test.ts')), null);
    assert.equal(parseableCommand('node-test', selectTestsCommand('node-test', 'node --test', files('test/a.test.js'))!), 'node --test --test-reporter=tap test/a.test.js');
  });

  test("go: -run with the ids' top-level names and their packages; files run their packages whole; flags kept with their values", () => {
    assert.equal(selectTestsCommand('go', 'go test -race -timeout 5m ./...', ids('example.com/m/calc::TestAdd/negative', 'example.com/m/calc::TestSub', 'example.com/m/io::TestRead')), "go test -race -timeout 5m -run '^(TestAdd|TestSub|TestRead)$' example.com/m/calc example.com/m/io");
    assert.equal(selectTestsCommand('go', 'go test ./...', { files: ['calc/calc_test.go', 'main_test.go'], ids: ['example.com/m/io::TestRead'] }), 'go test ./calc . example.com/m/io');
    assert.equal(parseableCommand('go', selectTestsCommand('go', 'go test ./...', files('calc/calc_test.go'))!), 'go test -json ./calc');
    assert.equal(selectTestsCommand('go', 'go test -run TestX ./...', files('calc/calc_test.go')), null);
    assert.equal(selectTestsCommand('go', 'go test -mystery ./...', files('calc/calc_test.go')), null);
  });

  test('cargo: tests/x.rs is --test x, a unit test id --lib with an exact filter; what cannot be named by path is null', () => {
    assert.equal(selectTestsCommand('cargo', 'cargo test --offline', files('tests/api.rs')), 'cargo test --offline --test api');
    assert.equal(selectTestsCommand('cargo', 'cargo test --offline -q', ids('tests/api.rs::adds', 'src/lib.rs::tests::wrong')), 'cargo test --offline -q --test api --lib -- --exact adds tests::wrong');
    assert.equal(parseableCommand('cargo', selectTestsCommand('cargo', 'cargo test --offline -q', ids('src/lib.rs::tests::wrong'))!), 'cargo test --offline -q --lib -- --format=pretty --exact tests::wrong');
    assert.equal(selectTestsCommand('cargo', 'cargo test --offline -- --test-threads=1', files('tests/api.rs')), 'cargo test --offline --test api -- --test-threads=1');
    assert.equal(selectTestsCommand('cargo', 'cargo test adds', files('tests/api.rs')), null);
    assert.equal(selectTestsCommand('cargo', 'cargo test', ids('src/main.rs::tests::x')), null);
    assert.equal(selectTestsCommand('cargo', 'cargo test', files('crates/core/tests/api.rs')), null);
    assert.equal(selectTestsCommand('cargo', 'cargo test', files('tests/api.rs', 'tests/common/mod.rs', 'tests/data/in.txt')), 'cargo test --test api');
    assert.equal(selectTestsCommand('cargo', 'cargo test', files('tests/common/mod.rs')), null);
  });

  test('Maven: -Dtest with classes and Class#method, modules without a match not failing; Gradle: --tests after the test task, root project only', () => {
    assert.equal(
      selectTestsCommand('maven', 'mvn -B -o test', { files: ['src/test/java/com/x/FooTest.java'], ids: ['com.x.BarTest.adds', 'com.x.FooTest.other', 'com.x.BazTest.param(int)[1]'] }),
      "mvn -B -o test '-Dtest=com.x.FooTest,com.x.BarTest#adds,com.x.BazTest' -Dsurefire.failIfNoSpecifiedTests=false -DfailIfNoTests=false",
    );
    assert.equal(selectTestsCommand('maven', 'mvn -o test -Dtest=Other', files('src/test/java/com/x/FooTest.java')), null);
    assert.equal(selectTestsCommand('gradle', './gradlew test --offline', files('src/test/kotlin/com/x/FooTest.kt')), './gradlew test --tests com.x.FooTest --offline');
    assert.equal(selectTestsCommand('gradle', './gradlew test --offline', files('app/src/test/java/com/x/FooTest.java')), null);
    assert.equal(selectTestsCommand('gradle', './gradlew check', files('src/test/java/com/x/FooTest.java')), null);
    assert.equal(selectTestsCommand('maven', 'mvn test', files('src/test/java/com/x/FooTest.java', 'src/test/resources/data.csv')), "mvn test -Dtest=com.x.FooTest -Dsurefire.failIfNoSpecifiedTests=false -DfailIfNoTests=false");
    assert.equal(selectTestsCommand('gradle', 'gradle test', files('src/test/java/com/x/FooTest.java', 'src/test/resources/data.csv')), 'gradle test --tests com.x.FooTest');
  });

  test('null where it cannot be done safely: wrappers, unknown runners, shell control, nothing safe to run', () => {
    for (const runner of ['make', 'tox', 'npm', 'other', null] as const) assert.equal(selectTestsCommand(runner, 'make test', files('tests/test_a.py')), null, String(runner));
    assert.equal(selectTestsCommand('pytest', 'cd src && python -m pytest', files('tests/test_a.py')), null);
    assert.equal(selectTestsCommand('pytest', 'python -m pytest | tee log', files('tests/test_a.py')), null);
    assert.equal(selectTestsCommand('pytest', 'python -m pytest $(cat args)', files('tests/test_a.py')), null);
    assert.equal(selectTestsCommand('pytest', 'python -m pytest', files()), null);
    assert.equal(selectTestsCommand('pytest', 'python -m pytest', { files: ['-p', '../outside.py', '/etc/passwd', 'tests/\nx.py'], ids: ['--rootdir=/', '-pevil'] }), null);
  });
});

describe('hostile names stay inert (run through a real shell with stand-in runners)', () => {
  const bin = mkdtempSync(path.join(os.tmpdir(), 'lilypad-select-'));
  const marker = path.join(bin, 'pwned');
  const argsFile = path.join(bin, 'args');
  after(() => rmSync(bin, { recursive: true, force: true }));
  // Each stand-in runner writes the arguments it received, one per line.
  for (const name of ['pytest', 'python3', 'npm', 'go', 'mvn', 'cargo']) writeFileSync(path.join(bin, name), `#!/bin/sh\nprintf '%s\\n' "$@" > "${argsFile}"\n`, { mode: 0o755 });
  const runIt = (command: string) => {
    rmSync(argsFile, { force: true });
    execFileSync('/bin/sh', ['-c', command], { cwd: bin, env: { PATH: `${bin}:/usr/bin:/bin` }, stdio: 'pipe' });
    return readFileSync(argsFile, 'utf8').trimEnd().split('\n');
  };
  const hostile = [`tests/test_a.py::test_x; touch ${marker}`, `tests/test_b.py::test_$(touch ${marker})`, `tests/test_c.py::\`touch ${marker}\``, "tests/test_d.py::it's | touch x", 'tests/test_e.py::a && b > /dev/null'];

  test('pytest receives each id as one literal argument and nothing else runs', () => {
    const command = selectTestsCommand('pytest', 'pytest', ids(...hostile))!;
    assert.deepEqual(runIt(command), hostile);
    assert.equal(existsSync(marker), false);
    assert.deepEqual(runIt(parseableCommand('pytest', command)).slice(-hostile.length), hostile);
    assert.equal(existsSync(marker), false);
  });

  test('file names with shell syntax reach npm, unittest and Maven as text; go and cargo drop names that are not test names', () => {
    const evil = `src/$(touch ${marker}).test.js`;
    assert.deepEqual(runIt(selectTestsCommand('jest', 'npm test', files(evil))!), ['test', '--', '--runTestsByPath', evil]);
    assert.deepEqual(runIt(selectTestsCommand('unittest', 'python3 -m unittest', ids('test_a.T.test_x', 'test_a.T.test_y;touch'))!), ['-m', 'unittest', 'test_a.T.test_x']);
    // A method name that is not one runs its whole class.
    assert.deepEqual(runIt(selectTestsCommand('maven', 'mvn test', ids('com.x.A.b', `com.x.A.$(touch ${marker})`, 'com.x.B.c'))!), ['test', '-Dtest=com.x.A,com.x.B#c', '-Dsurefire.failIfNoSpecifiedTests=false', '-DfailIfNoTests=false']);
    assert.deepEqual(runIt(selectTestsCommand('go', 'go test ./...', ids('example.com/m::TestA', `example.com/m::TestB$(touch ${marker})`, 'example.com/m;rm::TestC'))!), ['test', '-run', '^(TestA)$', 'example.com/m']);
    assert.equal(selectTestsCommand('cargo', 'cargo test', ids(`tests/api.rs::a;touch ${marker}`)), null);
    assert.equal(existsSync(marker), false);
  });
});
