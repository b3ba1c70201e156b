import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { directoryReader, inferCommands } from '../../src/inference/index.ts';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'lilypad-infer-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;

/** A repository shaped like a real one of its ecosystem, as files in a fresh directory. */
function repo(files: Record<string, string>): string {
  const dir = path.join(tmp, `r${++n}`);
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    writeFileSync(path.join(dir, p), text);
  }
  return dir;
}
const infer = (files: Record<string, string>) => inferCommands(directoryReader(repo(files)));
const V = '"$HOME/.lilypad-venv/bin/python"';

describe('Python', () => {
  test('no packaging at all, only tests under tests/: a venv with the image\'s packages, unittest discovery', async () => {
    const r = await infer({ 'calc.py': 'def add(a, b):\n    return a + b\n', 'tests/__init__.py': '', 'tests/test_calc.py': 'import unittest\n' });
    assert.equal(r.ecosystem, 'python');
    assert.deepEqual(r.setup.commands, ['python3 -m venv --system-site-packages "$HOME/.lilypad-venv"']);
    assert.deepEqual(r.test, { command: `${V} -m unittest discover -s tests -t .`, source: 'inferred', inferred_from: ['tests/test_calc.py'], runner: 'unittest' });
    const none = await infer({ 'calc.py': 'x = 1\n', 'docs/test_notes.py': '' });
    assert.equal(none.ecosystem, null, 'a test-looking file outside the root and tests/ is not enough');
  });

  test('pyproject with a test extra and pytest configuration: venv outside the checkout, editable install with the extra, pytest', async () => {
    const r = await infer({
      'pyproject.toml': `[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n[project]\nname = "pkg"\ndependencies = ["attrs"]\n\n[project.optional-dependencies]\ndocs = ["sphinx"]\ntests = [\n  "pytest>=7",\n  "hypothesis",\n]\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n`,
      'src/pkg/__init__.py': '',
      'tests/test_pkg.py': 'def test_x():\n    pass\n',
    });
    assert.deepEqual(r.setup.commands, ['python3 -m venv --system-site-packages "$HOME/.lilypad-venv"', `${V} -m pip install -e '.[tests]'`]);
    assert.deepEqual(r.test, { command: `${V} -m pytest`, source: 'inferred', inferred_from: ['pyproject.toml'], runner: 'pytest' });
    assert.deepEqual(r.env_path, ['$HOME/.lilypad-venv/bin']);
    assert.ok(r.setup.commands.every((c) => !/(^|\s)\.venv\b/.test(c)), 'nothing is written into the checkout by the venv');
  });

  test('setup.py with extras_require and tox.ini: the extra is found in setup.py, pytest from tox', async () => {
    const r = await infer({
      'setup.py': `from setuptools import setup\nsetup(\n    name="lib",\n    extras_require={\n        "test": ["pytest", "mock"],\n        "docs": ["sphinx"],\n    },\n)\n`,
      'tox.ini': '[tox]\nenvlist = py311\n\n[testenv]\ndeps = pytest\ncommands = pytest {posargs}\n',
      'lib.py': '',
      'test_lib.py': 'import lib\n',
    });
    assert.equal(r.setup.commands[1], `${V} -m pip install -e '.[test]'`);
    assert.equal(r.test.runner, 'pytest');
    assert.deepEqual(r.setup.inferred_from, ['setup.py']);
  });

  test('requirements files and unittest classes: runtime and test requirements, unittest discover in tests/', async () => {
    const r = await infer({
      'requirements.txt': 'requests\n',
      'requirements-dev.txt': '-r requirements.txt\nflake8\n',
      'app/__init__.py': '',
      'tests/test_app.py': 'import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n',
    });
    assert.deepEqual(r.setup.commands.slice(1), [`${V} -m pip install -r requirements.txt -r requirements-dev.txt`]);
    assert.deepEqual(r.test, { command: `${V} -m unittest discover -s tests`, source: 'inferred', inferred_from: ['tests/test_app.py'], runner: 'unittest' });
  });

  test('plain test functions without configuration are pytest\'s; src layout without packaging gets PYTHONPATH', async () => {
    const r = await infer({ 'requirements.txt': 'numpy\n', 'src/calc.py': '', 'tests/test_calc.py': 'from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n' });
    assert.equal(r.test.command, `PYTHONPATH=src ${V} -m pytest`);
    assert.equal(r.setup.commands[1], `${V} -m pip install -r requirements.txt pytest`);
  });

  test('the Makefile\'s test recipe wins, with its exported variables; a CI line needing an undeclared plugin is not taken', async () => {
    const r = await infer({
      'pyproject.toml': '[project]\nname = "m"\n[project.optional-dependencies]\ntest = ["pytest"]\n',
      Makefile: 'export PYTHONPATH=src\n\n.PHONY: test\ntest:\n\tpython -m pytest tests/unit -q\n\nlint:\n\truff check .\n',
      'tests/unit/test_m.py': 'def test_m(): pass\n',
    });
    assert.equal(r.test.command, `PYTHONPATH=src ${V} -m pytest tests/unit -q`);
    assert.deepEqual(r.test.inferred_from, ['Makefile']);

    const ci = await infer({
      'pyproject.toml': '[project]\nname = "m"\n[project.optional-dependencies]\ntest = ["pytest"]\n',
      '.github/workflows/ci.yml': 'on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: pip install -e .[test]\n      - run: |\n          pytest --cov=m tests\n      - run: pytest tests/fast\n',
      'tests/fast/test_m.py': 'def test_m(): pass\n',
    });
    assert.equal(ci.test.command, `${V} -m pytest tests/fast`);
    assert.deepEqual(ci.test.inferred_from, ['.github/workflows/ci.yml']);
    assert.ok(ci.notes.some((note) => /pytest --cov=m tests.*needs pytest-cov/.test(note)), ci.notes.join('\n'));
  });

  test('a Makefile test target that does more than run tests is not taken', async () => {
    const r = await infer({
      'setup.py': 'from setuptools import setup\nsetup(name="x")\n',
      Makefile: 'test:\n\tdocker compose up -d db\n\tpytest\n',
      'tests/test_x.py': 'def test_x(): pass\n',
    });
    assert.equal(r.test.command, `${V} -m pytest`);
    assert.ok(r.notes.some((note) => /Makefile target `test` was not taken/.test(note)));
  });

  test('a Python project without tests: no test command, and the note says why', async () => {
    const r = await infer({ 'pyproject.toml': '[project]\nname = "x"\n', 'x.py': '' });
    assert.equal(r.test.command, null);
    assert.equal(r.test.runner, null);
    assert.match(r.notes.join('\n'), /no Python test files/);
    assert.equal(r.setup.commands.length, 2);
  });
});

