import type { TestRunner } from '../test-results/types.ts';
import { classifyCommand, commandHints, makeTestTarget, type Hint } from './hints.ts';
import { parseToml, stringsOf, tomlTable, type TomlTable } from './toml.ts';
import { shellWord, type Candidate, type RepoView } from './types.ts';

const MARKERS = ['pyproject.toml', 'setup.py', 'setup.cfg', 'tox.ini', 'noxfile.py', 'pytest.ini', 'Pipfile', 'conftest.py'];
const TEST_EXTRAS = ['test', 'tests', 'testing', 'dev', 'develop', 'development', 'all'];
const TEST_REQUIREMENTS = [
  'requirements-test.txt', 'requirements_test.txt', 'requirements-tests.txt', 'requirements_tests.txt', 'test-requirements.txt', 'test_requirements.txt',
  'requirements/test.txt', 'requirements/tests.txt', 'requirements/testing.txt', 'requirements-dev.txt', 'requirements_dev.txt', 'dev-requirements.txt',
  'requirements/dev.txt', 'requirements/development.txt', 'tests/requirements.txt',
];
const RUNTIME_REQUIREMENTS = ['requirements.txt', 'requirements/base.txt', 'requirements/main.txt', 'requirements/prod.txt'];
// pytest options that need a plugin: a command using one is only taken if the plugin gets installed.
const PLUGIN_FLAGS: Array<[RegExp, string]> = [
  [/--cov\b/, 'pytest-cov'],
  [/(^|\s)(-n|--numprocesses)(\s|=)/, 'pytest-xdist'],
  [/--timeout\b/, 'pytest-timeout'],
  [/--benchmark/, 'pytest-benchmark'],
  [/--doctest-plus\b/, 'pytest-doctestplus'],
  [/--mypy\b/, 'pytest-mypy'],
];

export function isPython(repo: RepoView): boolean {
  return MARKERS.some((m) => repo.has(m)) || repo.files.some((f) => /^requirements[^/]*\.txt$|^requirements\/[^/]+\.txt$/.test(f)) || hasPythonTests(repo);
}

/** Python tests (test_*.py, *_test.py) at the root or in tests/ or test/: a project without packaging still has a way to test it. */
function hasPythonTests(repo: RepoView): boolean {
  return repo.files.some((f) => /^((tests?)\/)?(test_[^/]*|[^/]*_test)\.py$/.test(f));
}

/** A Python project with its own packaging (not only a requirements file beside another ecosystem). */
export function isPythonPackage(repo: RepoView): boolean {
  return repo.has('pyproject.toml') || repo.has('setup.py') || repo.has('setup.cfg');
}

const reqName = (req: string) => /^\s*([A-Za-z0-9][A-Za-z0-9._-]*)/.exec(req)?.[1]?.toLowerCase().replace(/_/g, '-') ?? '';

