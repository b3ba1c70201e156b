import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';

const MAX_PATCH_BYTES = 64 * 1024 * 1024;

// The repository's .git is writable by the agent: neutralise everything in it that could run a
// program or rewrite the diff (hooks, fsmonitor, external diff drivers, textconv, pagers).
export const SANDBOX_GIT = ['git', '-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'core.pager=cat', '-c', 'diff.external=', '-c', 'core.quotepath=false'];

export interface ExtractedPatch {
  diff: Buffer;
  files: string[];
}

/**
 * The patch as the reference takes it: the working tree against the base commit, new files
 * included, binary-safe (`git add -A`, `git diff --cached --binary <base>`, `git reset`). It
 * leaves the container as data; host git never runs inside the agent's .git.
 *
 * With `changedSince` (the commit recording what setup commands did), only the files the agent
 * changed after it are included, still diffed against the base commit, so that the patch applies
 * to the repository as it is on GitHub while setup output stays out.
 */
export async function extractPatch(sandbox: Sandbox, baseCommit: string, changedSince?: string): Promise<ExtractedPatch> {
  const workdir = sandbox.options.workdir;
  const run = (args: string[], keepBytes?: number) => sandbox.exec(args, { cwd: workdir, timeoutSeconds: 300, ...(keepBytes ? { keepBytes } : {}) });
  const add = await run([...SANDBOX_GIT, 'add', '-A']);
  if (add.exitCode !== 0) throw new SandboxError(`git add -A failed in the sandbox: ${add.stderr.toString().trim()}`);
  try {
    let pathspec: string[] = [];
    if (changedSince && changedSince !== baseCommit) {
      const touched = await run([...SANDBOX_GIT, 'diff', '--cached', '--name-only', '-z', '--no-renames', changedSince]);
      pathspec = touched.stdout.toString('utf8').split('\0').filter(Boolean);
      if (pathspec.length === 0) return { diff: Buffer.alloc(0), files: [] };
      pathspec = ['--', ...pathspec];
    }
    const literal = pathspec.length > 0 ? ['--literal-pathspecs'] : [];
    const diffArgs = ['--cached', '--no-renames', '--no-ext-diff', '--no-textconv', '--no-color'];
    const diff = await run([...SANDBOX_GIT, ...literal, 'diff', ...diffArgs, '--binary', baseCommit, ...pathspec], MAX_PATCH_BYTES);
    if (diff.exitCode !== 0) throw new SandboxError(`git diff failed in the sandbox: ${diff.stderr.toString().trim()}`);
    if (diff.stdoutBytes > MAX_PATCH_BYTES) throw new SandboxError(`the patch is larger than ${MAX_PATCH_BYTES} bytes; refusing to publish it`);
    const names = await run([...SANDBOX_GIT, ...literal, 'diff', ...diffArgs, '--name-only', '-z', baseCommit, ...pathspec]);
    return { diff: diff.stdout, files: names.stdout.toString('utf8').split('\0').filter(Boolean) };
  } finally {
    await run([...SANDBOX_GIT, 'reset', '-q', '--mixed', 'HEAD']);
  }
}

/**
 * Files the setup commands created or changed (build output, lock files, egg-info) are not the
 * agent's work: record them in a commit of their own; the patch then takes only what changed after.
 */
export async function commitSetupState(sandbox: Sandbox, baseCommit: string): Promise<string> {
  const git = [...SANDBOX_GIT, '-c', 'user.name=Lilypad', '-c', 'user.email=lilypad@localhost'];
  const run = (args: string[]) => sandbox.exec(args, { cwd: sandbox.options.workdir, timeoutSeconds: 300 });
  const status = await run([...git, 'status', '--porcelain']);
  if (status.exitCode !== 0 || status.stdout.length === 0) return baseCommit;
  await run([...git, 'add', '-A']);
  const commit = await run([...git, 'commit', '-q', '--no-verify', '-m', 'State after the setup commands']);
  if (commit.exitCode !== 0) return baseCommit;
  return (await run([...git, 'rev-parse', 'HEAD'])).stdout.toString().trim() || baseCommit;
}