describe('Node', () => {
  const pkg = (scripts: Record<string, string>, extra: object = {}) => JSON.stringify({ name: 'p', version: '1.0.0', scripts, ...extra });

  test('npm with a lockfile: npm ci, npm test, the runner behind the script', async () => {
    const r = await infer({ 'package.json': pkg({ test: 'npm run unit', unit: 'jest --ci' }), 'package-lock.json': '{}' });
    assert.deepEqual(r.setup.commands, ['npm ci --no-audit --no-fund']);
    assert.deepEqual(r.test, { command: 'npm test', source: 'inferred', inferred_from: ['package.json'], runner: 'jest' });
  });

  test('yarn.lock: yarn installed outside the checkout, first on PATH for setup and tests', async () => {
    const r = await infer({ 'package.json': pkg({ test: 'mocha' }), 'yarn.lock': '# yarn lockfile v1\n' });
    assert.deepEqual(r.setup.commands, [
      'npm install -g --no-audit --no-fund --prefix "$HOME/.lilypad-tools" yarn@1',
      'PATH="$HOME/.lilypad-tools/bin:$PATH" yarn install --frozen-lockfile --non-interactive',
    ]);
    assert.equal(r.test.command, 'PATH="$HOME/.lilypad-tools/bin:$PATH" npm test');
    assert.equal(r.test.runner, 'mocha');
    assert.deepEqual(r.setup.inferred_from, ['package.json', 'yarn.lock']);
  });

  test('pnpm pinned by packageManager', async () => {
    const r = await infer({ 'package.json': pkg({ test: 'node --test' }, { packageManager: 'pnpm@8.15.4' }), 'pnpm-lock.yaml': "lockfileVersion: '6.0'\n" });
    assert.equal(r.setup.commands[0], 'npm install -g --no-audit --no-fund --prefix "$HOME/.lilypad-tools" pnpm@8.15.4');
    assert.equal(r.setup.commands[1], 'PATH="$HOME/.lilypad-tools/bin:$PATH" pnpm install --frozen-lockfile');
    assert.equal(r.test.runner, 'node-test');
  });

  test('npm\'s placeholder test script and no lockfile: npm install, no test command, a note', async () => {
    const r = await infer({ 'package.json': pkg({ test: 'echo "Error: no test specified" && exit 1' }), 'index.js': '' });
    assert.deepEqual(r.setup.commands, ['npm install --no-audit --no-fund']);
    assert.equal(r.test.command, null);
    assert.match(r.notes.join('\n'), /placeholder/);
  });

  test('no test script but node:test files: node --test', async () => {
    const r = await infer({ 'package.json': pkg({}), 'package-lock.json': '{}', 'test/a.test.js': "const test = require('node:test');\n" });
    assert.deepEqual(r.test, { command: 'node --test', source: 'inferred', inferred_from: ['test/a.test.js'], runner: 'node-test' });
  });

  test('a Python package with a package.json for its docs tooling stays a Python project', async () => {
    const r = await infer({ 'pyproject.toml': '[project]\nname = "x"\n', 'package.json': pkg({ test: 'prettier --check .' }), 'tests/test_x.py': 'def test_x(): pass\n' });
    assert.equal(r.ecosystem, 'python');
    assert.match(r.notes.join('\n'), /also found node files/);
  });
});

