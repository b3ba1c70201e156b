import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { cloneAtCommit } from './clone-at-commit.ts';
import { GitError, git } from './git.ts';

export interface LocalCheckout {
  /** A fresh clone at the repository's HEAD; the user's own checkout is never touched. */
  dir: string;
  baseCommit: string;
  /** True when the user's working tree had uncommitted changes (they are not part of the run). */
  sourceDirty: boolean;
  dispose(): Promise<void>;
}

/** Clones a local repository's HEAD into a temporary directory. */
export async function cloneLocalRepository(repoPath: string): Promise<LocalCheckout> {
  const source = path.resolve(repoPath);
  const info = await stat(source).catch(() => undefined);
  if (!info?.isDirectory()) throw new GitError(`--repo ${repoPath}: no such directory`);
  let baseCommit: string;
  try {
    baseCommit = (await git(['rev-parse', '--verify', 'HEAD^{commit}'], { cwd: source })).trim();
  } catch {
    throw new GitError(`--repo ${repoPath} is not a git repository with at least one commit; run \`git init && git add -A && git commit\` there first`);
  }
  const dirty = (await git(['status', '--porcelain', '--untracked-files=no'], { cwd: source }).catch(() => '')).trim() !== '';
  const parent = await mkdtemp(path.join(os.tmpdir(), 'lilypad-clone-'));
  const dir = path.join(parent, 'repo');
  try {
    // A real copy through git's transport (no hard links, no alternates into the user's checkout),
    // of HEAD and its history only: the user's other branches, tags and stashes stay out.
    await cloneAtCommit(source, baseCommit, dir);
  } catch (err) {
    await rm(parent, { recursive: true, force: true });
    throw err;
  }
  return { dir, baseCommit, sourceDirty: dirty, dispose: () => rm(parent, { recursive: true, force: true }) };
}