export async function inferPython(repo: RepoView, venv: string): Promise<Candidate> {
  const py = `"${venv}/bin/python"`;
  const setupFrom: string[] = [];
  const testFrom: string[] = [];
  const notes: string[] = [];
  const pyprojectText = await repo.read('pyproject.toml');
  const pyproject: TomlTable = pyprojectText ? parseToml(pyprojectText) : {};
  const setupCfg = parseIni((await repo.read('setup.cfg')) ?? '');
  const setupPy = (await repo.read('setup.py')) ?? '';
  const toxIni = parseIni((await repo.read('tox.ini')) ?? '');

  const installable = repo.has('setup.py') || Boolean(tomlTable(pyproject, 'build-system') || tomlTable(pyproject, 'project') || tomlTable(pyproject, 'tool', 'poetry'));
  // Requirements that go into the one pip install; `testDeps` are the names of what tests get.
  const installArgs: string[] = [];
  const testDeps: string[] = [];

  if (installable) {
    const extras = declaredExtras(pyproject, setupCfg, setupPy);
    const extra = TEST_EXTRAS.map((e) => extras.find((x) => x.name.toLowerCase() === e)).find(Boolean);
    installArgs.push('-e', extra ? `.[${extra.name}]` : '.');
    setupFrom.push(extra ? extra.from : repo.has('pyproject.toml') ? 'pyproject.toml' : 'setup.py');
    if (extra) testDeps.push(...extra.deps);
    // PEP 735 groups and Poetry groups are not extras: their requirements are installed by name.
    const groups = tomlTable(pyproject, 'dependency-groups');
    const group = groups && TEST_EXTRAS.find((g) => Array.isArray(groups[g]));
    if (!extra && groups && group) {
      const reqs = stringsOf(groups[group]);
      installArgs.push(...reqs);
      testDeps.push(...reqs);
      setupFrom.push('pyproject.toml');
    }
    const poetry = tomlTable(pyproject, 'tool', 'poetry');
    if (!extra && !group && poetry) {
      const deps = ['test', 'tests', 'dev'].map((g) => tomlTable(poetry, 'group', g, 'dependencies')).find(Boolean) ?? tomlTable(poetry, 'dev-dependencies');
      const names = Object.keys(deps ?? {}).filter((n) => n !== 'python');
      installArgs.push(...names);
      testDeps.push(...names);
    }
  } else {
    const runtime = repo.first(...RUNTIME_REQUIREMENTS);
    if (runtime) {
      installArgs.push('-r', runtime);
      setupFrom.push(runtime);
    }
  }
  const testReq = repo.first(...TEST_REQUIREMENTS);
  if (testReq && !testDeps.length) {
    installArgs.push('-r', testReq);
    setupFrom.push(testReq);
    testDeps.push(...requirementLines((await repo.read(testReq)) ?? ''));
  }
  if (!testDeps.length && toxIni.testenv?.deps) {
    // tox's own deps for its test environment: `{toxinidir}/` is the checkout, other substitutions are tox's.
    for (const dep of toxIni.testenv.deps.split('\n').map((l) => l.trim().replace(/\{toxinidir\}\//g, '')).filter((l) => l && !l.includes('{') && !l.startsWith('#'))) {
      const r = /^-r\s*(\S+)$/.exec(dep);
      if (r) installArgs.push('-r', r[1]!);
      else if (!/^-/.test(dep)) {
        installArgs.push(dep);
        testDeps.push(dep);
      }
    }
    setupFrom.push('tox.ini');
  }

  // The runner: pytest where the project configures or depends on it, else unittest.
  const pytestConfig = [
    tomlTable(pyproject, 'tool', 'pytest') ? 'pyproject.toml' : null,
    repo.has('pytest.ini') ? 'pytest.ini' : null,
    setupCfg['tool:pytest'] ? 'setup.cfg' : null,
    toxIni.pytest ? 'tox.ini' : null,
    repo.files.find((f) => /(^|\/)conftest\.py$/.test(f)) ?? null,
  ].filter((x): x is string => x !== null);
  const names = new Set([...testDeps, ...stringsOf(tomlTable(pyproject, 'project')?.dependencies)].map(reqName));
  const toxUsesPytest = /\bpytest\b/.test(toxIni.testenv?.commands ?? '');
  let usesPytest = pytestConfig.length > 0 || names.has('pytest') || toxUsesPytest;
  const testFiles = repo.files.filter((f) => /(^|\/)(test_[^/]*|[^/]*_test|tests?)\.py$/.test(f) && !f.startsWith('docs/'));

  // Without configuration, the tests themselves tell: plain `def test_` functions or `import pytest`
  // are pytest's (unittest would find none of them), as is CI running pytest.
  let pytestStyle: string | undefined;
  if (!usesPytest) {
    for (const f of testFiles.slice(0, 8)) {
      if (/^(import pytest|from pytest\b|def test_|async def test_)/m.test((await repo.read(f)) ?? '')) {
        pytestStyle = f;
        break;
      }
    }
    pytestStyle ??= (await commandHints(repo)).find((h) => h.runner === 'pytest')?.from;
  }
  if (pytestStyle) usesPytest = true;
  let runner: TestRunner | null = usesPytest ? 'pytest' : 'unittest';
  if (usesPytest && !names.has('pytest')) installArgs.push('pytest');
  const srcLayout = !installable && repo.hasDir('src') && !repo.files.some((f) => /^[^/]+\/__init__\.py$/.test(f) && !f.startsWith('tests/'));
  const env = srcLayout ? 'PYTHONPATH=src ' : '';
  let test: string | null = null;
  if (testFiles.length === 0 && pytestConfig.length === 0 && !repo.has('manage.py')) {
    runner = null;
    notes.push('no Python test files (test_*.py, *_test.py) were found, so no test command was inferred');
  } else if (usesPytest) {
    test = `${env}${py} -m pytest`;
    testFrom.push(...(pytestConfig.length ? pytestConfig : names.has('pytest') ? setupFrom.slice(0, 1) : toxUsesPytest ? ['tox.ini'] : pytestStyle ? [pytestStyle] : []));
  } else if (repo.has('manage.py')) {
    test = `${py} manage.py test`;
    testFrom.push('manage.py');
  } else {
    const dir = ['tests', 'test'].find((d) => testFiles.some((f) => f.startsWith(`${d}/`)));
    const start = dir ? (repo.has(`${dir}/__init__.py`) ? ` -s ${dir} -t .` : ` -s ${dir}`) : '';
    test = `${env}${py} -m unittest discover${start}`;
    testFrom.push(...testFiles.slice(0, 1));
    notes.push('no pytest configuration or dependency: the tests run with unittest');
  }

  // The repository's own test command wins where Lilypad can run it offline in the environment.
  const { hint, rejected } = await pythonHint(repo, names, venv);
  if (hint && test !== null) {
    test = hint.command;
    runner = hint.runner;
    testFrom.splice(0, testFrom.length, hint.from);
  }
  notes.push(...rejected);

  const setup = [`python3 -m venv --system-site-packages "${venv}"`];
  if (installArgs.length) setup.push(`${py} -m pip install ${installArgs.map(shellWord).join(' ')}`);
  if (!setupFrom.length) setupFrom.push(...['pyproject.toml', 'setup.py', 'setup.cfg', 'tox.ini'].filter((f) => repo.has(f)).slice(0, 1));
  return { ecosystem: 'python', setup, setupFrom: [...new Set(setupFrom)], test, testFrom: [...new Set(testFrom)], runner, envPath: [`${venv}/bin`], notes };
}

interface PythonHint {
  command: string;
  runner: TestRunner;
  from: string;
}

/** The Makefile's test recipe, or a workflow's or CONTRIBUTING's test line, rewritten to the venv. */
async function pythonHint(repo: RepoView, names: Set<string>, venv: string): Promise<{ hint: PythonHint | null; rejected: string[] }> {
  const rejected: string[] = [];
  const ok = (h: Hint): boolean => {
    if (h.runner !== 'pytest' && h.runner !== 'unittest' && h.runner !== 'make') return false;
    const missing = PLUGIN_FLAGS.filter(([re, plugin]) => re.test(h.command) && !names.has(plugin)).map(([, p]) => p);
    if (missing.length) {
      rejected.push(`\`${h.command}\` (${h.from}) was not taken: it needs ${missing.join(', ')}, which the project's test dependencies do not name`);
      return false;
    }
    // Paths it names must exist at this commit.
    for (const arg of h.command.split(' ').slice(1)) {
      const p = arg.split('::')[0]!.replace(/\/$/, '');
      if (/^[\w.-]+(\/[\w.-]+)*$/.test(p) && /[/.]/.test(p) && !p.startsWith('-') && !repo.has(p) && !repo.hasDir(p) && !/^\d/.test(p)) {
        rejected.push(`\`${h.command}\` (${h.from}) was not taken: ${p} does not exist`);
        return false;
      }
    }
    return true;
  };
  const venvCommand = (h: Hint): string =>
    h.runner === 'make' ? `PATH="${venv}/bin:$PATH" ${h.command}` : h.command.replace(/^(python3?\s+-m\s+)?(py\.test|pytest)\b|^python3?\s+-m\s+unittest\b|^python3?\s+/, (m) => (m.includes('unittest') ? `"${venv}/bin/python" -m unittest` : /py\.?test/.test(m) ? `"${venv}/bin/python" -m pytest` : `"${venv}/bin/python" `));
  const make = await makeTestTarget(repo);
  if (make && make.recipe.length > 0) {
    const runners = make.recipe.map((line) => ({ line, runner: classifyRecipe(line) }));
    if (runners.length === 1 && runners[0]!.runner && runners[0]!.runner !== 'make' && make.prerequisites.length === 0 && make.exports !== null) {
      const h: Hint = { command: runners[0]!.line, runner: runners[0]!.runner, from: make.file };
      const env = make.exports.map((e) => `${e} `).join('');
      if (ok(h)) return { hint: { command: `${env}${venvCommand(h)}`, runner: h.runner, from: make.file }, rejected };
    } else if (make.prerequisites.length === 0 && runners.every((r) => r.runner)) {
      const h: Hint = { command: `make ${make.target}`, runner: 'make', from: make.file };
      return { hint: { command: venvCommand(h), runner: 'make', from: make.file }, rejected };
    } else rejected.push(`the ${make.file} target \`${make.target}\` was not taken: it runs more than a test runner Lilypad can run offline`);
  }
  // `make test` lines elsewhere were judged with the Makefile above.
  for (const h of await commandHints(repo)) if (h.runner !== 'make' && ok(h)) return { hint: { command: venvCommand(h), runner: h.runner, from: h.from }, rejected };
  return { hint: null, rejected };
}

// A recipe line Lilypad can run: a plain runner, possibly through make's $(PYTHON) or python3.
function classifyRecipe(line: string): TestRunner | null {
  const plain = line.replace(/^\$\((PYTHON|PY)\)|^\$\{(PYTHON|PY)\}/, 'python');
  return classifyCommand(plain);
}

interface Extra {
  name: string;
  deps: string[];
  from: string;
}

function declaredExtras(pyproject: TomlTable, setupCfg: Ini, setupPy: string): Extra[] {
  const out: Extra[] = [];
  const optional = tomlTable(pyproject, 'project', 'optional-dependencies');
  for (const [name, deps] of Object.entries(optional ?? {})) out.push({ name, deps: stringsOf(deps), from: 'pyproject.toml' });
  const poetryExtras = tomlTable(pyproject, 'tool', 'poetry', 'extras');
  for (const [name, deps] of Object.entries(poetryExtras ?? {})) out.push({ name, deps: stringsOf(deps), from: 'pyproject.toml' });
  for (const [name, deps] of Object.entries(setupCfg['options.extras_require'] ?? {})) out.push({ name, deps: requirementLines(deps), from: 'setup.cfg' });
  // setup.py: the keys of extras_require={...} (a literal dict, or one assigned to a name first).
  const block = /extras_require\s*=\s*(\{[\s\S]*?\n\s*\}|\{[^}]*\})/.exec(setupPy)?.[1] ?? /^\s*\w*extras\w*\s*=\s*(\{[\s\S]*?\n\})/im.exec(setupPy)?.[1];
  if (block) {
    for (const m of block.matchAll(/['"]([\w.-]+)['"]\s*:\s*(\[[^\]]*\])?/g)) {
      out.push({ name: m[1]!, deps: [...(m[2] ?? '').matchAll(/['"]([^'"]+)['"]/g)].map((d) => d[1]!), from: 'setup.py' });
    }
  }
  return out;
}

function requirementLines(text: string): string[] {
  return text.split('\n').map((l) => l.replace(/\s#.*$/, '').trim()).filter((l) => l && !l.startsWith('#') && !l.startsWith('-'));
}

type Ini = Record<string, Record<string, string>>;

/** INI as setup.cfg and tox.ini write it: `[section]`, `key = value`, indented continuation lines. */
function parseIni(text: string): Ini {
  const out: Ini = {};
  let section: Record<string, string> | null = null;
  let key: string | null = null;
  for (const raw of text.replace(/\r\n?/g, '\n').split('\n')) {
    if (/^\s*[#;]/.test(raw)) continue;
    const head = /^\[([^\]]+)\]\s*$/.exec(raw);
    if (head) {
      section = out[head[1]!.trim()] ??= {};
      key = null;
      continue;
    }
    if (!section) continue;
    if (/^\s+\S/.test(raw) && key) {
      section[key] = `${section[key]}\n${raw.trim()}`;
      continue;
    }
    const kv = /^([^=:\s][^=:]*?)\s*[=:]\s*(.*)$/.exec(raw);
    if (kv) {
      key = kv[1]!.trim();
      section[key] = kv[2]!.trim();
    }
  }
  return out;
}
