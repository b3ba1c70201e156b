import { shellQuote } from '../test-results/index.ts';
import { append, wordIndex, type Selection, type Word } from './command-words.ts';

// go test's flags that take a value (`-timeout 5m`); `-run`/`-skip` are Lilypad's to set.
const GO_VALUE = new Set(['bench', 'benchtime', 'count', 'cpu', 'parallel', 'timeout', 'tags', 'p', 'coverprofile', 'covermode', 'coverpkg', 'cpuprofile', 'memprofile', 'memprofilerate', 'blockprofile', 'blockprofilerate', 'mutexprofile', 'mutexprofilefraction', 'outputdir', 'o', 'exec', 'mod', 'modfile', 'ldflags', 'gcflags', 'asmflags', 'vet', 'shuffle', 'fuzztime', 'trace', 'pkgdir', 'overlay', 'pgo', 'toolexec', 'installsuffix', 'buildmode', 'compiler', 'gccgoflags']);
const GO_BOOL = new Set(['v', 'race', 'short', 'json', 'cover', 'failfast', 'x', 'n', 'a', 'benchmem', 'trimpath', 'msan', 'asan', 'linkshared', 'modcacherw', 'work', 'fullpath']);
const GO_PATH = /^[\w.~-]+(\/[\w.~-]+)*$/;
const GO_TEST = /^(Test|Example|Fuzz)\w*$/;

/**
 * `go test [flags] [packages]`: the packages become those of the targets (`./dir` for a file,
 * the import path of an id) and ids add `-run '^(TestA|TestB)$'` (top-level names; subtests run
 * with their parent). With files, whole packages run: -run would also filter the files' tests.
 */
