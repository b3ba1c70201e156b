import path from 'node:path';
import type { Ecosystem } from '../inference/index.ts';
import { copyDirBetween } from '../sandbox/dir-copy.ts';
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

export type TestCacheReport = { carried: true; dir: string; bytes: number; files: number; ms: number } | { carried: false; dir: string | null; why: string };

/**
 * Carries the test runner's cache from the sandbox that ran the tests on the untouched code to the
 * agent's, after the baseline ended (its processes killed first, so nothing writes to it any more)
 * and after the patch was taken. Null: this ecosystem has no cache worth carrying. A failure only
 * costs the saving, and says why.
 */
export async function carryTestCache(from: Sandbox, to: Sandbox, ecosystem: Ecosystem | null, maxBytes = TEST_CACHE_MAX_BYTES): Promise<TestCacheReport | null> {
  const cache = ecosystem ? CARRIED[ecosystem] : undefined;
  if (!cache) return null;
  const started = Date.now();
  let dir: string | null = null;
  try {
    await from.takeOver();
    const found = await cacheDir(from, cache.probe);
    if ('why' in found) return { carried: false, dir: null, why: found.why };
    dir = found.dir;
    const copy = await copyDirBetween(from, to, dir, { maxBytes, timeoutMs: 300_000 });
    if (!copy.copied) return { carried: false, dir, why: copy.why };
    return { carried: true, dir, bytes: copy.bytes, files: copy.files, ms: Date.now() - started };
  } catch (err) {
    if (err instanceof CancelledError) throw err;
    return { carried: false, dir, why: (err as Error).message.slice(0, 300) };
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
  if (r.carried) return `the test runner's cache (${r.dir}, ${(r.bytes / 1e6).toFixed(1)} MB in ${r.files} files) was carried from the baseline's sandbox in ${(r.ms / 1000).toFixed(1)} s`;
  return `the test runner's cache was not carried from the baseline's sandbox${r.dir ? ` (${r.dir})` : ''}: ${r.why}; the tests after the change ran without it`;
}
