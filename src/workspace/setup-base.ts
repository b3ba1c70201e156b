import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { GitError, git, gitRun } from './git.ts';
import { SANDBOX_GIT, withPathList } from './patch.ts';

/*
 * A follow-up's setup commands run with network, so they run on the code a human owns: the pull
 * request's base, never its head (which holds Lilypad's own unreviewed commits: an issue could
 * steer the first run into writing a setup.py, a postinstall script or a requirements entry).
 * The host hands the sandbox a checkout of the head's branch with its worktree at the base
 * (checkoutSetupBase); once setup is over and the network is cut, the sandbox moves it to the head
 * (moveToHead), keeping what setup built.
 */

interface GitOpts {
  timeoutMs?: number;
  signal?: AbortSignal | undefined;
}

/**
 * Puts the worktree of `checkoutDir` (a clone of the pull request's branch, at `head`) on the
 * commit the pull request is based on: the merge base of `head` and the base branch as the mirror
 * has it, detached. The branch still points at `head`, and its objects stay, for moveToHead.
 * HEAD is written as a file, as moveToHead writes it back, so that the reflog the agent may read
 * is the clone's, as before. Returns the base commit, or null when the head and the base branch
 * share no history.
 */
export async function checkoutSetupBase(mirrorDir: string, checkoutDir: string, head: string, baseBranch: string, opts: GitOpts = {}): Promise<string | null> {
  const found = await gitRun(['--git-dir', mirrorDir, 'merge-base', head, `refs/heads/${baseBranch}`], opts);
  if (found.code === 1) return null;
  if (found.code !== 0) throw new GitError(`could not find the base of the pull request (\`${baseBranch}\`) in the mirror: ${found.stderr.trim() || `git exited ${found.code}`}`);
  const base = found.stdout.trim().split('\n')[0]!;
  const inClone = await gitRun(['rev-parse', '--verify', '--quiet', `${base}^{commit}`], { cwd: checkoutDir, ...opts });
  if (inClone.code !== 0 || inClone.stdout.trim() !== base) throw new GitError(`the pull request's base ${base} is not in the history of its head ${head}`);
  const gitDir = path.resolve(checkoutDir, (await git(['rev-parse', '--git-dir'], { cwd: checkoutDir, ...opts })).trim());
  await writeFile(path.join(gitDir, 'HEAD'), `${base}\n`);
  await git(['read-tree', '--reset', '-u', base], { cwd: checkoutDir, ...opts });
  return base;
}

/**
 * In the sandbox, after setup (the network already cut): the worktree moves from `base` to `head`,
 * HEAD onto `branch` (which points at `head`), as a checkout of the head would have it. Every path
 * the head changed since the base is put as the head has it, over whatever setup did to it; every
 * other path keeps what setup left (built files, installed packages, changed tracked files), which
 * commitSetupState then records as setup's, as on any other run. Only git runs here, with the
 * sandbox's hardened options; none of the head's code does.
 */
export async function moveToHead(sandbox: Sandbox, base: string, head: string, branch: string): Promise<void> {
  const workdir = sandbox.options.workdir;
  const run = (args: string[]) => sandbox.exec(args, { cwd: workdir, timeoutSeconds: 300, keepBytes: 64 * 1024 * 1024 });
  const must = async (what: string, args: string[]) => {
    const res = await run(args);
    if (res.exitCode !== 0) throw new SandboxError(`${what} failed in the sandbox: ${res.stderr.toString().trim() || `exit ${res.exitCode}`}`);
    return res.stdout.toString('utf8');
  };
  const changed = async (filter: string) => (await must('listing what the pull request changed', [...SANDBOX_GIT, 'diff-tree', '-r', '-z', '--no-renames', '--name-only', `--diff-filter=${filter}`, base, head])).split('\0').filter(Boolean);
  const deleted = await changed('D');
  const written = await changed('d');
  // The index becomes the head's, whatever setup did to the worktree (a merge would refuse a
  // file setup changed that the head changed too).
  await must('reading the head into the index', [...SANDBOX_GIT, 'read-tree', head]);
  if (deleted.length > 0) {
    await withPathList(sandbox, deleted, 'the list of files the pull request deleted', (list) => must('removing the files the pull request deleted', ['/bin/sh', '-c', 'xargs -0 -r rm -rf -- < "$1"', 'rm', list]));
  }
  if (written.length > 0) {
    await withPathList(sandbox, written, 'the list of files the pull request changed', (list) =>
      must('checking out the pull request\'s files', [...SANDBOX_GIT, '--literal-pathspecs', 'checkout', '-f', `--pathspec-from-file=${list}`, '--pathspec-file-nul']),
    );
  }
  await must(`checking the branch name ${branch}`, [...SANDBOX_GIT, 'check-ref-format', `refs/heads/${branch}`]);
  const headFile = (await must('finding the repository\'s HEAD', [...SANDBOX_GIT, 'rev-parse', '--git-path', 'HEAD'])).trim();
  await must('putting HEAD on the pull request\'s branch', ['/bin/sh', '-c', 'printf "ref: refs/heads/%s\\n" "$1" > "$2"', 'head', branch, headFile]);
  const now = (await must('reading HEAD', [...SANDBOX_GIT, 'rev-parse', '--verify', 'HEAD^{commit}'])).trim();
  if (now !== head) throw new SandboxError(`after setup, the branch ${branch} is at ${now || 'nothing'} instead of the pull request's head ${head}`);
}
