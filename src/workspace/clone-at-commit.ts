import { GitError, git, gitRun } from './git.ts';

/**
 * A checkout of exactly one commit and its history, and nothing newer: `git init` and a fetch of
 * that one commit by id. Unlike a clone, it brings no branch, tag, note, reflog or packed object
 * from after the commit (a clone of a repository whose default branch holds the merged fix hands
 * the agent the answer, in eval, through `git log --all`). The commit is checked out detached; the
 * repository has no refs at all and keeps no reflog.
 */
export async function cloneAtCommit(source: string, commit: string, dir: string, env?: NodeJS.ProcessEnv): Promise<string> {
  await git(['init', '--quiet', dir]);
  await git(['config', 'core.logAllRefUpdates', 'false'], { cwd: dir });
  const fetched = await gitRun(['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', '--', source, commit], { cwd: dir, ...(env ? { env } : {}) });
  if (fetched.code !== 0) throw new GitError(`could not fetch commit ${commit} from ${source}: ${fetched.stderr.trim() || `git exited ${fetched.code}`}`);
  const resolved = await gitRun(['rev-parse', '--verify', '--quiet', `${commit}^{commit}`], { cwd: dir });
  if (resolved.code !== 0) throw new GitError(`${commit} is not a commit of ${source}`);
  const full = resolved.stdout.trim();
  await git(['checkout', '--quiet', '--detach', full], { cwd: dir });
  return full;
}
