import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git } from './git.ts';
import { gitAuthEnv } from './mirror.ts';
import { partitionPaths, type DroppedPath } from './path-filter.ts';

export interface ChangedFile {
  path: string;
  added: number | null;
  removed: number | null;
}

export interface PreparedChange {
  /** Host clone at the base commit with the allowed part of the patch applied and committed. */
  dir: string;
  files: ChangedFile[];
  dropped: DroppedPath[];
  /** False when nothing is left to publish after filtering. */
  hasChanges: boolean;
  headSha: string | null;
  dispose(): Promise<void>;
}

/** Per-file counts of a patch, read by git itself (`git apply --numstat`). */
export async function patchFiles(cwd: string, patch: Buffer): Promise<ChangedFile[]> {
  if (patch.length === 0) return [];
  const out = await git(['apply', '--numstat', '-z', '-'], { cwd, input: patch });
  return out
    .split('\0')
    .filter(Boolean)
    .map((entry) => {
      const [added, removed, ...rest] = entry.split('\t');
      return { path: rest.join('\t'), added: added === '-' ? null : Number(added), removed: removed === '-' ? null : Number(removed) };
    });
}

const escapeGlob = (p: string) => p.replace(/[\\*?[\]]/g, '\\$&');

/**
 * Applies the agent's patch to a fresh clone made from the mirror, as data: the agent's .git never
 * touches the host, and hooks are off for every host git command. Paths that may not be published
 * (workflows, configured exclusions) are left out and reported. Commits as the app.
 */
export async function prepareChange(opts: {
  mirrorDir: string;
  baseCommit: string;
  patch: Buffer;
  excludePaths: string[];
  message: string;
  author: { name: string; email: string };
}): Promise<PreparedChange> {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'lilypad-publish-'));
  const dir = path.join(parent, 'repo');
  const dispose = () => rm(parent, { recursive: true, force: true });
  try {
    await git(['clone', '--quiet', '--no-checkout', opts.mirrorDir, dir]);
    await git(['checkout', '--quiet', '--detach', opts.baseCommit], { cwd: dir });
    const all = await patchFiles(dir, opts.patch);
    const { kept, dropped } = partitionPaths(
      all.map((f) => f.path),
      opts.excludePaths,
    );
    const files = all.filter((f) => kept.includes(f.path));
    if (kept.length === 0) return { dir, files, dropped, hasChanges: false, headSha: null, dispose };
    await git(['apply', '--binary', '--index', '--whitespace=nowarn', ...dropped.map((d) => `--exclude=${escapeGlob(d.path)}`), '-'], {
      cwd: dir,
      input: opts.patch,
    });
    await git(['-c', `user.name=${opts.author.name}`, '-c', `user.email=${opts.author.email}`, 'commit', '--quiet', '--no-verify', '-m', opts.message], {
      cwd: dir,
    });
    const headSha = (await git(['rev-parse', 'HEAD'], { cwd: dir })).trim();
    return { dir, files, dropped, hasChanges: true, headSha, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

/** Force-pushes the prepared commit to `branch` (re-runs update the same branch). */
export async function pushBranch(dir: string, cloneUrl: string, branch: string, authHeader: string): Promise<void> {
  await git(['push', '--force', '--quiet', '--no-verify', cloneUrl, `HEAD:refs/heads/${branch}`], { cwd: dir, env: gitAuthEnv(authHeader) });
}
