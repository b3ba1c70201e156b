import { withDeadline } from '../sandbox/deadline.ts';
import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { created, type LiveSandbox } from './live-sandbox.ts';
import type { SandboxSessionInput } from './sandbox-session.ts';

/** On a snapshot image (and so on the sandboxes started from it): the run's, removed with it or by the sweeps. */
export const LABEL_SNAPSHOT = 'dev.lilypad.snapshot';
const COMMIT_MS = 15 * 60_000;
const CALL_MS = 60_000;

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
 * Commits `sandbox` (set up, offline, settled at the agent's starting point, no process of the
 * agent's ever started in it) as an image the run's later sandboxes start from. The image keeps the
 * container's configuration (user 0:0, no entrypoint of the image's), so the sandboxes opened from
 * it are told the agent's user, which the hardened spec would otherwise read from the image.
 */
export async function snapshotBase(input: SandboxSessionInput, sandbox: Sandbox): Promise<FreshBase> {
  await sandbox.takeOver();
  const started = performance.now();
  const { Id: image } = (await withDeadline(
    sandbox.container.commit({ pause: true, comment: 'Lilypad: the sandbox right after setup, for the runs that judge the change', changes: [`LABEL ${LABEL_SNAPSHOT}=${input.runId}`] }),
    COMMIT_MS,
    'committing the sandbox after setup',
  )) as { Id: string };
  const commitMs = Math.round(performance.now() - started);
  const user = sandbox.options.user;
  return {
    commitMs,
    open: (name) => created(named(input, name), { image, network: 'none', user }),
    dispose: () => removeImage(input, image),
  };
}

function named(input: SandboxSessionInput, name: string): SandboxSessionInput {
  return { ...input, runId: `${input.runId}-${name}` };
}

async function removeImage(input: SandboxSessionInput, image: string): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await withDeadline(input.docker.getImage(image).remove({ force: true, noprune: false }), CALL_MS, 'removing the snapshot after setup');
      return;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return;
      if (attempt === 2) throw new SandboxError(`could not remove the snapshot image ${image}: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
