import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Env } from '../config/env.ts';
import { GitError, git, gitRun } from '../workspace/git.ts';
import { cloneAtCommit } from '../workspace/clone-at-commit.ts';
import type { LocalCheckout } from '../workspace/local-clone.ts';
import { gitAuthEnv } from '../workspace/mirror.ts';
import { AppNotInstalledError, FETCH_PERMISSIONS, RepoAccess, hasAppCredentials } from './collect-github.ts';

const OWNER_NAME = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;

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
  if (OWNER_NAME.test(repo)) {
    const host = gh.host ?? 'github.com';
    return { kind: 'url', location: `${gh.host ? gh.protocol : 'https'}://${host}/${repo.replace(/\.git$/, '')}.git` };
  }
  throw new GitError(`repo "${repo}" is neither an existing directory, a git URL, nor owner/name`);
}

/** How git reads one repository: as the GitHub App (an Authorization header), or anonymously and why. */
type FetchAuth = { kind: 'app'; access: RepoAccess } | { kind: 'anonymous'; hint: string };

/**
 * The GitHub App's read access to `owner/name` repositories on the configured host, for `eval run`:
 * per repository, its installation and a token restricted to that repository with contents:read
 * (minted again near expiry, revoked by revokeAll). A repository the app is not installed on is
 * fetched anonymously (a public one still works).
 */
export class AppRepoAuth {
  private readonly repos = new Map<string, Promise<RepoAccess | null>>();

  private constructor(private readonly env: Env) {}

  /** The app's access when APP_ID and PRIVATE_KEY (or PRIVATE_KEY_PATH) are set; else null. */
  static fromEnv(env: Env): AppRepoAuth | null {
    return hasAppCredentials(env) ? new AppRepoAuth(env) : null;
  }

  get appId(): string {
    return this.env.APP_ID ?? '';
  }

  /** The app's access to owner/name, or null when it is not installed there. */
  access(owner: string, name: string): Promise<RepoAccess | null> {
    const key = `${owner}/${name}`.toLowerCase();
    let p = this.repos.get(key);
    if (!p) {
      p = RepoAccess.connect(this.env, owner, name, FETCH_PERMISSIONS).catch((err: unknown) => {
        if (err instanceof AppNotInstalledError) return null;
        throw err;
      });
      // A failed lookup (not "not installed") is tried again by the next instance that needs it.
      p.catch(() => this.repos.delete(key));
      this.repos.set(key, p);
    }
    return p;
  }

  /** Revokes every token minted; never throws. */
  async revokeAll(): Promise<void> {
    await Promise.all([...this.repos.values()].map((p) => p.then((a) => a?.revokeAll(), () => undefined)));
  }
}

const PRIVATE_HINT =
  'if it is a private repository, set APP_ID and PRIVATE_KEY (or PRIVATE_KEY_PATH) of a GitHub App installed on it, as for `lilypad start` (and GHE_HOST/GHE_PROTOCOL for GitHub Enterprise): eval run then fetches it with a read-only token for that repository';

/**
 * One bare mirror per distinct repository, made once per eval run and shared by every attempt;
 * each attempt (and each judging) gets its own fresh clone at the instance's base commit.
 */
export class RepoCache {
  private readonly mirrors = new Map<string, Promise<string>>();

  constructor(
    private readonly dir: string,
    private readonly gh: GitHubHost,
    /** The app's credentials for `owner/name` repositories; without them those are cloned anonymously. */
    private readonly auth: AppRepoAuth | null = null,
  ) {}

  /** Revokes the tokens minted for fetching; call when the run is over. */
  async close(): Promise<void> {
    await this.auth?.revokeAll();
  }

  private async fetchAuth(repo: string): Promise<FetchAuth | null> {
    if (!OWNER_NAME.test(repo)) return null;
    const [owner, name] = repo.replace(/\.git$/, '').split('/') as [string, string];
    if (!this.auth) return { kind: 'anonymous', hint: PRIVATE_HINT };
    const access = await this.auth.access(owner, name).catch((err: Error) => {
      throw new GitError(`could not fetch ${repo} as the GitHub App: ${err.message}`);
    });
    if (access) return { kind: 'app', access };
    return { kind: 'anonymous', hint: `the GitHub App ${this.auth.appId} is not installed on ${owner}/${name}: install it on the repository if it is private` };
  }

  /** Git's environment for fetching: the token as an HTTP header (renewed when it is close to expiring). */
  private static async gitEnv(auth: FetchAuth | null): Promise<NodeJS.ProcessEnv | undefined> {
    return auth?.kind === 'app' ? gitAuthEnv(await auth.access.gitAuthHeader()) : undefined;
  }

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
    // owner/name is resolved to a URL on the GitHub host; credentials never go into it.
    const fetchAuth = () => (source.kind === 'url' ? this.fetchAuth(repo) : Promise.resolve(null));
    if (existsSync(path.join(target, 'HEAD'))) {
      // Left by an earlier run (--resume): bring it up to date, keep it if the source (or the app's access) is gone.
      const env = await fetchAuth()
        .then(RepoCache.gitEnv)
        .catch(() => undefined);
      await gitRun(['fetch', '--quiet', '--prune', 'origin', '+refs/*:refs/*'], { cwd: target, ...(env ? { env } : {}) });
      return target;
    }
    await mkdir(this.dir, { recursive: true });
    const tmp = await mkdtemp(path.join(this.dir, '.tmp-'));
    try {
      const args = ['clone', '--quiet', '--mirror', ...(source.kind === 'path' ? ['--no-local'] : []), '--', source.location, path.join(tmp, 'm.git')];
      const auth = await fetchAuth();
      const env = await RepoCache.gitEnv(auth);
      await git(args, env ? { env } : {}).catch((err: Error) => {
        const how = auth?.kind === 'app' ? ' as the GitHub App' : '';
        const hint = auth?.kind === 'anonymous' ? `; ${auth.hint}` : '';
        throw new GitError(`could not fetch ${repo} (${source.location})${how}: ${err.message}${hint}`);
      });
      await rename(path.join(tmp, 'm.git'), target).catch(async (err: NodeJS.ErrnoException) => {
        if (!existsSync(path.join(target, 'HEAD'))) throw err;
      });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    return target;
  }

  /** A fresh checkout of `repo` at `commit` (detached, no remote, nothing newer than the commit). */
  async checkout(repo: string, commit: string): Promise<LocalCheckout> {
    const mirror = await this.mirror(repo);
    const parent = await mkdtemp(path.join(os.tmpdir(), 'lilypad-eval-'));
    const dir = path.join(parent, 'repo');
    try {
      const resolved = await gitRun(['rev-parse', '--verify', '--quiet', `${commit}^{commit}`], { cwd: mirror });
      if (resolved.code !== 0) throw new GitError(`base_commit ${commit} is not in ${repo}; check the instance's repo and base_commit`);
      // The base commit and its history only: the mirror also holds the merged fix (see cloneAtCommit).
      const full = await cloneAtCommit(mirror, resolved.stdout.trim(), dir);
      return { dir, baseCommit: full, sourceDirty: false, dispose: () => rm(parent, { recursive: true, force: true }) };
    } catch (err) {
      await rm(parent, { recursive: true, force: true });
      throw err;
    }
  }
}
