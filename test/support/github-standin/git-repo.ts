/**
 * Operations on the stand-in's bare repositories, done with git plumbing (no work trees), so that
 * what the REST API reports is exactly what `git clone` / `git push` over HTTP see.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Environment for every git command the stand-in runs: no system/global config, no prompts. */
export function gitEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: os.tmpdir(),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    LANG: 'C',
    LC_ALL: 'C',
    ...extra,
  };
  return env;
}

function git(gitDir: string, args: string[], opts: { input?: string | Buffer; env?: Record<string, string> } = {}): string {
  return execFileSync('git', ['--git-dir', gitDir, ...args], {
    env: gitEnv(opts.env),
    input: opts.input,
    stdio: ['pipe', 'pipe', 'pipe'],
    maxBuffer: 256 * 1024 * 1024,
  }).toString('utf8');
}

function gitBuffer(gitDir: string, args: string[]): Buffer | null {
  const res = spawnSync('git', ['--git-dir', gitDir, ...args], { env: gitEnv(), maxBuffer: 256 * 1024 * 1024 });
  return res.status === 0 ? res.stdout : null;
}

function gitOk(gitDir: string, args: string[]): string | null {
  const res = spawnSync('git', ['--git-dir', gitDir, ...args], { env: gitEnv(), encoding: 'utf8' });
  return res.status === 0 ? res.stdout : null;
}

