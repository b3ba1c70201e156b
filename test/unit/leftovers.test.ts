import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findLeftovers, groupLeftOut } from '../../src/workspace/leftovers.ts';
import { renderPullRequestBody } from '../../src/github/pull-request-body.ts';

const kept = (paths: string[], tracked: string[], setupCreated?: string[]) =>
  findLeftovers({ paths, tracked, ...(setupCreated ? { setupCreated: new Set(setupCreated) } : {}) }).kept;

test('Python by-products are left out, the agent’s new source and test files are kept', () => {
  const paths = [
    'calc.py',
    'test_extra.py',
    '__pycache__/calc.cpython-311.pyc',
    'tests/__pycache__/test_calc.cpython-311-pytest-7.2.1.pyc',
    'stray.pyc',
    'old.pyo',
    '.pytest_cache/v/cache/lastfailed',
    '.mypy_cache/3.11/calc.meta.json',
    '.ruff_cache/CACHEDIR.TAG',
    '.tox/py311/bin/python',
    'calc.egg-info/PKG-INFO',
    'build/lib/calc.py',
    'dist/calc-1.0.tar.gz',
    '.coverage',
    '.coverage.host.123',
    'htmlcov/index.html',
    '.venv/bin/python',
    'env/pyvenv.cfg',
    'env/lib/python3.11/site-packages/x.py',
  ];
  const res = findLeftovers({ paths, tracked: ['calc.py', 'setup.py', 'tests/test_calc.py'] });
  assert.deepEqual(res.kept, ['calc.py', 'test_extra.py']);
  assert.equal(res.leftOut.length, paths.length - 2);
  const pycache = res.leftOut.find((l) => l.path === '__pycache__/calc.cpython-311.pyc')!;
  assert.equal(pycache.rule, '__pycache__/');
  assert.match(pycache.reason, /Python bytecode cache/);
  assert.equal(res.leftOut.find((l) => l.path === 'env/lib/python3.11/site-packages/x.py')!.rule, 'virtual environment');
});

test('a rule is off when the repository tracks a path it matches: changes under a tracked build/ or node_modules/ are kept', () => {
  const tracked = ['setup.py', 'build/gen.sh', 'web/node_modules/local-lib/index.js', 'web/package.json'];
  const paths = ['build/gen.sh', 'build/new-step.sh', 'web/node_modules/local-lib/index.js', 'web/node_modules/other/x.js', '__pycache__/setup.cpython-311.pyc'];
  const res = findLeftovers({ paths, tracked });
  assert.deepEqual(res.kept, ['build/gen.sh', 'build/new-step.sh', 'web/node_modules/local-lib/index.js', 'web/node_modules/other/x.js']);
  assert.deepEqual(res.leftOut.map((l) => l.path), ['__pycache__/setup.cpython-311.pyc']);
  // A repository that commits bytecode keeps its bytecode changes.
  assert.deepEqual(kept(['vendored/x.pyc', 'new.pyc'], ['vendored/x.pyc']), ['vendored/x.pyc', 'new.pyc']);
});

test('ambiguous names are leftovers only next to their build file', () => {
  // build/ and dist/ without setup.py / pyproject.toml, target/ without Cargo.toml or pom.xml: source.
  assert.deepEqual(kept(['build/make.sh', 'dist/index.js', 'target/notes.md'], ['README.md']), ['build/make.sh', 'dist/index.js', 'target/notes.md']);
  assert.deepEqual(kept(['target/debug/app', 'crates/b/target/debug/b', 'docs/target/x.md'], ['Cargo.toml', 'crates/b/Cargo.toml']), ['docs/target/x.md']);
  assert.deepEqual(kept(['app/build/classes/A.class', 'app/build/tmp/x'], ['app/build.gradle.kts', 'app/src/A.java']), []);
  // A Cargo.toml the agent adds counts too (a new crate built by `cargo test`).
  assert.deepEqual(kept(['newcrate/Cargo.toml', 'newcrate/src/lib.rs', 'newcrate/target/debug/x'], []), ['newcrate/Cargo.toml', 'newcrate/src/lib.rs']);
  // Only directories match a directory rule, and only whole names.
  assert.deepEqual(kept(['build', 'node_modules', 'my_node_modules/x.js', '__pycache__x/y.py'], ['setup.py']), ['build', 'node_modules', 'my_node_modules/x.js', '__pycache__x/y.py']);
});

test('files the setup commands created are left out whatever they are; tracked files setup changed are not', () => {
  const res = findLeftovers({ paths: ['generated/config.py', 'calc.py', 'poetry.lock'], tracked: ['calc.py', 'poetry.lock'], setupCreated: new Set(['generated/config.py']) });
  assert.deepEqual(res.kept, ['calc.py', 'poetry.lock']);
  assert.deepEqual(res.leftOut, [{ path: 'generated/config.py', rule: 'setup', reason: res.leftOut[0]!.reason }]);
  assert.match(res.leftOut[0]!.reason, /created by the setup commands/);
});

test('groupLeftOut counts each rule and keeps a few examples; the pull request body lists them', () => {
  const paths = Array.from({ length: 1200 }, (_, i) => `node_modules/p${i}/index.js`).concat(['__pycache__/a.pyc']);
  const { leftOut } = findLeftovers({ paths, tracked: ['package.json'] });
  const groups = groupLeftOut(leftOut, 3);
  assert.deepEqual(groups.map((g) => [g.rule, g.count, g.examples.length]), [['node_modules/', 1200, 3], ['__pycache__/', 1, 1]]);

  const body = renderPullRequestBody({
    issueNumber: 7,
    issueTitle: 't',
    summary: 's',
    files: [{ path: 'calc.py', added: 1, removed: 1 }],
    dropped: [],
    leftOut,
    tests: null,
    run: { model: 'm', steps: 1, promptTokens: 1, completionTokens: 1, seconds: 1, exitReason: 'agent', image: 'i', runId: 'r' },
    incomplete: false,
    warnings: [],
  });
  assert.match(body, /### Left out as by-products/);
  assert.match(body, /- 1200 file\(s\), a build leftover \(`node_modules\/`: installed npm packages\).*: `node_modules\/p0\/index.js`, .* and 1195 more/);
  assert.match(body, /- 1 file\(s\), a build leftover \(`__pycache__\/`.*: `__pycache__\/a.pyc`$/m);
  assert.ok(body.length < 5000, 'a thousand files do not blow up the body');
  const none = renderPullRequestBody({ issueNumber: 7, issueTitle: 't', summary: 's', files: [], dropped: [], tests: null, run: { model: 'm', steps: 1, promptTokens: 1, completionTokens: 1, seconds: 1, exitReason: 'agent', image: 'i', runId: 'r' }, incomplete: false, warnings: [] });
  assert.doesNotMatch(none, /Left out as by-products/);
});
