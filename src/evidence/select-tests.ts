import { normaliseUnittestId, shellQuote, type TestRunner } from '../test-results/index.ts';
import { append, commandWords, isAssignment, wordIndex, type Selection, type Word } from './command-words.ts';
import { selectCargo, selectGo, selectGradle, selectMaven } from './select-tests-compiled.ts';

/** What to run: test files (repository-relative paths) and test ids as the runner's parser names them. */
export interface TestTargets {
  files: string[];
  ids: string[];
}

/**
 * The repository's test command restricted to some test files or ids, for running a change's own
 * tests on the base code and with the change: pytest `file::name`, unittest and Django dotted
 * names, node/jest/vitest/mocha files, `go test -run`, `cargo test --test`, Maven `-Dtest`, Gradle
 * `--tests`. Pass the result through parseableCommand as the whole command would be.
 *
 * Files and ids come from the model's change: every one is checked (a relative path without `..`,
 * no leading `-`, no control characters; ids in the form the runner's names take) and shell-quoted,
 * so that a name holding `$(...)` or `;` reaches the runner as text. Returns null where the
 * command cannot be restricted safely (a wrapper such as make or tox, shell control in the command,
 * a selection the command already makes, nothing left to run): the caller then runs the whole
 * command. Where a runner can only select more than asked (a whole file for one test, a package
 * for a file), it does; the evidence is read per test from the output.
 */
export function selectTestsCommand(runner: TestRunner | null, testCommand: string, targets: TestTargets): string | null {
  const words = commandWords(testCommand.trim());
  if (!words || words.length === 0) return null;
  const command = testCommand.trim();
  const files = [...new Set(targets.files.filter(safePath))];
  const ids = [...new Set(targets.ids.filter(safeWord))];
  if (files.length + ids.length === 0) return null;
  const at: Selection = { command, words, files, ids };
  switch (runner) {
    case 'pytest':
      return selectPytest(at);
    case 'unittest':
      return selectUnittest(at);
    case 'node-test':
    case 'jest':
    case 'vitest':
    case 'mocha':
      return selectScripts(runner, at);
    case 'go':
      return selectGo(at);
    case 'cargo':
      return selectCargo(at);
    case 'maven':
      return selectMaven(at);
    case 'gradle':
      return selectGradle(at);
    default:
      return null;
  }
}

const CONTROL = /[\x00-\x1f\x7f]/;

function safeWord(s: string): boolean {
  return s.trim() !== '' && !s.startsWith('-') && !CONTROL.test(s);
}

function safePath(p: string): boolean {
  return safeWord(p) && !p.startsWith('/') && !p.split('/').includes('..');
}

function selectPytest(at: Selection): string | null {
  if (wordIndex(at.words, /(^|\/)(py\.test|pytest)$/) < 0) return null;
  // Test data and conftest.py are not test modules: pytest is given the modules (and conftest applies anyway).
  const files = at.files.filter((f) => f.endsWith('.py') && !/(^|\/)(conftest|__init__)\.py$/.test(f));
  // pytest runs the union of what it is given: a file runs whole, its ids need not be named too.
  const ids = at.ids.filter((id) => !files.includes(id.split('::')[0]!));
  return files.length + ids.length > 0 ? append(at.command, [...files, ...ids]) : null;
}

const DOTTED = /^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/;

