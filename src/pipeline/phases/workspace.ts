import { withRedisLock } from '../../store/redis-lock.ts';
import { checkoutFromMirror, updateMirror } from '../../workspace/mirror.ts';
import type { JobContext } from '../job-context.ts';
import { keys } from '../../store/keys.ts';

export interface Workspace {
  mirrorDir: string;
  checkout: { dir: string; baseCommit: string };
  cloneUrl: string;
  htmlUrl: string;
  defaultBranch: string;
}

/**
 * Phase 2, workspace: the repository on the host, through the mirror cache (tokens only ever as
 * HTTP headers), and a fresh single-branch checkout of `branch` (the default branch, or the pull
 * request's head for a follow-up). Several workers may share one data dir: the mirror is locked
 * across processes.
 */
export async function prepareWorkspace(ctx: JobContext, branch?: string): Promise<Workspace> {
  const { deps, job } = ctx;
  const repoInfo = (await (await ctx.tokens.rest()).request('GET /repos/{owner}/{repo}', { owner: job.owner, repo: job.repo })).data;
  const lock = <T>(key: string, fn: () => Promise<T>, signal?: AbortSignal) =>
    withRedisLock(deps.redis, keys.mirrorLock(deps.env.LILYPAD_QUEUE_PREFIX, key), { ttlMs: 15 * 60_000, waitMs: 15 * 60_000, signal }, fn);
  const mirrorDir = await ctx.step('mirror', async () => updateMirror(deps.env.LILYPAD_DATA_DIR, job.repoId, repoInfo.clone_url, await ctx.tokens.gitAuthHeader(), { lock, signal: ctx.signal }));
  const checkout = await ctx.step('checkout', () => checkoutFromMirror(mirrorDir, branch ?? repoInfo.default_branch, { signal: ctx.signal }));
  ctx.cleanups.push(() => checkout.dispose());
  return { mirrorDir, checkout, cloneUrl: repoInfo.clone_url, htmlUrl: repoInfo.html_url, defaultBranch: repoInfo.default_branch };
}