/** Rejects anything git could read as an option or a revision expression we do not want. */
function safeRef(ref: string): boolean {
  return ref.length > 0 && !ref.startsWith('-') && !/[\s~^:?*[\\]|\.\.|@\{/.test(ref);
}

function cleanPath(p: string): string {
  return p.replace(/^\/+|\/+$/g, '');
}

export interface CommitAuthor {
  name: string;
  email: string;
}

export function initBareRepo(gitDir: string, defaultBranch: string): void {
  mkdirSync(gitDir, { recursive: true });
  execFileSync('git', ['init', '--bare', '--quiet', `--initial-branch=${defaultBranch}`, gitDir], { env: gitEnv(), stdio: 'pipe' });
  git(gitDir, ['config', 'http.receivepack', 'true']);
  git(gitDir, ['config', 'http.uploadpack', 'true']);
  git(gitDir, ['config', 'receive.denyNonFastForwards', 'false']);
}

/**
 * Writes `files` (path → content; null deletes) on top of `branch` (or as a root commit when the
 * branch does not exist yet) and moves the branch to the new commit. Returns the commit sha.
 */
export function commitFiles(
  gitDir: string,
  branch: string,
  files: Record<string, string | null>,
  message: string,
  author: CommitAuthor,
): string {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'standin-index-'));
  const indexEnv = { GIT_INDEX_FILE: path.join(tmp, 'index') };
  try {
    const parent = branchSha(gitDir, branch);
    if (parent) git(gitDir, ['read-tree', parent], { env: indexEnv });
    else git(gitDir, ['read-tree', '--empty'], { env: indexEnv });
    for (const [rawPath, content] of Object.entries(files)) {
      const p = cleanPath(rawPath);
      if (content === null) {
        git(gitDir, ['update-index', '--force-remove', '--', p], { env: indexEnv });
        continue;
      }
      const blob = git(gitDir, ['hash-object', '-w', '--stdin'], { input: content }).trim();
      git(gitDir, ['update-index', '--add', '--cacheinfo', `100644,${blob},${p}`], { env: indexEnv });
    }
    const tree = git(gitDir, ['write-tree'], { env: indexEnv }).trim();
    const who = {
      GIT_AUTHOR_NAME: author.name,
      GIT_AUTHOR_EMAIL: author.email,
      GIT_COMMITTER_NAME: author.name,
      GIT_COMMITTER_EMAIL: author.email,
    };
    const commit = git(gitDir, ['commit-tree', tree, ...(parent ? ['-p', parent] : []), '-F', '-'], {
      input: message.endsWith('\n') ? message : `${message}\n`,
      env: who,
    }).trim();
    git(gitDir, ['update-ref', `refs/heads/${branch}`, commit, ...(parent ? [parent] : [])]);
    return commit;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

export function branchSha(gitDir: string, branch: string): string | null {
  if (!safeRef(branch)) return null;
  const out = gitOk(gitDir, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`]);
  return out ? out.trim() : null;
}

/** Resolves a branch, tag or commit sha to a commit sha. */
export function resolveCommit(gitDir: string, ref: string): string | null {
  const r = ref.replace(/^refs\/heads\//, '');
  if (!safeRef(r)) return null;
  const b = branchSha(gitDir, r);
  if (b) return b;
  const out = gitOk(gitDir, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
  return out ? out.trim() : null;
}

export function listBranches(gitDir: string): string[] {
  const out = gitOk(gitDir, ['for-each-ref', '--format=%(refname:strip=2)', 'refs/heads/']) ?? '';
  return out.split('\n').filter(Boolean);
}

export type TreeEntryType = 'blob' | 'tree' | 'commit';

export interface TreeEntry {
  mode: string;
  type: TreeEntryType;
  sha: string;
  size: number;
  name: string;
}

/** The type and sha of `path` in `commit` ('' is the root tree), or null when absent. */
export function pathObject(gitDir: string, commit: string, p: string): { type: TreeEntryType; sha: string } | null {
  const spec = `${commit}:${cleanPath(p)}`;
  const sha = gitOk(gitDir, ['rev-parse', '--verify', '--quiet', spec]);
  if (!sha) return null;
  const type = gitOk(gitDir, ['cat-file', '-t', sha.trim()]);
  if (!type) return null;
  const t = type.trim();
  if (t !== 'blob' && t !== 'tree' && t !== 'commit') return null;
  return { type: t, sha: sha.trim() };
}

export function readBlob(gitDir: string, sha: string): Buffer | null {
  return gitBuffer(gitDir, ['cat-file', 'blob', sha]);
}

export function readPath(gitDir: string, ref: string, p: string): Buffer | null {
  const commit = resolveCommit(gitDir, ref);
  if (!commit) return null;
  const obj = pathObject(gitDir, commit, p);
  if (!obj || obj.type !== 'blob') return null;
  return readBlob(gitDir, obj.sha);
}

export function listTree(gitDir: string, treeSha: string): TreeEntry[] {
  const out = gitOk(gitDir, ['ls-tree', '-l', '-z', treeSha]) ?? '';
  const entries: TreeEntry[] = [];
  for (const rec of out.split('\0')) {
    if (!rec) continue;
    const tab = rec.indexOf('\t');
    const [mode, type, sha, size] = rec.slice(0, tab).split(/\s+/);
    if (!mode || !sha || (type !== 'blob' && type !== 'tree' && type !== 'commit')) continue;
    entries.push({ mode, type, sha, size: size && size !== '-' ? Number(size) : 0, name: rec.slice(tab + 1) });
  }
  return entries;
}

export function isAncestor(gitDir: string, ancestor: string, descendant: string): boolean {
  const res = spawnSync('git', ['--git-dir', gitDir, 'merge-base', '--is-ancestor', ancestor, descendant], { env: gitEnv() });
  return res.status === 0;
}

export function mergeBase(gitDir: string, a: string, b: string): string | null {
  const out = gitOk(gitDir, ['merge-base', a, b]);
  return out ? out.trim() : null;
}

export function countCommits(gitDir: string, base: string, head: string): number {
  const out = gitOk(gitDir, ['rev-list', '--count', `${base}..${head}`]);
  return out ? Number(out.trim()) : 0;
}

export function diffStats(gitDir: string, base: string, head: string): { additions: number; deletions: number; changedFiles: number } {
  const mb = mergeBase(gitDir, base, head) ?? base;
  const out = gitOk(gitDir, ['diff', '--numstat', mb, head]) ?? '';
  let additions = 0;
  let deletions = 0;
  let changedFiles = 0;
  for (const line of out.split('\n')) {
    if (!line.trim()) continue;
    const [a, d] = line.split('\t');
    changedFiles += 1;
    additions += a && a !== '-' ? Number(a) : 0;
    deletions += d && d !== '-' ? Number(d) : 0;
  }
  return { additions, deletions, changedFiles };
}

export interface CommitInfo {
  sha: string;
  tree: string;
  parents: string[];
  authorName: string;
  authorEmail: string;
  authorDate: string;
  committerName: string;
  committerEmail: string;
  committerDate: string;
  message: string;
}

export function commitInfo(gitDir: string, sha: string): CommitInfo | null {
  const out = gitOk(gitDir, ['log', '-1', '--format=%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B', sha]);
  if (!out) return null;
  const f = out.split('\0');
  const iso = (s: string | undefined): string => new Date(s ?? 0).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return {
    sha: f[0] ?? sha,
    tree: f[1] ?? '',
    parents: (f[2] ?? '').split(' ').filter(Boolean),
    authorName: f[3] ?? '',
    authorEmail: f[4] ?? '',
    authorDate: iso(f[5]),
    committerName: f[6] ?? '',
    committerEmail: f[7] ?? '',
    committerDate: iso(f[8]),
    message: (f[9] ?? '').replace(/\n+$/, ''),
  };
}

/** The unified diff of one file between the merge base of `base` and `head`, and `head` (as a pull request shows it). */
export function fileDiff(gitDir: string, base: string, head: string, p: string): string {
  const mb = mergeBase(gitDir, base, head) ?? base;
  return gitOk(gitDir, ['diff', '--no-color', '--no-ext-diff', '-U3', mb, head, '--', cleanPath(p)]) ?? '';
}

/**
 * Where a review comment on `line` (of the new file for RIGHT, the old one for LEFT) sits in a file's
 * diff, as GitHub computes it: `diffHunk` is the hunk's header and its lines down to the commented
 * one; `position` counts the lines below the file's first `@@` header (later headers count too).
 * Null when the line is not part of the diff.
 */
export function locateInDiff(diffText: string, line: number, side: 'LEFT' | 'RIGHT'): { diffHunk: string; position: number } | null {
  const lines = diffText.split('\n');
  const first = lines.findIndex((l) => l.startsWith('@@'));
  if (first < 0) return null;
  let oldNo = 0;
  let newNo = 0;
  let hunk: string[] = [];
  for (let i = first; i < lines.length; i++) {
    const l = lines[i] ?? '';
    const position = i - first;
    const header = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(l);
    if (header) {
      oldNo = Number(header[1]);
      newNo = Number(header[2]);
      hunk = [l];
      continue;
    }
    const kind = l[0];
    if (kind !== ' ' && kind !== '+' && kind !== '-') continue; // "\ No newline at end of file", trailing ''
    hunk.push(l);
    const hit = side === 'RIGHT' ? kind !== '-' && newNo === line : kind !== '+' && oldNo === line;
    if (hit) return { diffHunk: hunk.join('\n'), position };
    if (kind !== '+') oldNo++;
    if (kind !== '-') newNo++;
  }
  return null;
}

/** Points `branch` at `sha` (creating it). */
export function setBranch(gitDir: string, branch: string, sha: string): void {
  if (!safeRef(branch)) throw new Error(`unsafe branch name ${branch}`);
  git(gitDir, ['update-ref', `refs/heads/${branch}`, sha]);
}
