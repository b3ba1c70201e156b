/**
 * Build leftovers: files that running code writes as a by-product (bytecode, test and linter caches,
 * installed packages, build output). The agent's own tool calls write them (`python3 -m pytest`
 * through Bash leaves `__pycache__/` and `.pytest_cache/`), and in a repository without a
 * `.gitignore` nothing would stop them from reaching the patch. This is the one place that decides
 * which paths are such leftovers; every path that takes a patch goes through it (extractPatch).
 *
 * A rule never applies to a repository that tracks a path it matches at the base commit: such a
 * repository commits those files on purpose (a vendored `node_modules/`, a `build/` folder of
 * scripts), and the agent's changes there are real changes.
 */

export interface LeftOutPath {
  path: string;
  /** Which rule left it out: a leftover pattern such as `__pycache__/`, or `setup`. */
  rule: string;
  reason: string;
}

interface Rule {
  /** As shown in reports. */
  label: string;
  /** What such files are, for the report. */
  what: string;
  /**
   * The part of `path` the rule claims: a directory prefix ending in `/`, or the path itself for a
   * file rule; null when it does not match. `has` tells whether a file exists (tracked at the base
   * or among the changed paths), for rules that only hold next to a build file.
   */
  claim(path: string, has: (file: string) => boolean): string | null;
}

/** A directory rule: any directory whose name satisfies `name`, at any depth; with `beside`, only next to one of those files. */
function dir(label: string, what: string, name: (segment: string) => boolean, beside?: string[]): Rule {
  return {
    label,
    what,
    claim(path, has) {
      const parts = path.split('/');
      for (let i = 0; i < parts.length - 1; i++) {
        if (!name(parts[i]!)) continue;
        const parent = parts.slice(0, i).join('/');
        if (beside && !beside.some((f) => has(parent ? `${parent}/${f}` : f))) continue;
        return `${parts.slice(0, i + 1).join('/')}/`;
      }
      return null;
    },
  };
}

/** A file rule on the file's name, at any depth. */
function file(label: string, what: string, name: (base: string) => boolean): Rule {
  return {
    label,
    what,
    claim(path) {
      const base = path.slice(path.lastIndexOf('/') + 1);
      return name(base) ? path : null;
    },
  };
}

const is = (...names: string[]) => (s: string) => names.includes(s);
const endsWith = (suffix: string) => (s: string) => s.endsWith(suffix) && s.length > suffix.length;

const PYTHON_PROJECT = ['setup.py', 'setup.cfg', 'pyproject.toml'];

