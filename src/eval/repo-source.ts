import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { GitError, git, gitRun } from '../workspace/git.ts';
import type { LocalCheckout } from '../workspace/local-clone.ts';

export interface GitHubHost {
  /** GHE_HOST, or undefined for github.com. */
  host?: string | undefined;
  protocol: 'https' | 'http';
}

/**
 * Where an instance's `repo` is fetched from: an existing local directory, a git URL, or
 * `owner/name` on the configured GitHub host (GHE_HOST / GHE_PROTOCOL, else github.com).
 */
export function resolveRepoSource(repo: string, gh: GitHubHost, cwd = process.cwd()): { kind: 'path' | 'url'; location: string } {
  const local = path.resolve(cwd, repo);
  if (existsSync(local) && statSync(local).isDirectory()) return { kind: 'path', location: local };
  if (/^(?:https?|ssh|git|file):\/\//.test(repo) || /^[\w.-]+@[\w.-]+:/.test(repo)) return { kind: 'url', location: repo };
  if (/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(repo)) {
    const host = gh.host ?? 'github.com';
    return { kind: 'url', location: `${gh.host ? gh.protocol : 'https'}://${host}/${repo.replace(/\.git$/, '')}.git` };
  }
  throw new GitError(`repo "${repo}" is neither an existing directory, a git URL, nor owner/name`);
}

/**
 * One bare mirror per distinct repository, made once per eval run and shared by every attempt;
 * each attempt (and each judging) gets its own fresh clone at the instance's base commit.
 */
export class RepoCache {
  private readonly mirrors = new Map<string, Promise<string>>();

  constructor(
    private readonly dir: string,
    private readonly gh: GitHubHost,
  ) {}

  mirror(repo: string): Promise<string> {
    let p = this.mirrors.get(repo);
    if (!p) {
      p = this.makeMirror(repo);
      // A failed mirror is tried again by the next instance that needs it.
      p.catch(() => this.mirrors.delete(repo));
      this.mirrors.set(repo, p);
    }
    return p;
  }

  private async makeMirror(repo: string): Promise<string> {
    const source = resolveRepoSource(repo, this.gh);
    const target = path.join(this.dir, createHash('sha256').update(source.location).digest('hex').slice(0, 16) + '.git');
    if (existsSync(path.join(target, 'HEAD'))) {
      // Left by an earlier run (--resume): bring it up to date, keep it if the source is gone.
      await gitRun(['fetch', '--quiet', '--prune', 'origin', '+refs/*:refs/*'], { cwd: target });
      return target;
    }
    await mkdir(this.dir, { recursive: true });
    const tmp = await mkdtemp(path.join(this.dir, '.tmp-'));
    try {
      const args = ['clone', '--quiet', '--mirror', ...(source.kind === 'path' ? ['--no-local'] : []), '--', source.location, path.join(tmp, 'm.git')];
      await git(args).catch((err: Error) => {
        throw new GitError(`could not fetch ${repo} (${source.location}): ${err.message}`);
      });
      await rename(path.join(tmp, 'm.git'), target).catch(async (err: NodeJS.ErrnoException) => {
        if (!existsSync(path.join(target, 'HEAD'))) throw err;
      });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    return target;
  }

  /** A fresh clone of `repo` with `commit` checked out (detached, no remote). */
  async checkout(repo: string, commit: string): Promise<LocalCheckout> {
    const mirror = await this.mirror(repo);
    const parent = await mkdtemp(path.join(os.tmpdir(), 'lilypad-eval-'));
    const dir = path.join(parent, 'repo');
    try {
      await git(['clone', '--quiet', '--no-local', '--no-checkout', '--', mirror, dir]);
      const resolved = await gitRun(['rev-parse', '--verify', '--quiet', `${commit}^{commit}`], { cwd: dir });
      if (resolved.code !== 0) throw new GitError(`base_commit ${commit} is not in ${repo}; check the instance's repo and base_commit`);
      const full = resolved.stdout.trim();
      await git(['checkout', '--quiet', '--detach', full], { cwd: dir });
      await git(['remote', 'remove', 'origin'], { cwd: dir });
      return { dir, baseCommit: full, sourceDirty: false, dispose: () => rm(parent, { recursive: true, force: true }) };
    } catch (err) {
      await rm(parent, { recursive: true, force: true });
      throw err;
    }
  }
}
