import type Docker from 'dockerode';
import { withDeadline } from './deadline.ts';
import { SandboxError } from './errors.ts';
import type { Sandbox } from './sandbox.ts';

/**
 * On an image committed from a sandbox (value: the run it was taken for). The image carries the
 * sandbox's own labels too (its run, worker, instance, installation, job), so the sweeps find what
 * a dead worker left by the same labels as its containers.
 */
export const LABEL_SNAPSHOT = 'dev.lilypad.snapshot';
const COMMIT_MS = 15 * 60_000;
const CALL_MS = 60_000;

/** Commits the sandbox's filesystem as an image (the container is paused meanwhile); returns its id and how long it took. */
export async function commitSnapshot(sandbox: Sandbox, runId: string): Promise<{ image: string; ms: number }> {
  const started = performance.now();
  const made = (await withDeadline(
    sandbox.container.commit({ pause: true, comment: 'Lilypad: a sandbox right before the agent started', changes: [`LABEL ${LABEL_SNAPSHOT}=${runId}`] }),
    COMMIT_MS,
    'committing the sandbox',
  )) as { Id: string };
  return { image: made.Id, ms: Math.round(performance.now() - started) };
}

/** Removes a snapshot image (its sandboxes must be gone); a missing one is not an error. */
export async function removeSnapshot(docker: Docker, image: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await withDeadline(docker.getImage(image).remove({ force: true, noprune: false }), CALL_MS, 'removing a snapshot image');
      return;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return;
      if (attempt === 2) throw new SandboxError(`could not remove the snapshot image ${image}: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** The snapshot images carrying every one of `labels` (`key=value` or `key`). */
export async function listSnapshots(docker: Docker, labels: string[]): Promise<Docker.ImageInfo[]> {
  return docker.listImages({ all: true, filters: { label: [LABEL_SNAPSHOT, ...labels] } });
}

/** Removes the snapshot images carrying every one of `labels`; returns how many went. */
export async function removeSnapshots(docker: Docker, labels: string[], keep: (labels: Record<string, string>) => boolean = () => false): Promise<number> {
  let removed = 0;
  for (const image of await listSnapshots(docker, labels)) {
    if (keep(image.Labels ?? {})) continue;
    await removeSnapshot(docker, image.Id)
      .then(() => removed++)
      .catch(() => undefined);
  }
  return removed;
}
