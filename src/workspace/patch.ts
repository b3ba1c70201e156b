import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { findLeftovers, type LeftOutPath } from './leftovers.ts';
import { SANDBOX_GIT } from './sandbox-git.ts';
import { mustRun, withTrustedGit, type TrustedGit } from './trusted-git.ts';

export { SANDBOX_GIT } from './sandbox-git.ts';

const MAX_PATCH_BYTES = 64 * 1024 * 1024;
/** NUL-separated path lists (the base commit's files, what changed). */
const MAX_LIST_BYTES = 64 * 1024 * 1024;

export interface ExtractedPatch {
  diff: Buffer;
  files: string[];
  /** Changed files that are not part of the change (build leftovers, setup output), and why. */
  leftOut: LeftOutPath[];
}

/** What the setup commands left: the commit recording it, and the untracked files they created. */
export interface SetupState {
  commit: string;
  created: string[];
}

/**
 * The patch as the reference takes it: the working tree against the base commit, new files
 * included, binary-safe (`git add -A`, `git diff --cached --binary <base>`). It leaves the
 * container as data; host git never runs inside the agent's .git, and neither does the git that
 * reads it here: withTrustedGit() gives it a git folder, index and configuration of Lilypad's, so
 * no filter, attribute, exclude or index flag the agent set can make the patch differ from its
 * worktree.
 *
 * Left out, by putting them back in the index as they are at the base commit before the diff:
 * files the agent did not touch after setup (`setup.commit`), and what findLeftovers decides (and
 * reports) among the rest: files setup created (`setup.created`) and build leftovers (bytecode,
 * caches, installed packages, unless the repository tracks such paths). The patch still applies
 * to the repository as it is on GitHub.
 */
export async function extractPatch(sandbox: Sandbox, baseCommit: string, setup?: SetupState): Promise<ExtractedPatch> {
  return withTrustedGit(sandbox, setup?.commit ?? baseCommit, (git) => readPatch(sandbox, git, baseCommit, setup));
}

async function readPatch(sandbox: Sandbox, git: TrustedGit, baseCommit: string, setup: SetupState | undefined): Promise<ExtractedPatch> {
  const list = async (what: string, args: string[]): Promise<string[]> => {
    const res = await mustRun(sandbox, git, what, args, MAX_LIST_BYTES);
    if (res.stdoutBytes > MAX_LIST_BYTES) throw new SandboxError(`${what} listed more than ${MAX_LIST_BYTES} bytes of paths; refusing to take the patch`);
    return res.stdout.toString('utf8').split('\0').filter(Boolean);
  };
  const diffArgs = ['--cached', '--no-renames', '--no-ext-diff', '--no-textconv', '--no-color'];
  await mustRun(sandbox, git, 'git add -A', ['add', '-A']);
  let changed = await list('listing the changed files', ['diff', ...diffArgs, '--name-only', '-z', baseCommit]);
  if (changed.length === 0) return { diff: Buffer.alloc(0), files: [], leftOut: [] };
  // What only setup changed was never the agent's work: it goes without a mention, as it always did.
  const revert: string[] = [];
  if (setup && setup.commit !== baseCommit) {
    const touched = new Set(await list('listing the files changed after setup', ['diff', ...diffArgs, '--name-only', '-z', setup.commit]));
    revert.push(...changed.filter((p) => !touched.has(p)));
    changed = changed.filter((p) => touched.has(p));
  }
  const tracked = await list('listing the files of the base commit', ['ls-tree', '-r', '-z', '--name-only', '--full-tree', baseCommit]);
  const { leftOut } = findLeftovers({ paths: changed, tracked, setupCreated: new Set(setup?.created ?? []) });
  revert.push(...leftOut.map((l) => l.path));
  if (revert.length > 0) await resetToBase(sandbox, git, baseCommit, revert);
  const diff = await mustRun(sandbox, git, 'git diff', ['diff', ...diffArgs, '--binary', baseCommit], MAX_PATCH_BYTES);
  if (diff.stdoutBytes > MAX_PATCH_BYTES) throw new SandboxError(`the patch is larger than ${MAX_PATCH_BYTES} bytes; refusing to publish it`);
  const files = await list("listing the patch's files", ['diff', ...diffArgs, '--name-only', '-z', baseCommit]);
  return { diff: diff.stdout, files, leftOut };
}

