import { diffFiles } from '../evidence/diff-files.ts';
import { splitPatch } from '../evidence/split-patch.ts';
import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { partitionPaths } from '../workspace/path-filter.ts';
import { SANDBOX_GIT, withPathList } from '../workspace/patch.ts';
import { writeSandboxFile } from '../workspace/sandbox-file.ts';
import type { ReproTests } from './evidence-runs.ts';

/** What of a run's change is published, as the runs that judge it apply it. */
export interface PublishedPatch {
  /** The agent's patch without the files that are never published (under `.github/`, `exclude_paths`). */
  diff: Buffer;
  files: string[];
  /** With the reproduction run's tests added, as the pull request carries them. */
  withRepro: Buffer;
  withReproFiles: string[];
}

/**
 * The change as it will be published, cut from the agent's patch file by file with the same rule
 * the publishing step applies (partitionPaths), plus the reproduction run's tests where the change
 * did not write those files itself. This, and nothing else, is what the tests after the change and
 * the evidence runs apply.
 */
export function publishedPatch(diff: Buffer, repro: ReproTests | null, excludePaths: string[]): PublishedPatch {
  const sections = diffFiles(diff);
  const { kept } = partitionPaths(
    sections.map((f) => f.path),
    excludePaths,
  );
  const keep = new Set(kept);
  const own = sections.filter((f) => keep.has(f.path));
  const text = Buffer.from(own.map((f) => f.text).join(''), 'latin1');
  const files = own.map((f) => f.path);
  const withRepro = withReproTests(text, repro);
  return { diff: text, files, withRepro, withReproFiles: withRepro === text ? files : [...files, ...(repro?.files ?? [])] };
}

/** The change with the reproduction run's test files added, unless the change wrote those files itself (or is empty). */
export function withReproTests(patch: Buffer, repro: ReproTests | null): Buffer {
  if (!repro || patch.length === 0) return patch;
  const own = splitPatch(patch);
  if (repro.files.some((f) => own.testFiles.includes(f) || own.codeFiles.includes(f))) return patch;
  return Buffer.concat([patch, repro.patch]);
}

/** Git in a fresh sandbox: its .git is Lilypad's, and no configuration of the system or the user's applies. */
const CLEAN_GIT_ENV = { GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_ATTR_NOSYSTEM: '1' };

/**
 * Applies `patch` (a diff against `baseCommit`, touching `files`) to a fresh sandbox's worktree, as
 * publishing applies it to the base: each file the patch touches is first put back as the base has
 * it (a lockfile setup rewrote and the agent then edited is in the patch whole, against the base),
 * every other file keeps what setup left. A patch that does not apply is a SandboxError naming it.
 */
export async function applyPatch(sandbox: Sandbox, patch: Buffer, files: string[], baseCommit: string, what: string): Promise<void> {
  if (patch.length === 0) return;
  const git = (args: string[]) => sandbox.exec([...SANDBOX_GIT, ...args], { cwd: sandbox.options.workdir, env: CLEAN_GIT_ENV, timeoutSeconds: 300 });
  const must = async (step: string, args: string[]) => {
    const res = await git(args);
    if (res.exitCode !== 0) throw new SandboxError(`${step} failed in the sandbox: ${res.stderr.toString().trim() || `exit ${res.exitCode}`}`);
  };
  const sections = diffFiles(patch).filter((f) => files.includes(f.path));
  const inBase = sections.filter((f) => f.status !== 'added').map((f) => f.path);
  const added = sections.filter((f) => f.status === 'added').map((f) => f.path);
  if (inBase.length > 0) {
    await withPathList(sandbox, inBase, `the files ${what} touches`, (list) =>
      must(`putting the files ${what} touches back as the base has them`, ['--literal-pathspecs', 'checkout', '-q', baseCommit, `--pathspec-from-file=${list}`, '--pathspec-file-nul']),
    );
  }
  if (added.length > 0) {
    await withPathList(sandbox, added, `the files ${what} adds`, async (list) => {
      const res = await sandbox.exec(['/bin/sh', '-c', 'xargs -0 -r rm -rf -- < "$1"', 'rm', list], { cwd: sandbox.options.workdir, timeoutSeconds: 300 });
      if (res.exitCode !== 0) throw new SandboxError(`clearing the files ${what} adds failed in the sandbox: ${res.stderr.toString().trim()}`);
    });
  }
  const file = await writeSandboxFile(sandbox, patch, what);
  try {
    await must(`applying ${what}`, ['apply', '--binary', '--whitespace=nowarn', '--', file]);
  } finally {
    await sandbox.exec(['rm', '-f', '--', file], { cwd: '/', timeoutSeconds: 30 });
  }
}
