import { Sandbox } from '../sandbox/sandbox.ts';
import { clearKeptWorktree, replaySetupChanges } from '../workspace/kept-worktree.ts';
import type { SandboxSessionInput } from './sandbox-session.ts';

/** A sandbox that is removed on release, or as soon as the run's signal aborts. */
export interface LiveSandbox {
  sandbox: Sandbox;
  release(): Promise<void>;
}

/** A kept environment whose setup changes to tracked files no longer apply to this checkout. */
export class StaleEnvironmentError extends Error {
  override name = 'StaleEnvironmentError';
}

/** Where and as whom a new sandbox of the run starts. */
export interface SandboxStart {
  image: string;
  network: string;
  /** The agent's user, when the image cannot say it (a snapshot's configuration is the container's). */
  user?: string | undefined;
}

/** A new sandbox of the run, nothing in it yet. */
export async function created(input: SandboxSessionInput, start: SandboxStart): Promise<LiveSandbox> {
  const options = { ...input.sandbox, image: start.image, network: start.network, runId: input.runId, workerId: input.workerId, ...(start.user ? { user: start.user } : {}), ...(input.labels ? { labels: input.labels } : {}) };
  const sandbox = await Sandbox.create(input.docker, options, input.signal);
  const stopWatching = sandbox.destroyOnAbort(input.signal);
  return {
    sandbox,
    release: async () => {
      stopWatching();
      await sandbox.destroy();
    },
  };
}

/** A new sandbox with the run's checkout copied in. */
export async function started(input: SandboxSessionInput, image: string, network: string): Promise<LiveSandbox> {
  const live = await created(input, { image, network });
  return guard(live, async () => {
    await live.sandbox.copyIn(input.checkoutDir);
    return live;
  });
}

/**
 * A sandbox from a kept environment with this run's checkout in place of the one it was kept with,
 * and setup's changes to tracked files laid over it again, so it looks as after a setup that ran.
 */
export async function checkoutInKept(input: SandboxSessionInput, image: string): Promise<LiveSandbox> {
  const live = await created(input, { image, network: 'none' });
  return guard(live, async () => {
    await clearKeptWorktree(live.sandbox);
    await live.sandbox.copyInFromInside(input.checkoutDir);
    await live.sandbox.takeOver();
    if ((await replaySetupChanges(live.sandbox)) === 'stale') throw new StaleEnvironmentError('the changes setup made to tracked files no longer apply to this commit');
    return live;
  });
}

/** Runs `fn` on a new sandbox; the sandbox is removed if it throws. */
export async function guard<T>(live: LiveSandbox, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    await live.release();
    throw err;
  }
}
