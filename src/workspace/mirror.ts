import { mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { throwIfCancelled } from '../shared/cancel.ts';
import { git } from './git.ts';

/** Environment that hands git the token as an HTTP header: never in a URL, a file or argv. */
export function gitAuthEnv(authHeader: string): NodeJS.ProcessEnv {
  return { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.extraHeader', GIT_CONFIG_VALUE_0: authHeader, GIT_TERMINAL_PROMPT: '0' };
}

/** Runs `fn` while holding a lock on `key` shared by every process using the same data directory. */
type CrossProcessLock = <T>(key: string, fn: () => Promise<T>, signal?: AbortSignal) => Promise<T>;

interface MirrorOptions {
  /** A lock across processes (a Redis lock), taken inside the in-process one. */
  lock?: CrossProcessLock;
  /** Per git command; see DEFAULT_GIT_TIMEOUT_MS. */
  timeoutMs?: number;
  /** A cancel stops the wait for the lock and kills git. */
  signal?: AbortSignal | undefined;
}

const locks = new Map<string, Promise<unknown>>();

/** Runs `fn` with an in-process lock on `key` (one fetch per mirror at a time). */
async function withLocalLock<T>(key: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const prev = locks.get(key) ?? Promise.resolve();
  const next = prev.catch(() => undefined).then(() => {
    throwIfCancelled(signal);
    return fn();
  });
  locks.set(key, next);
  try {
    return await next;
  } finally {
    if (locks.get(key) === next) locks.delete(key);
  }
}

/**
 * The mirror of one repository, by its numeric id: a renamed or transferred repository keeps its
 * mirror, and a new repository that takes an old name never gets the old one's objects.
 */
export function mirrorPath(dataDir: string, repoId: number): string {
  if (!Number.isSafeInteger(repoId) || repoId <= 0) throw new Error(`not a repository id: ${repoId}`);
  return path.join(dataDir, 'mirrors', `${repoId}.git`);
}

// Branches and tags only. A `--mirror` clone would also take refs/pull/*: every pull request ever
// opened, forks' commits included, which no job needs and which would grow the cache without bound.
const REFSPECS = ['+refs/heads/*:refs/heads/*', '+refs/tags/*:refs/tags/*'];

/**
 * Brings the repository's mirror up to date (a bare repository under LILYPAD_DATA_DIR), so that repeat
 * jobs only fetch what changed. The URL is given per fetch and never stored; the token travels as
 * an HTTP header. Returns the mirror's directory.
 */
export async function updateMirror(dataDir: string, repoId: number, cloneUrl: string, authHeader: string, opts: MirrorOptions = {}): Promise<string> {
  const dir = mirrorPath(dataDir, repoId);
  const locked = opts.lock ?? (<T>(_key: string, fn: () => Promise<T>) => fn());
  return withLocalLock(dir, () =>
    locked(`mirror:${repoId}`, async () => {
      throwIfCancelled(opts.signal);
      const exists = await stat(path.join(dir, 'HEAD')).then(
        () => true,
        () => false,
      );
      if (exists) await fetchInto(dir, cloneUrl, authHeader, opts);
      else await createMirror(dir, cloneUrl, authHeader, opts);
      // Packs loose objects and prunes now and then; in the foreground, so that it is done before the
      // lock is released and never races the next fetch.
      await git(['--git-dir', dir, '-c', 'gc.autoDetach=false', 'gc', '--auto', '--quiet'], timeout(opts));
      return dir;
    }, opts.signal),
  opts.signal);
}

// --no-auto-gc: fetch would otherwise start its own gc, detached, still running after the lock is
// released; updateMirror runs it in the foreground instead.
async function fetchInto(dir: string, cloneUrl: string, authHeader: string, opts: MirrorOptions): Promise<void> {
  await git(['--git-dir', dir, 'fetch', '--prune', '--no-tags', '--no-auto-gc', '--quiet', cloneUrl, ...REFSPECS], { env: gitAuthEnv(authHeader), ...timeout(opts) });
}

// Built beside the final place and renamed, so that a crash never leaves half a mirror behind.
async function createMirror(dir: string, cloneUrl: string, authHeader: string, opts: MirrorOptions): Promise<void> {
  await mkdir(path.dirname(dir), { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  try {
    await git(['init', '--bare', '--quiet', tmp], timeout(opts));
    await fetchInto(tmp, cloneUrl, authHeader, opts);
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

const timeout = (opts: { timeoutMs?: number; signal?: AbortSignal | undefined }): { timeoutMs?: number; signal?: AbortSignal } => ({
  ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
  ...(opts.signal ? { signal: opts.signal } : {}),
});

interface Checkout {
  dir: string;
  baseCommit: string;
  dispose(): Promise<void>;
}

/**
 * A working checkout of `branch`, in a fresh temporary directory. It is copied into the sandbox, so
 * it is a real clone (`--no-local`: no hard links, no alternates) of that one branch: the agent sees
 * the branch's history and nothing else the mirror holds (other branches, their tags and objects).
 */
export async function checkoutFromMirror(mirrorDir: string, branch: string, opts: { timeoutMs?: number; signal?: AbortSignal | undefined } = {}): Promise<Checkout> {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'lilypad-ws-'));
  const dir = path.join(parent, 'repo');
  const dispose = () => rm(parent, { recursive: true, force: true });
  try {
    await git(['clone', '--quiet', '--no-local', '--single-branch', '--branch', branch, '--', mirrorDir, dir], timeout(opts));
    await git(['remote', 'remove', 'origin'], { cwd: dir, ...timeout(opts) });
    const baseCommit = (await git(['rev-parse', 'HEAD'], { cwd: dir, ...timeout(opts) })).trim();
    return { dir, baseCommit, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}