/** Bytes of paths one exec carries as arguments: well below the kernel's limit for a command line. */
const ARG_CHUNK_BYTES = 96 * 1024;

/**
 * Puts `paths` back in the index as they are at `base` (a path the base lacks leaves the index).
 * The list can be long (a node_modules/): it goes to a file in the container (withPathList), and
 * `git reset` reads it from there.
 */
async function resetToBase(sandbox: Sandbox, git: TrustedGit, base: string, paths: string[]): Promise<void> {
  await withPathList(sandbox, paths, 'the list of left-out files', async (listFile) => {
    await mustRun(sandbox, git, 'leaving files out of the patch', ['--literal-pathspecs', 'reset', '-q', base, `--pathspec-from-file=${listFile}`, '--pathspec-file-nul']);
  });
}

/**
 * Writes `paths` NUL-separated to a temporary file in the container's /tmp, in chunks that fit on
 * a command line, runs `fn` with its name, and removes it.
 */
export async function withPathList<T>(sandbox: Sandbox, paths: string[], what: string, fn: (listFile: string) => Promise<T>): Promise<T> {
  const run = (args: string[]) => sandbox.exec(args, { cwd: sandbox.options.workdir, timeoutSeconds: 300 });
  const made = await run(['mktemp', '/tmp/lilypad-pathspec.XXXXXX']);
  const listFile = made.stdout.toString().trim();
  if (made.exitCode !== 0 || !listFile) throw new SandboxError(`could not create a file in the sandbox's /tmp: ${made.stderr.toString().trim()}`);
  try {
    for (let i = 0; i < paths.length; ) {
      const chunk: string[] = [];
      let bytes = 0;
      while (i < paths.length && (chunk.length === 0 || bytes + Buffer.byteLength(paths[i]!) + 1 <= ARG_CHUNK_BYTES)) {
        bytes += Buffer.byteLength(paths[i]!) + 1;
        chunk.push(paths[i++]!);
      }
      const append = await run(['/bin/bash', '-c', 'f=$1; shift; printf \'%s\\0\' "$@" >> "$f"', 'append', listFile, ...chunk]);
      if (append.exitCode !== 0) throw new SandboxError(`writing ${what} failed in the sandbox: ${append.stderr.toString().trim()}`);
    }
    return await fn(listFile);
  } finally {
    await run(['rm', '-f', '--', listFile]);
  }
}

/**
 * Files the setup commands created or changed (build output, lock files, egg-info) are not the
 * agent's work: record them in a commit of their own, and the untracked files among them by name;
 * the patch then takes only what changed after, and never a file setup created.
 */
export async function commitSetupState(sandbox: Sandbox, baseCommit: string): Promise<SetupState> {
  const git = [...SANDBOX_GIT, '-c', 'user.name=Lilypad', '-c', 'user.email=lilypad@localhost'];
  const run = (args: string[], keepBytes?: number) => sandbox.exec(args, { cwd: sandbox.options.workdir, timeoutSeconds: 300, ...(keepBytes ? { keepBytes } : {}) });
  const status = await run([...git, 'status', '--porcelain']);
  if (status.exitCode !== 0 || status.stdout.length === 0) return { commit: baseCommit, created: [] };
  const untracked = await run([...git, 'ls-files', '-z', '--others', '--exclude-standard'], MAX_LIST_BYTES);
  if (untracked.exitCode !== 0 || untracked.stdoutBytes > MAX_LIST_BYTES) {
    throw new SandboxError(`listing the files the setup commands created failed in the sandbox: ${untracked.stderr.toString().trim() || 'too many files'}`);
  }
  const created = untracked.stdout.toString('utf8').split('\0').filter(Boolean);
  await run([...git, 'add', '-A']);
  const commit = await run([...git, 'commit', '-q', '--no-verify', '-m', 'State after the setup commands']);
  if (commit.exitCode !== 0) return { commit: baseCommit, created };
  return { commit: (await run([...git, 'rev-parse', 'HEAD'])).stdout.toString().trim() || baseCommit, created };
}
