import vm from 'node:vm';
import picomatch from 'picomatch';

/**
 * The one place glob patterns are compiled (picomatch syntax): `exclude_paths` in
 * .github/lilypad.yml and the sandbox image allowlist (LILYPAD_ALLOWED_IMAGES).
 *
 * Shared choices, for both kinds:
 * - `*` and `?` stay within one `/`-separated segment; `**` spans segments;
 * - `{a,b}` alternatives and `[abc]` classes work; `*` also matches names starting with a dot;
 * - extglobs (`+(a|b)`) and leading-`!` negation are off: `!` is an ordinary character.
 *
 * Matching is bounded in time. picomatch compiles to a backtracking RegExp, and a pattern such as
 * `*a*a*a*a*b` against a 255-character file name the agent chose takes minutes, which would freeze the
 * worker's event loop (and with it every other job's lock renewals). Matching runs in a `vm` context
 * whose timeout interrupts the RegExp engine; running out of time is a GlobError, never a guess.
 */

export class GlobError extends Error {
  override name = 'GlobError';
}

const PICOMATCH_OPTIONS: picomatch.PicomatchOptions = { dot: true, noextglob: true, nonegate: true };

/** Default time for matching one batch of subjects against one set of patterns. */
const MATCH_BUDGET_MS = 2000;

interface CompiledGlob {
  pattern: string;
  regex: RegExp;
  /** Path patterns ending in `/` name directories only: they match ancestors, never the file itself. */
  dirOnly: boolean;
}

/** A compiled list of patterns; `firstMatches` answers, per subject, which pattern matched first. */
interface GlobSet {
  readonly patterns: readonly string[];
  /** Index into `patterns` of the first pattern matching each subject, or -1. */
  firstMatches(subjects: readonly string[], budgetMs?: number): number[];
}

function compileOne(source: string, pattern: string, dirOnly: boolean): CompiledGlob {
  let regex: RegExp;
  try {
    regex = picomatch.makeRe(source, PICOMATCH_OPTIONS);
  } catch (err) {
    throw new GlobError(`the pattern \`${pattern}\` is not a valid glob: ${(err as Error).message}`);
  }
  return { pattern, regex, dirOnly };
}

/**
 * Repository paths, gitignore-like:
 * - a pattern without a `/` (other than a trailing one), such as `*.lock` or `node_modules`, matches
 *   a file or directory name at any depth (what gitignore does, and what users of `exclude_paths`
 *   expect: `*.lock` covers `web/yarn.lock` too);
 * - a pattern with a `/` in it is relative to the repository root (a leading `/` or `./` only anchors);
 * - a pattern that matches a directory covers everything below it; one ending in `/` matches only
 *   directories (`docs/` covers `docs/a.md`, but not a file named `docs`).
 */
export function compilePathGlobs(patterns: readonly string[]): GlobSet {
  const compiled = patterns.map((pattern) => {
    let source = pattern.trim();
    const dirOnly = source.endsWith('/');
    source = source.replace(/\/+$/, '');
    const anchored = /^\.?\//.test(source);
    source = source.replace(/^(?:\.?\/)+/, '');
    if (source === '') throw new GlobError(`the pattern \`${pattern}\` names no path`);
    if (!anchored && !source.includes('/')) source = `**/${source}`;
    return compileOne(source, pattern, dirOnly);
  });
  return {
    patterns: [...patterns],
    firstMatches: (paths, budgetMs = MATCH_BUDGET_MS) => runBounded(compiled, paths.map(pathCandidates), budgetMs, `${paths.length} path(s)`),
  };
}

/**
 * Image references such as `lilypad-sandbox:py38` or `registry.example/sandboxes/python:3.12`, matched
 * whole, as written (no Docker Hub normalisation): `lilypad-sandbox:*` allows every tag of that one
 * image and nothing in another namespace (`*` never crosses a `/`); `registry.example/sandboxes/**`
 * allows everything below that path; `**` alone allows every image.
 */
export function compileImageGlobs(patterns: readonly string[]): GlobSet {
  const compiled = patterns.map((pattern) => compileOne(pattern.trim(), pattern, false));
  return {
    patterns: [...patterns],
    firstMatches: (images, budgetMs = MATCH_BUDGET_MS) =>
      runBounded(
        compiled,
        images.map((image) => ({ dirs: [], whole: image })),
        budgetMs,
        `${images.length} image name(s)`,
      ),
  };
}

interface Candidates {
  /** Proper ancestor directories, shortest first (`a`, `a/b` for `a/b/c.txt`). */
  dirs: string[];
  whole: string;
}

function pathCandidates(file: string): Candidates {
  const parts = file.split('/');
  const dirs: string[] = [];
  for (let i = 1; i < parts.length; i++) dirs.push(parts.slice(0, i).join('/'));
  return { dirs, whole: file };
}

// Runs in the vm context: plain JavaScript over the data it is handed, nothing else reachable.
const MATCH_SCRIPT = new vm.Script(`
  result = subjects.map((s) => globs.findIndex((g) => (!g.dirOnly && g.regex.test(s.whole)) || s.dirs.some((d) => g.regex.test(d))));
`);

function runBounded(globs: CompiledGlob[], subjects: Candidates[], budgetMs: number, what: string): number[] {
  if (globs.length === 0 || subjects.length === 0) return subjects.map(() => -1);
  const context = vm.createContext({ globs, subjects, result: undefined as unknown });
  try {
    MATCH_SCRIPT.runInContext(context, { timeout: budgetMs });
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
      throw new GlobError(
        `matching ${what} against the patterns ${globs.map((g) => `\`${g.pattern}\``).join(', ')} took longer than ${budgetMs} ms; ` +
          'simplify the patterns (several `*` in one name, or several `**`, make matching slow)',
      );
    }
    throw err;
  }
  const result: unknown = context['result'];
  if (!Array.isArray(result)) throw new GlobError('glob matching produced no result');
  return Array.from(result, (n) => Number(n));
}
