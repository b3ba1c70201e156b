import type { Sandbox } from '../sandbox/sandbox.ts';
import { commitSnapshot, removeSnapshot } from '../sandbox/snapshot.ts';
import { created, type LiveSandbox } from './live-sandbox.ts';
import type { SandboxSessionInput } from './sandbox-session.ts';

/**
 * Where every run whose result Lilypad believes starts (the tests before and after the change, the
 * evidence runs): a new sandbox in the state right after setup, at the agent's starting point, that
 * no process of the agent's ever ran in. What the agent wrote outside its patch (its home, user
 * site-packages, ignored files, the temporary folder, .git) is not in it; the patch is applied to
 * it by Lilypad. It is the agent's own sandbox committed as an image right before the agent's first
 * step (after setup, or after a kept environment was laid over the checkout): each such sandbox then
 * starts with no copy, no setup and no replay.
 */
export interface FreshBase {
  /** A new sandbox at the agent's starting point; `name` tells it apart among the run's containers. */
  open(name: string): Promise<LiveSandbox>;
  /** Milliseconds the snapshot took to commit. */
  commitMs: number;
  /** Removes the snapshot image (after every sandbox opened from it is released). */
  dispose(): Promise<void>;
}

/**
 * Commits `sandbox` (set up, offline, at the agent's starting point, no process of the agent's
 * ever started in it) as the image the run's judging sandboxes start from. The image keeps the
 * container's configuration (user 0:0, no entrypoint of the image's), so the sandboxes opened from
 * it are told the agent's user, which the hardened spec would otherwise read from the image.
 */
export async function snapshotBase(input: SandboxSessionInput, sandbox: Sandbox): Promise<FreshBase> {
  await sandbox.takeOver();
  const { image, ms } = await commitSnapshot(sandbox, input.runId);
  const user = sandbox.options.user;
  return {
    commitMs: ms,
    open: (name) => created({ ...input, runId: `${input.runId}-${name}` }, { image, network: 'none', user }),
    dispose: () => removeSnapshot(input.docker, image),
  };
}

/** The run's snapshot, which exists whenever there is a test command to judge with. */
export function freshBaseOf(env: { fresh: FreshBase | null }): FreshBase {
  if (!env.fresh) throw new Error('no snapshot to judge from: the run has no test command');
  return env.fresh;
}