export function selectGo(at: Selection): string | null {
  const test = wordIndex(at.words, /^test$/);
  if (test < 1 || at.words[test - 1]!.value !== 'go') return null;
  const kept: string[] = [];
  const rest = at.words.slice(test + 1);
  for (let i = 0; i < rest.length; i++) {
    const w = rest[i]!;
    if (!w.value.startsWith('-')) continue; // a package pattern: replaced below
    const name = w.value.replace(/^--?/, '').split('=')[0]!;
    if (!GO_VALUE.has(name) && !GO_BOOL.has(name)) return null; // -run, -args, or a flag not known to be safe to keep
    kept.push(raw(at, w));
    if (GO_VALUE.has(name) && !w.value.includes('=')) {
      if (!rest[i + 1]) return null;
      kept.push(raw(at, rest[++i]!));
    }
  }
  const dirs = at.files.filter((f) => f.endsWith('.go')).map((f) => (f.includes('/') ? `./${f.slice(0, f.lastIndexOf('/'))}` : '.'));
  const named = at.ids.flatMap((id) => {
    const [pkg, name] = [id.slice(0, id.indexOf('::')), id.slice(id.indexOf('::') + 2).split('/')[0]!];
    return id.includes('::') && GO_PATH.test(pkg) && GO_TEST.test(name) ? [{ pkg, name }] : [];
  });
  const packages = [...new Set([...dirs, ...named.map((n) => n.pkg)])].filter((p) => GO_PATH.test(p.replace(/^\.\//, '')) || p === '.');
  if (packages.length === 0) return null;
  const run = dirs.length === 0 ? ['-run', `^(${[...new Set(named.map((n) => n.name))].join('|')})$`] : [];
  return append([at.command.slice(0, at.words[test]!.end), ...kept].join(' '), [...run, ...packages]);
}

const CARGO_VALUE = new Set(['-p', '--package', '--test', '--bin', '--example', '--bench', '--features', '-F', '--target', '--target-dir', '--manifest-path', '-j', '--jobs', '--profile', '--color', '--message-format', '-Z', '--config', '--exclude']);

/**
 * `cargo test`: an integration test file `tests/x.rs` is the target `--test x`, a unit test id
 * (`src/lib.rs::mod::test`) the library, `--lib`; ids filter by exact name after `--`. Tests of
 * binaries, doctests and nested crates' files cannot be named by path alone: null.
 */
export function selectCargo(at: Selection): string | null {
  const test = wordIndex(at.words, /^test$/);
  if (test < 1 || at.words[test - 1]!.value !== 'cargo') return null;
  const dash = at.words.findIndex((w, i) => i > test && w.value === '--');
  const before = at.words.slice(test + 1, dash < 0 ? undefined : dash);
  const after = dash < 0 ? [] : at.words.slice(dash + 1);
  for (let i = 0; i < before.length; i++) {
    if (CARGO_VALUE.has(before[i]!.value)) i++;
    else if (!before[i]!.value.startsWith('-')) return null; // the command filters already
  }
  if (after.some((w) => !w.value.startsWith('-'))) return null;
  const targets = new Set<string>();
  const filters: string[] = [];
  for (const f of at.files.filter((f) => f.endsWith('.rs'))) {
    const m = /^tests\/([\w-]+)\.rs$/.exec(f);
    // Modules shared by the integration tests (tests/common/mod.rs) are no target of their own.
    if (!m && f.startsWith('tests/')) continue;
    if (!m) return null;
    targets.add(`--test ${m[1]}`);
  }
  if (targets.size === 0 && at.ids.length === 0) return null;
  for (const id of at.ids) {
    const m = /^(?:tests\/([\w-]+)\.rs|(src\/lib\.rs))::([\w:]+)$/.exec(id);
    if (!m) return null;
    targets.add(m[1] ? `--test ${m[1]}` : '--lib');
    filters.push(m[3]!);
  }
  const head = [at.command.slice(0, (before.at(-1) ?? at.words[test]!).end), ...targets].join(' ');
  const wholeTargets = at.files.some((f) => /^tests\/[\w-]+\.rs$/.test(f));
  const tail = [...after.map((w) => raw(at, w)), ...(!wholeTargets && filters.length > 0 ? ['--exact', ...filters.map(shellQuote)] : [])];
  return tail.length > 0 ? `${head} -- ${tail.join(' ')}` : head;
}

const JVM_SOURCE = /(?:^|\/)src\/test\/(?:java|kotlin|groovy|scala)\/(.+)\.(?:java|kt|groovy|scala)$/;
const JVM_NAME = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/;
// Test resources (src/test/resources) hold no tests; a test source elsewhere cannot be named as a class.
const JVM_CODE = /\.(java|kt|groovy|scala)$/;

/** Fully qualified test classes of the files, and `Class#method` / `Class.method` of the ids. */
function jvmTargets(at: Selection, join: '#' | '.'): string[] {
  const classes = at.files.flatMap((f) => {
    const m = JVM_SOURCE.exec(f);
    return m ? [m[1]!.replace(/\//g, '.')] : [];
  });
  const methods = at.ids.flatMap((id) => {
    const cut = id.lastIndexOf('.');
    const [cls, method] = [id.slice(0, cut), id.slice(cut + 1)];
    if (cut < 0 || !JVM_NAME.test(cls) || classes.includes(cls)) return [];
    return [/^\w+$/.test(method) ? `${cls}${join}${method}` : cls];
  });
  const all = new Set([...classes, ...methods]);
  // A class run whole already runs its methods.
  return [...all].filter((t) => JVM_NAME.test(t.replace('#', '.')) && !(t.includes(join) && all.has(t.slice(0, t.lastIndexOf(join)))));
}

/** Maven Surefire: `-Dtest=com.x.FooTest,com.x.BarTest#adds`, modules without a match not failing. */
export function selectMaven(at: Selection): string | null {
  if (wordIndex(at.words, /(^|\/)mvnw?$/) < 0 || at.words.some((w) => w.value.startsWith('-Dtest='))) return null;
  if (at.files.some((f) => JVM_CODE.test(f) && !JVM_SOURCE.test(f))) return null;
  const targets = jvmTargets(at, '#');
  if (targets.length === 0) return null;
  return append(at.command, [`-Dtest=${targets.join(',')}`, '-Dsurefire.failIfNoSpecifiedTests=false', '-DfailIfNoTests=false']);
}

/**
 * Gradle: `--tests` after the `test` task. Every project's test task applies the filter and fails
 * when nothing matches, so only the root project's files (`src/test/...`) are selected.
 */
export function selectGradle(at: Selection): string | null {
  if (wordIndex(at.words, /(^|\/)gradlew?$/) < 0 || at.words.some((w) => w.value === '--tests')) return null;
  const task = wordIndex(at.words, /^:?test$/);
  const sources = at.files.filter((f) => JVM_CODE.test(f));
  if (task < 0 || sources.length === 0 || sources.some((f) => !/^src\/test\//.test(f) || !JVM_SOURCE.test(f))) return null;
  const targets = jvmTargets(at, '.');
  if (targets.length === 0) return null;
  const end = at.words[task]!.end;
  return `${at.command.slice(0, end)} ${targets.map((t) => `--tests ${shellQuote(t)}`).join(' ')}${at.command.slice(end)}`;
}

function raw(at: Selection, w: Word): string {
  return at.command.slice(w.start, w.end);
}
