import path from 'node:path';
import type { Ecosystem } from '../inference/index.ts';
import { readDirOut, type HeldDir } from '../sandbox/dir-copy.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { CancelledError } from '../shared/cancel.ts';

/**
 * The test runners' caches worth carrying from the baseline's sandbox to the agent's, by ecosystem.
 * Only a cache whose entries are named by a hash of everything they were made from qualifies: an
 * entry made from the untouched code can then only miss for the changed code, never stand in for
 * it. Go's build and test cache is such a cache (a test result is reused only for the same test
 * binary, flags, environment and files read). Cargo's `target/` and Gradle's build folders judge
 * freshness by modification times, which a copy made while the agent edited cannot be trusted
 * with; pytest, Jest, Maven and node's runner do not reuse test results at all.
 */
const CARRIED: Partial<Record<Ecosystem, { probe: string }>> = {
  go: { probe: 'go env GOCACHE' },
};

/** The most a carried cache may hold: past it the tests after the change run without it. */
export const TEST_CACHE_MAX_BYTES = 1024 ** 3;
const COPY_TIMEOUT_MS = 300_000;

export type TestCacheReport = { carried: true; dir: string; bytes: number; files: number; read_ms: number; write_ms: number } | { carried: false; dir: string | null; why: string };

/** A test cache read out of the baseline's sandbox and held on the worker, or why it could not be. */
export type TakenTestCache = { held: HeldDir; readMs: number } | { failed: TestCacheReport & { carried: false } };

/**
 * Reads the test runner's cache out of the sandbox that ran the tests on the untouched code, as
 * soon as they ended (their processes killed first, so nothing writes to it any more); the agent
 * may work for a long time yet, and the baseline's sandbox can go. Null: this ecosystem has no
 * cache worth carrying. A failure only costs the saving, and says why.
 */
export async function takeTestCache(from: Sandbox, ecosystem: Ecosystem | null, maxBytes = TEST_CACHE_MAX_BYTES): Promise<TakenTestCache | null> {
  const cache = ecosystem ? CARRIED[ecosystem] : undefined;
  if (!cache) return null;
  const started = Date.now();
  let dir: string | null = null;
  try {
    await from.takeOver();
    const found = await cacheDir(from, cache.probe);
    if ('why' in found) return { failed: { carried: false, dir: null, why: found.why } };
    dir = found.dir;
    const held = await readDirOut(from, dir, { maxBytes, timeoutMs: COPY_TIMEOUT_MS });
    if ('why' in held) return { failed: { carried: false, dir, why: held.why } };
    return { held, readMs: Date.now() - started };
  } catch (err) {
    if (err instanceof CancelledError) throw err;
    return { failed: { carried: false, dir, why: (err as Error).message.slice(0, 300) } };
  }
}

/**
 * Puts a taken cache in place of the agent's own, after the agent ended and its patch was taken,
 * before the tests after the change: nothing of it can reach the model's conversation.
 */
export async function putTestCache(taken: TakenTestCache, to: Sandbox): Promise<TestCacheReport> {
  if ('failed' in taken) return taken.failed;
  const { held } = taken;
  const started = Date.now();
  try {
    const why = await held.writeInto(to, COPY_TIMEOUT_MS);
    if (why) return { carried: false, dir: held.dir, why };
    return { carried: true, dir: held.dir, bytes: held.bytes, files: held.files, read_ms: taken.readMs, write_ms: Date.now() - started };
  } catch (err) {
    if (err instanceof CancelledError) throw err;
    return { carried: false, dir: held.dir, why: (err as Error).message.slice(0, 300) };
  }
}

/**
 * Where the cache is, as the runner itself says in the baseline's sandbox (the agent never touched
 * that one). Only a plain absolute path outside the worktree is taken: the cache must never turn
 * up in the repository's files.
 */
async function cacheDir(sandbox: Sandbox, probe: string): Promise<{ dir: string } | { why: string }> {
  const res = await sandbox.exec(['/bin/bash', '-lc', probe], { cwd: '/tmp', timeoutSeconds: 60, keepBytes: 4096 });
  const dir = res.stdout.toString('utf8').trim();
  if (res.exitCode !== 0) return { why: `\`${probe}\` failed (exit ${res.exitCode}): ${res.stderr.toString('utf8').trim().slice(-200)}` };
  if (!/^\/[\w.@+/-]+$/.test(dir) || dir.split('/').includes('..')) return { why: `\`${probe}\` named no usable directory (${JSON.stringify(dir.slice(0, 100))})` };
  const rel = path.posix.relative(sandbox.options.workdir, dir);
  if (!rel.startsWith('..')) return { why: `${dir} is inside the worktree` };
  return { dir };
}

/** One line for people: what was carried, or why not. */
export function describeTestCache(r: TestCacheReport): string {
  if (r.carried) return `the test runner's cache (${r.dir}, ${(r.bytes / 1e6).toFixed(1)} MB in ${r.files} files) was carried from the baseline's sandbox (read out in ${(r.read_ms / 1000).toFixed(1)} s beside the agent, written in ${(r.write_ms / 1000).toFixed(1)} s after it)`;
  return `the test runner's cache was not carried from the baseline's sandbox${r.dir ? ` (${r.dir})` : ''}: ${r.why}; the tests after the change ran without it`;
}
