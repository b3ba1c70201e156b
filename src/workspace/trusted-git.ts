import { SandboxError } from '../sandbox/errors.ts';
import type { ExecResult, Sandbox } from '../sandbox/sandbox.ts';
import { SANDBOX_GIT } from './sandbox-git.ts';

/** How to run git in a sandbox so that nothing the agent wrote configures it. */
export interface TrustedGit {
  /** `git` and the flags every call gets. */
  argv: string[];
  /** The environment every call gets: git's own variables, never the agent's. */
  env: Record<string, string>;
}

/**
 * Git for reading a worktree the agent wrote, configured by nothing the agent could write. The
 * repository's own .git is the agent's: its config can name a clean filter that rewrites what is
 * staged (so the patch would differ from the files the tests ran on), its index can hide a change
 * (assume-unchanged, skip-worktree), its info/attributes and info/exclude steer what is taken.
 * So, once every process of the agent is gone (the caller's takeOver()), Lilypad makes a git
 * directory of its own in a new temporary folder: its config, index, attributes and excludes are
 * Lilypad's, the system and global configuration are off, and the agent's repository is used only
 * for its objects (GIT_ALTERNATE_OBJECT_DIRECTORIES): data named by its hash, which can make a
 * patch fail to apply but never configures how it is read. The index starts as `from` (the state
 * right after setup) and `git add -A` reads the worktree afresh.
 *
 * No process of the agent's exists while this runs, so a folder made now cannot be touched.
 */
export async function withTrustedGit<T>(sandbox: Sandbox, from: string, fn: (git: TrustedGit) => Promise<T>): Promise<T> {
  const workdir = sandbox.options.workdir;
  // Only an object id: a name (HEAD, a branch) would be resolved in Lilypad's empty git folder, and
  // resolving it in the agent's .git would trust refs the agent wrote.
  if (!/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(from)) throw new SandboxError(`the patch is read from a commit id, and ${JSON.stringify(from.slice(0, 80))} is not one (a full 40- or 64-digit hex id)`);
  const made = await sandbox.exec(['mktemp', '-d', '/tmp/lilypad-git.XXXXXX'], { cwd: '/', timeoutSeconds: 60 });
  const dir = made.stdout.toString().trim();
  if (made.exitCode !== 0 || !dir) throw new SandboxError(`could not make a folder in the sandbox's /tmp to read the patch: ${made.stderr.toString().trim()}`);
  const git: TrustedGit = {
    argv: [...SANDBOX_GIT, '-c', 'core.attributesFile=/dev/null', '-c', 'core.excludesFile=/dev/null', '-c', 'core.commitGraph=false', '-c', 'core.untrackedCache=false'],
    env: {
      GIT_DIR: `${dir}/git`,
      GIT_WORK_TREE: workdir,
      GIT_INDEX_FILE: `${dir}/index`,
      GIT_ALTERNATE_OBJECT_DIRECTORIES: `${workdir}/.git/objects`,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_ATTR_NOSYSTEM: '1',
      GIT_NO_REPLACE_OBJECTS: '1',
      GIT_OPTIONAL_LOCKS: '0',
      HOME: dir,
      XDG_CONFIG_HOME: dir,
    },
  };
  const run = (what: string, args: string[]) => mustRun(sandbox, git, what, args);
  try {
    await run('making a git folder of its own', ['init', '-q', '--template=']);
    await run(
      "reading the state after setup from the sandbox's repository (was .git removed or replaced?)",
      ['read-tree', from],
    );
    return await fn(git);
  } finally {
    await sandbox.exec(['rm', '-rf', '--', dir], { cwd: '/', timeoutSeconds: 120 }).catch(() => undefined);
  }
}

/** Runs trusted git in the sandbox's worktree; a failure is a SandboxError naming `what`. */
export async function mustRun(sandbox: Sandbox, git: TrustedGit, what: string, args: string[], keepBytes?: number): Promise<ExecResult> {
  const res = await sandbox.exec([...git.argv, ...args], { cwd: sandbox.options.workdir, env: git.env, timeoutSeconds: 300, ...(keepBytes ? { keepBytes } : {}) });
  if (res.exitCode !== 0) throw new SandboxError(`${what} failed in the sandbox: ${res.stderr.toString().trim() || `exit ${res.exitCode}`}`);
  return res;
}
