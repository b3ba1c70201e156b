import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git, gitRun, GitError } from './git.ts';
import { gitAuthEnv } from './mirror.ts';
import { partitionPaths, type DroppedPath } from './path-filter.ts';

interface ChangedFile {
  path: string;
  added: number | null;
  removed: number | null;
}

export interface PreparedChange {
  /** Host clone at the base commit with the allowed part of the patch committed. */
  dir: string;
  /** What the commit changes (dropped paths are not in it). */
  files: ChangedFile[];
  dropped: DroppedPath[];
  /** False when nothing is left to publish after filtering. */
  hasChanges: boolean;
  headSha: string | null;
  dispose(): Promise<void>;
}

/** One entry of `git diff --cached --name-status --no-renames -z`. */
interface StagedPath {
  status: string;
  path: string;
}

/**
 * Applies the agent's patch to a fresh clone made from the mirror, as data: the agent's .git never
 * touches the host, and hooks, filters and LFS are off for every host git command. What is published
 * is decided from what git actually staged, path by path, so a rename or deletion cannot carry an
 * excluded path past the filter: renames are not detected, so renaming an excluded file shows as its
 * deletion (dropped: the file stays) plus an addition (judged on its own). Commits as the app.
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
    // 1. A fresh clone at the base commit (a copy, not hard links into the mirror).
    await git(['clone', '--quiet', '--no-local', '--no-checkout', '--', opts.mirrorDir, dir]);
    await git(['checkout', '--quiet', '--detach', opts.baseCommit], { cwd: dir });
    if (opts.patch.length === 0) return { dir, files: [], dropped: [], hasChanges: false, headSha: null, dispose };

    // 2. The whole patch, into the index and the working tree.
    await git(['apply', '--binary', '--index', '--whitespace=nowarn', '-'], { cwd: dir, input: opts.patch });

    // 3. What would be published, and what may not be.
    const staged = await stagedPaths(dir);
    const { dropped } = partitionPaths(
      staged.map((s) => s.path),
      opts.excludePaths,
    );
    await unstage(dir, dropped.map((d) => d.path));

    // 4. Commit what is left, if anything.
    const files = await stagedCounts(dir);
    if (files.length === 0) return { dir, files, dropped, hasChanges: false, headSha: null, dispose };
    const identity = ['-c', `user.name=${opts.author.name}`, '-c', `user.email=${opts.author.email}`];
    await git([...identity, 'commit', '--quiet', '--no-verify', '-m', opts.message], { cwd: dir });
    const headSha = (await git(['rev-parse', 'HEAD'], { cwd: dir })).trim();
    return { dir, files, dropped, hasChanges: true, headSha, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

async function stagedPaths(dir: string): Promise<StagedPath[]> {
  const out = await git(['diff', '--cached', '--name-status', '--no-renames', '-z', 'HEAD'], { cwd: dir });
  const fields = out.split('\0');
  const entries: StagedPath[] = [];
  // -z: "<status>\0<path>\0" per entry (renames and copies, which carry two paths, are off).
  for (let i = 0; i + 1 < fields.length; i += 2) entries.push({ status: fields[i]!, path: fields[i + 1]! });
  return entries;
}

/** Puts dropped paths back in the index as they are at HEAD (the working tree is never read again). */
async function unstage(dir: string, paths: string[]): Promise<void> {
  if (paths.length === 0) return;
  await git(['--literal-pathspecs', 'reset', '--quiet', 'HEAD', '--pathspec-from-file=-', '--pathspec-file-nul'], { cwd: dir, input: `${paths.join('\0')}\0` });
}

/** Per-file line counts of what is staged (binary files count as null). */
async function stagedCounts(dir: string): Promise<ChangedFile[]> {
  const out = await git(['diff', '--cached', '--numstat', '--no-renames', '-z', 'HEAD'], { cwd: dir });
  return out
    .split('\0')
    .filter(Boolean)
    .map((entry) => {
      const [added, removed, ...rest] = entry.split('\t');
      return { path: rest.join('\t'), added: added === '-' ? null : Number(added), removed: removed === '-' ? null : Number(removed) };
    });
}

/** The committed change as a binary diff against its parent: what is published, and nothing else. */
export async function changeDiff(change: PreparedChange): Promise<Buffer> {
  if (!change.hasChanges) return Buffer.alloc(0);
  const res = await gitRun(['diff', '--binary', '--no-renames', 'HEAD~1', 'HEAD'], { cwd: change.dir });
  if (res.code !== 0) throw new GitError(`git diff of the prepared change failed: ${res.stderr.trim()}`);
  return res.stdoutBytes;
}

type PushResult = 'pushed' | 'lease-failed';

/**
 * Pushes the prepared commit to `branch`, only while the branch is still at `lease.expected` (null:
 * the branch must not exist yet), so a push someone else made since is never overwritten. A lost
 * lease resolves to 'lease-failed'; any other failure (a server's refusal included) throws GitError.
 */
export async function pushBranch(dir: string, cloneUrl: string, branch: string, authHeader: string, lease: { expected: string | null }, signal?: AbortSignal): Promise<PushResult> {
  const ref = `refs/heads/${branch}`;
  const force = `--force-with-lease=${ref}:${lease.expected ?? ''}`;
  const res = await gitRun(['push', '--porcelain', '--no-verify', force, cloneUrl, `HEAD:${ref}`], { cwd: dir, env: gitAuthEnv(authHeader), signal });
  if (res.code === 0) return 'pushed';
  // --porcelain: "<flag>\t<from>:<to>\t<summary>" per ref; a lost lease is "!" and "[rejected] (stale info)".
  // A server's refusal ("[remote rejected] (protected branch hook declined)") is not a lease failure.
  const line = res.stdout.split('\n').find((l) => l.split('\t')[1]?.endsWith(`:${ref}`));
  if (line?.startsWith('!\t') && /\[rejected\] \(stale info\)/.test(line)) return 'lease-failed';
  throw new GitError(`git push to ${branch} failed: ${[line, res.stderr.trim()].filter(Boolean).join('; ') || `exit code ${res.code}`}`);
}

/** The branch's current commit on the server, or null when it does not exist. */
export async function remoteTip(cloneUrl: string, branch: string, authHeader: string, signal?: AbortSignal): Promise<string | null> {
  const out = await git(['ls-remote', '--heads', cloneUrl, `refs/heads/${branch}`], { env: gitAuthEnv(authHeader), signal });
  const line = out.split('\n').find((l) => l.endsWith(`\trefs/heads/${branch}`));
  return line ? line.split('\t')[0]! : null;
}