export const LEFTOVER_RULES: readonly Rule[] = [
  dir('__pycache__/', 'Python bytecode cache, written whenever Python code runs', is('__pycache__')),
  file('*.pyc', 'Python bytecode', endsWith('.pyc')),
  file('*.pyo', 'Python bytecode', endsWith('.pyo')),
  dir('.pytest_cache/', "pytest's cache of the last test run", is('.pytest_cache')),
  dir('.mypy_cache/', "mypy's cache", is('.mypy_cache')),
  dir('.ruff_cache/', "ruff's cache", is('.ruff_cache')),
  dir('.hypothesis/', "Hypothesis's example database", is('.hypothesis')),
  dir('.tox/', 'tox test environments', is('.tox')),
  dir('.nox/', 'nox test environments', is('.nox')),
  dir('.venv/', 'a Python virtual environment', is('.venv')),
  {
    // A virtual environment under any name (`python3 -m venv env`): it holds a pyvenv.cfg.
    label: 'virtual environment',
    what: 'a Python virtual environment (it holds a pyvenv.cfg)',
    claim(path, has) {
      const parts = path.split('/');
      for (let i = 1; i < parts.length; i++) {
        const prefix = parts.slice(0, i).join('/');
        if (has(`${prefix}/pyvenv.cfg`)) return `${prefix}/`;
      }
      return null;
    },
  },
  dir('*.egg-info/', 'setuptools metadata, written by `pip install -e .` and setup.py', endsWith('.egg-info')),
  dir('.eggs/', 'eggs fetched by setup.py', is('.eggs')),
  dir('build/ (Python)', 'Python build output, next to setup.py or pyproject.toml', is('build'), PYTHON_PROJECT),
  dir('dist/ (Python)', 'Python packages built next to setup.py or pyproject.toml', is('dist'), PYTHON_PROJECT),
  dir('.ipynb_checkpoints/', 'Jupyter checkpoints', is('.ipynb_checkpoints')),
  file('.coverage', 'coverage.py data', (b) => b === '.coverage' || b.startsWith('.coverage.')),
  dir('htmlcov/', 'coverage.py HTML report', is('htmlcov')),
  dir('node_modules/', 'installed npm packages', is('node_modules')),
  dir('.nyc_output/', 'nyc coverage data', is('.nyc_output')),
  dir('.parcel-cache/', "Parcel's cache", is('.parcel-cache')),
  dir('.turbo/', "Turborepo's cache", is('.turbo')),
  file('.eslintcache', "ESLint's cache", is('.eslintcache')),
  file('*.tsbuildinfo', 'TypeScript incremental build information', endsWith('.tsbuildinfo')),
  dir('target/ (Cargo, Maven)', 'Cargo or Maven build output, next to Cargo.toml or pom.xml', is('target'), ['Cargo.toml', 'pom.xml']),
  dir('build/ (Gradle)', 'Gradle build output, next to build.gradle', is('build'), ['build.gradle', 'build.gradle.kts']),
  dir('.gradle/', "Gradle's cache", is('.gradle')),
  file('*.class', 'compiled Java classes', endsWith('.class')),
  file('*.o', 'compiled object files', endsWith('.o')),
];

export const SETUP_RULE = 'setup';
const SETUP_CREATED = 'created by the setup commands before the agent started; setup output is not part of the change';

/**
 * Splits the paths changed during the agent's phase into the change and what is left out of it:
 * files that setup created (`setupCreated`, the untracked files right after setup) and build
 * leftovers, except where the repository tracks such paths at the base commit (`tracked`). New
 * files the agent wrote elsewhere are kept, whatever they are.
 */
export function findLeftovers(input: { paths: readonly string[]; tracked: readonly string[]; setupCreated?: ReadonlySet<string> }): { kept: string[]; leftOut: LeftOutPath[] } {
  const trackedSet = new Set(input.tracked);
  const present = new Set([...input.tracked, ...input.paths]);
  const hasAtBase = (f: string) => trackedSet.has(f);
  const hasNow = (f: string) => present.has(f);
  // A rule the base commit has a match for is off for the whole repository.
  const active = LEFTOVER_RULES.filter((rule) => !input.tracked.some((t) => rule.claim(t, hasAtBase) !== null));
  const kept: string[] = [];
  const leftOut: LeftOutPath[] = [];
  for (const path of input.paths) {
    if (input.setupCreated?.has(path) && !trackedSet.has(path)) {
      leftOut.push({ path, rule: SETUP_RULE, reason: SETUP_CREATED });
      continue;
    }
    const rule = trackedSet.has(path) ? undefined : active.find((r) => r.claim(path, hasNow) !== null);
    if (rule) leftOut.push({ path, rule: rule.label, reason: `a build leftover (\`${rule.label}\`: ${rule.what}); the repository tracks no such path` });
    else kept.push(path);
  }
  return { kept, leftOut };
}

export interface LeftOutGroup {
  rule: string;
  reason: string;
  count: number;
  /** The first few paths, for the report. */
  examples: string[];
}

/** The left-out paths by rule and reason, for a pull request body or result.json (a node_modules/ can hold thousands). */
export function groupLeftOut(leftOut: readonly LeftOutPath[], examples = 5): LeftOutGroup[] {
  const groups = new Map<string, LeftOutGroup>();
  for (const l of leftOut) {
    const key = `${l.rule}\0${l.reason}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { rule: l.rule, reason: l.reason, count: 0, examples: [] }));
    g.count++;
    if (g.examples.length < examples) g.examples.push(l.path);
  }
  return [...groups.values()];
}
