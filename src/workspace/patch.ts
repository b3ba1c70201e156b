import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';

const MAX_PATCH_BYTES = 64 * 1024 * 1024;

// The repository's .git is writable by the agent: neutralise everything in it that could run a
// program or rewrite the diff (hooks, fsmonitor, external diff drivers, textconv, pagers).
const GIT = ['git', '-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'core.pager=cat', '-c', 'diff.external=', '-c', 'core.quotepath=false'];

export interface ExtractedPatch {
  diff: Buffer;
  files: string[];
}

/**
 * The patch as the reference takes it: the working tree against the base commit, new files
 * included, binary-safe (`git add -A`, `git diff --cached --binary <base>`, `git reset`). It
 * leaves the container as data; host git never runs inside the agent's .git.
 */
export async function extractPatch(sandbox: Sandbox, baseCommit: string): Promise<ExtractedPatch> {
  const workdir = sandbox.options.workdir;
  const add = await sandbox.exec([...GIT, 'add', '-A'], { cwd: workdir, timeoutSeconds: 300 });
  if (add.exitCode !== 0) throw new SandboxError(`git add -A failed in the sandbox: ${add.stderr.toString().trim()}`);
  const diff = await sandbox.exec([...GIT, 'diff', '--cached', '--binary', '--no-renames', '--no-ext-diff', '--no-textconv', '--no-color', baseCommit], {
    cwd: workdir,
    timeoutSeconds: 300,
    keepBytes: MAX_PATCH_BYTES,
  });
  const names = await sandbox.exec([...GIT, 'diff', '--cached', '--name-only', '-z', '--no-renames', baseCommit], { cwd: workdir, timeoutSeconds: 300 });
  await sandbox.exec([...GIT, 'reset', '-q', '--mixed', 'HEAD'], { cwd: workdir, timeoutSeconds: 300 });
  if (diff.exitCode !== 0) throw new SandboxError(`git diff failed in the sandbox: ${diff.stderr.toString().trim()}`);
  if (diff.stdoutBytes > MAX_PATCH_BYTES) throw new SandboxError(`the patch is larger than ${MAX_PATCH_BYTES} bytes; refusing to publish it`);
  const files = names.stdout.toString('utf8').split('\0').filter(Boolean);
  return { diff: diff.stdout, files };
}
