import { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { withDeadline } from '../deadline.ts';
import { SandboxError } from '../errors.ts';
import { throwIfCancelled } from '../../shared/cancel.ts';
import { tarOf } from './tar.ts';

export const LABEL_ENV = 'dev.lilypad.env';
export const LABEL_ENV_KEY = 'dev.lilypad.env.key';
export const LABEL_ENV_REPO = 'dev.lilypad.env.repo';
/** Whose environment it is (the installation id, or `local`): only the owner looks it up or evicts it. */
export const LABEL_ENV_OWNER = 'dev.lilypad.env.owner';
export const LABEL_ENV_BASE = 'dev.lilypad.env.base';
/** Unix seconds. */
export const LABEL_ENV_CREATED = 'dev.lilypad.env.created';
/** Bytes of the environment's own layer (what setup wrote), the unit of the size cap. */
export const LABEL_ENV_BYTES = 'dev.lilypad.env.bytes';
/** How long the setup it replaces took, in seconds: what a hit saves. */
export const LABEL_ENV_SETUP_SECONDS = 'dev.lilypad.env.setup-seconds';
/**
 * Whose setups made it, for the size share (evict.ts): the GitHub App installation
 * (`github-installation:<id>`, one organisation or user account), `local` or `eval`.
 */
export const LABEL_ENV_ACCOUNT = 'dev.lilypad.env.account';
/** The repository as people name it (`owner/name`, or the local path), for `lilypad env`. */
export const LABEL_ENV_REPO_NAME = 'dev.lilypad.env.repo-name';
/** On the untagged image `docker commit` makes, until the kept image replaces it (evict() removes leftovers). */
export const LABEL_ENV_PARTIAL = 'dev.lilypad.env.partial';

const COMMIT_MS = 15 * 60_000;
const CALL_MS = 60_000;

export interface KeptImageInput {
  docker: Docker;
  /** The sandbox after setup: its processes killed and its network cut. */
  container: Docker.Container;
  /** The id of the image the sandbox was started from (the key holds it too). */
  baseImageId: string;
  /** `repository:tag` the kept image is loaded under. */
  ref: string;
  owner: string;
  labels: Record<string, string>;
  /** Larger than this and nothing is kept. */
  maxBytes: number;
  signal?: AbortSignal | undefined;
}

/** Seconds spent in `docker commit` and in `docker load`. */
export interface KeepTimings {
  commit: number;
  load: number;
}

export type KeptImage = { id: string; bytes: number; seconds: KeepTimings } | { id: null; bytes: number };

/**
 * Keeps the sandbox's filesystem as an image whose configuration is the base image's, byte for
 * byte, apart from Lilypad's labels: the same USER, WORKDIR, ENV, entrypoint and command, and
 * nothing of the setup phase. `docker commit` alone would store the container's own configuration
 * (user 0:0 and workdir / from the hardened spec, the `sleep` entrypoint) and merge the run's
 * labels into the image, which every container made from it then inherits (a later run would carry
 * the job, run and worker of the one that kept it, and the orphan sweeps would take it for that
 * job's). So the layer is made with `docker commit`, then the image is written anew around it by
 * `docker load` of a manifest and a configuration only: the engine already has every layer and
 * loads none (measured: about 0.2 s), and the commit's own image is removed.
 *
 * Setup's per-command environment (proxy settings, CA bundle paths) lives in its exec only and
 * never in the container's configuration, so it cannot reach the image either way.
 */
export async function commitKeptImage(input: KeptImageInput): Promise<KeptImage> {
  const { docker, container, signal } = input;
  throwIfCancelled(signal);
  const state = await withDeadline(container.inspect(), CALL_MS, 'inspecting the sandbox');
  const networks = Object.keys(state.NetworkSettings.Networks ?? {}).filter((n) => n !== 'none');
  if (networks.length > 0) throw new SandboxError(`refusing to keep the environment of a sandbox that is still on a network (${networks.join(', ')}): cut the network first`);
  if (state.Image !== input.baseImageId) throw new SandboxError(`the sandbox runs image ${state.Image}, not ${input.baseImageId} that the environment's key names`);
  const started = performance.now();
  const partial = { [LABEL_ENV_OWNER]: input.owner, [LABEL_ENV_PARTIAL]: 'true' };
  const committed = await withDeadline(
    container.commit({ pause: true, comment: 'Lilypad: the environment after setup', changes: Object.entries(partial).map(([k, v]) => `LABEL ${k}=${v}`), ...(signal ? { abortSignal: signal } : {}) }) as Promise<{ Id: string }>,
    COMMIT_MS,
    'committing the environment',
  );
  const commitSeconds = (performance.now() - started) / 1000;
  try {
    const [made, base] = await Promise.all([inspectImage(docker, committed.Id, signal), inspectImage(docker, input.baseImageId, signal)]);
    const baseLayers = base.RootFS.Layers ?? [];
    const layers = made.RootFS.Layers ?? [];
    if (layers.length !== baseLayers.length + 1 || baseLayers.some((l, i) => layers[i] !== l)) {
      throw new SandboxError(`the committed environment's layers do not extend the base image ${input.baseImageId}`);
    }
    const bytes = Math.max(0, made.Size - base.Size);
    if (bytes > input.maxBytes) return { id: null, bytes };
    const labels: Record<string, string> = { ...input.labels, [LABEL_ENV_BYTES]: String(bytes), [LABEL_ENV_OWNER]: input.owner };
    const loading = performance.now();
    await loadImage(docker, imageArchive(base, layers, labels, input.ref), signal);
    const loadSeconds = (performance.now() - loading) / 1000;
    const kept = await inspectImage(docker, input.ref, signal);
    if (JSON.stringify(kept.RootFS.Layers) !== JSON.stringify(layers) || kept.Config.Labels?.[LABEL_ENV_KEY] !== labels[LABEL_ENV_KEY]) {
      throw new SandboxError(`${input.ref} is not the environment that was just loaded (another process kept the same key at the same time?)`);
    }
    return { id: kept.Id, bytes, seconds: { commit: commitSeconds, load: loadSeconds } };
  } finally {
    await withDeadline(docker.getImage(committed.Id).remove({ noprune: false }), CALL_MS, 'removing the committed layer\'s own image').catch(() => undefined);
  }
}

function inspectImage(docker: Docker, ref: string, signal: AbortSignal | undefined): Promise<Docker.ImageInspectInfo> {
  throwIfCancelled(signal);
  return withDeadline(docker.getImage(ref).inspect(), CALL_MS, `inspecting image ${ref}`);
}

/** What `docker load` reads: the base's configuration with new labels, over the given layers. */
function imageArchive(base: Docker.ImageInspectInfo, layers: string[], labels: Record<string, string>, ref: string): Buffer {
  const created = new Date().toISOString();
  const config = {
    architecture: base.Architecture,
    os: base.Os,
    ...(base.Variant ? { variant: base.Variant } : {}),
    created,
    config: { ...base.Config, Labels: { ...base.Config.Labels, ...labels } },
    rootfs: { type: 'layers', diff_ids: layers },
    history: layers.map((_, i) => ({
      created,
      created_by: i < layers.length - 1 ? `layer ${i + 1} of ${base.Id}` : 'Lilypad: the environment after setup',
    })),
  };
  const configName = 'config.json';
  const manifest = [{ Config: configName, RepoTags: [ref], Layers: layers.map((_, i) => `${i}/layer.tar`) }];
  return tarOf([
    { name: configName, data: Buffer.from(JSON.stringify(config)) },
    { name: 'manifest.json', data: Buffer.from(JSON.stringify(manifest)) },
  ]);
}

/** `docker load`; its answer is a stream of JSON messages, an error among them when it failed. */
async function loadImage(docker: Docker, archive: Buffer, signal: AbortSignal | undefined): Promise<void> {
  const res = (await withDeadline(docker.loadImage(Readable.from([archive]), { quiet: true, ...(signal ? { abortSignal: signal } : {}) }), CALL_MS, 'loading the kept environment')) as Readable;
  const chunks: Buffer[] = [];
  await withDeadline(
    new Promise<void>((resolve, reject) => {
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve());
      res.on('error', reject);
    }),
    CALL_MS,
    'loading the kept environment',
  );
  for (const line of Buffer.concat(chunks).toString('utf8').split('\n')) {
    const msg = safeJson(line);
    if (msg && typeof msg === 'object' && 'error' in msg) throw new SandboxError(`docker load of the kept environment failed: ${String((msg as { error: unknown }).error)}`);
  }
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