/** `python -m unittest` and Django's `manage.py test` take dotted module, class and test names. */
function selectUnittest(at: Selection): string | null {
  const modules = at.files.filter((f) => /\.py$/.test(f) && !/(^|\/)__init__\.py$/.test(f)).map((f) => f.slice(0, -3).replace(/\//g, '.'));
  const names = at.ids.map(normaliseUnittestId).filter((id) => !id.startsWith('unittest.loader.'));
  const labels = [...new Set([...modules, ...names])].filter((l) => DOTTED.test(l) && !modules.some((m) => l !== m && l.startsWith(`${m}.`)));
  if (labels.length === 0) return null;
  const manage = wordIndex(at.words, /(^|\/)manage\.py$/);
  if (manage >= 0 && at.words[manage + 1]?.value === 'test') return append(at.command, labels);
  const unittest = wordIndex(at.words, /^unittest$/);
  if (unittest < 1 || at.words[unittest - 1]!.value !== '-m') return null;
  if (at.words[unittest + 1]?.value !== 'discover') return append(at.command, labels);
  return replaceDiscover(at, unittest, labels);
}

const DISCOVER_VALUES = new Set(['-s', '--start-directory', '-t', '--top-level-directory', '-p', '--pattern']);

/**
 * `unittest discover`: dotted names resolve from the current directory, which is discovery's top
 * level (`-t`, else `-s`, else `.`). When that is `.`, `discover ...` becomes the names. Otherwise
 * (`discover -s tests`, common without an `__init__.py`) one test module can still be chosen with
 * `-p module.py`; several cannot, and null is returned.
 */
function replaceDiscover(at: Selection, unittest: number, labels: string[]): string | null {
  const rest = at.words.slice(unittest + 2);
  const kept: string[] = [];
  const dirs: Record<'s' | 't', string | null> = { s: null, t: null };
  for (let i = 0; i < rest.length; i++) {
    const w = rest[i]!;
    if (DISCOVER_VALUES.has(w.value)) {
      const v = rest[++i];
      if (!v) return null;
      const key = w.value.replace(/^--?/, '')[0];
      if (key === 's' || key === 't') dirs[key] = v.value;
      continue;
    }
    if (!w.value.startsWith('-')) return null;
    kept.push(at.command.slice(w.start, w.end));
  }
  const top = (dirs.t ?? dirs.s ?? '.').replace(/^\.\/|\/$/g, '') || '.';
  const head = at.command.slice(0, at.words[unittest]!.end);
  if (top === '.') return append([head, ...kept].join(' '), labels);
  const inTop = at.files.filter((f) => f.startsWith(`${top}/`)).map((f) => f.slice(top.length + 1));
  const modules = new Set([...inTop.filter((f) => /^\w+\.py$/.test(f)).map((f) => f.slice(0, -3)), ...at.ids.map(normaliseUnittestId).filter((id) => DOTTED.test(id) && id.split('.').length >= 3).map((id) => id.split('.').slice(0, -2).join('.'))]);
  const only = [...modules][0];
  if (modules.size !== 1 || !only || only.includes('.') || inTop.length !== at.files.length) return null;
  const dirArgs = [...(dirs.s !== null ? ['-s', dirs.s] : []), ...(dirs.t !== null ? ['-t', dirs.t] : [])];
  return append(`${head} discover${kept.length ? ` ${kept.join(' ')}` : ''}`, [...dirArgs, '-p', `${only}.py`]);
}

const SCRIPT_FILE = /\.[cm]?[jt]sx?$/;
const DIRECT: Record<'node-test' | 'jest' | 'vitest' | 'mocha', RegExp> = {
  'node-test': /^--test$/,
  jest: /(^|\/)jest$/,
  vitest: /(^|\/)vitest$/,
  mocha: /(^|\/)mocha$/,
};

/**
 * JavaScript runners take test files: named to the runner itself when the command calls it, or
 * passed through the package manager's test script (`npm test -- <files>`, `yarn test <files>`,
 * as parseableCommand passes `--verbose`). jest reads its arguments as patterns unless told they
 * are paths. Ids (`file::suite > test`) run their whole file.
 */
function selectScripts(runner: keyof typeof DIRECT, at: Selection): string | null {
  const files = [...new Set([...at.files, ...at.ids.filter((id) => id.includes('::')).map((id) => id.slice(0, id.indexOf('::')))])].filter((f) => SCRIPT_FILE.test(f) && safePath(f));
  if (files.length === 0) return null;
  const args = runner === 'jest' ? ['--runTestsByPath', ...files] : files;
  if (wordIndex(at.words, DIRECT[runner]) >= 0) return append(at.command, args);
  const pm = packageManager(at.words);
  if (pm === null) return null;
  if (pm === 'yarn') return append(at.command, args);
  return at.words.some((w) => w.value === '--') ? append(at.command, args) : `${at.command} -- ${args.map(shellQuote).join(' ')}`;
}

/** `npm test`, `pnpm run test`, `yarn test`, `node .yarn/releases/yarn-4.cjs test`, after any assignments. */
function packageManager(words: Word[]): 'npm' | 'pnpm' | 'yarn' | null {
  const rest = words.filter((w, i) => !(isAssignment(w) && words.slice(0, i).every(isAssignment))).map((w) => w.value);
  let pm: string | undefined = rest[0];
  let at = 1;
  if (pm === 'node' && /(^|\/)yarn[\w.-]*\.c?js$/.test(rest[1] ?? '')) {
    pm = 'yarn';
    at = 2;
  }
  if (pm !== 'npm' && pm !== 'pnpm' && pm !== 'yarn') return null;
  const script = rest[at] === 'run' || rest[at] === 'run-script' ? rest[at + 1] : rest[at];
  return script === 'test' || (pm === 'npm' && script === 't') ? pm : null;
}