describe('Rust, Go, Java', () => {
  test('Cargo: cargo fetch, cargo test --offline; a CI line is made offline', async () => {
    const r = await infer({ 'Cargo.toml': '[package]\nname = "c"\nversion = "0.1.0"\n', 'Cargo.lock': '', 'src/lib.rs': '' });
    assert.deepEqual([r.setup.commands, r.test.command, r.test.runner], [['cargo fetch'], 'cargo test --offline', 'cargo']);
    const ci = await infer({ 'Cargo.toml': '[package]\nname = "c"\n', '.github/workflows/ci.yml': 'jobs:\n  t:\n    steps:\n      - run: cargo test --all-features\n' });
    assert.equal(ci.test.command, 'cargo test --offline --all-features');
  });

  test('Go: go mod download, go test ./...; vendored modules need no download; a Makefile recipe wins', async () => {
    const r = await infer({ 'go.mod': 'module example.com/m\n\ngo 1.21\n', 'm.go': 'package m\n' });
    assert.deepEqual([r.setup.commands, r.test.command, r.test.runner], [['go mod download'], 'go test ./...', 'go']);
    const v = await infer({ 'go.mod': 'module m\n', 'vendor/modules.txt': '', Makefile: 'test:\n\tgo test -race ./...\n' });
    assert.deepEqual([v.setup.commands, v.test.command, v.test.inferred_from], [[], 'go test -race ./...', ['Makefile']]);
  });

  test('Maven (with its wrapper) and Gradle (with its wrapper)', async () => {
    const m = await infer({ 'pom.xml': '<project/>', mvnw: '#!/bin/sh\n' });
    assert.deepEqual(m.setup.commands, ['sh ./mvnw -B -q dependency:go-offline', 'sh ./mvnw -B -q -DskipTests test-compile']);
    assert.deepEqual([m.test.command, m.test.runner], ['sh ./mvnw -B -o test', 'maven']);
    const g = await infer({ 'build.gradle.kts': '', gradlew: '#!/bin/sh\n', 'settings.gradle.kts': '' });
    assert.deepEqual([g.setup.commands, g.test.command, g.test.runner, g.test.inferred_from], [['sh ./gradlew --no-daemon -q testClasses'], 'sh ./gradlew --no-daemon --offline test', 'gradle', ['build.gradle.kts', 'gradlew']]);
  });

  test('nothing recognisable: no commands and a note saying what was looked for', async () => {
    const r = await infer({ 'README.md': '# hi\n', 'main.c': '' });
    assert.deepEqual([r.ecosystem, r.setup.commands, r.test.command], [null, [], null]);
    assert.match(r.notes[0]!, /no pyproject\.toml, setup\.py.*set `setup` and `test` in \.github\/lilypad\.yml/);
  });
});

describe('readers', () => {
  test('a directory reader neither follows nor reads symlinks; node_modules and .git are not listed', async () => {
    const dir = repo({ 'package.json': '{}', 'node_modules/x/package.json': '{}', '.git/config': '' });
    writeFileSync(path.join(tmp, 'outside.txt'), 'secret');
    symlinkSync(path.join(tmp, 'outside.txt'), path.join(dir, 'link.txt'));
    const reader = directoryReader(dir);
    assert.deepEqual(await reader.listFiles(), ['package.json']);
    assert.equal(await reader.readFile('link.txt'), null);
    assert.equal(await reader.readFile('../outside.txt'), null);
  });

  test('a venv directory that is not a plain path is refused', async () => {
    await assert.rejects(inferCommands(directoryReader(repo({ 'setup.py': '' })), { venvDir: '/tmp/$(id)' }), /venvDir .* must be an absolute path/);
  });
});
