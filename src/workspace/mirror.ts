import { mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git } from './git.ts';

/** Environment that hands git the token as an HTTP header: never in a URL, a file or argv. */
export function gitAuthEnv(authHeader: string): NodeJS.ProcessEnv {
  return { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.extraHeader', GIT_CONFIG_VALUE_0: authHeader, GIT_TERMINAL_PROMPT: '0' };
}

const locks = new Map<string, Promise<unknown>>();

/** Runs `fn` with an in-process lock on `key` (one fetch per mirror at a time). */
async function withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const prev = locks.get(key) ?? Promise.resolve();
  const next = prev.catch(() => undefined).then(fn);
  locks.set(key, next);
  try {
    return await next;
  } finally {
    if (locks.get(key) === next) locks.delete(key);
  }
}

export function mirrorPath(dataDir: string, cloneUrl: string): string {
  const u = new URL(cloneUrl);
  const parts = u.pathname.replace(/^\/+/, '').replace(/\.git$/, '').split('/').map((p) => p.replace(/[^A-Za-z0-9._-]/g, '_'));
  return path.join(dataDir, 'mirrors', u.host.replace(/[^A-Za-z0-9._-]/g, '_'), ...parts) + '.git';
}

/**
 * Brings the per-repository mirror up to date (a bare `--mirror` clone under LILYPAD_DATA_DIR),
 * so that repeat jobs on one repository only fetch what changed.
 */
export async function updateMirror(dataDir: string, cloneUrl: string, authHeader: string): Promise<string> {
  const dir = mirrorPath(dataDir, cloneUrl);
  return withLock(dir, async () => {
    const env = gitAuthEnv(authHeader);
    const exists = await stat(path.join(dir, 'HEAD')).then(() => true, () => false);
    if (!exists) {
      // Clone beside the final place and rename, so a crash never leaves half a mirror behind.
      await mkdir(path.dirname(dir), { recursive: true });
      const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
      try {
        await git(['clone', '--mirror', '--quiet', cloneUrl, tmp], { env });
        await rm(dir, { recursive: true, force: true });
        await rename(tmp, dir);
      } finally {
        await rm(tmp, { recursive: true, force: true });
      }
    } else {
      await git(['--git-dir', dir, 'remote', 'set-url', 'origin', cloneUrl]);
      await git(['--git-dir', dir, 'fetch', '--prune', '--quiet', 'origin'], { env });
    }
    return dir;
  });
}

export interface Checkout {
  dir: string;
  baseCommit: string;
  dispose(): Promise<void>;
}

/** A working checkout of `branch` from the mirror, in a fresh temporary directory. */
export async function checkoutFromMirror(mirrorDir: string, branch: string): Promise<Checkout> {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'lilypad-ws-'));
  const dir = path.join(parent, 'repo');
  const dispose = () => rm(parent, { recursive: true, force: true });
  try {
    await git(['clone', '--quiet', '--branch', branch, mirrorDir, dir]);
    await git(['remote', 'remove', 'origin'], { cwd: dir });
    const baseCommit = (await git(['rev-parse', 'HEAD'], { cwd: dir })).trim();
    return { dir, baseCommit, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}
