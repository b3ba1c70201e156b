import { createHash } from 'node:crypto';

/**
 * Bumped whenever what a kept environment holds, or how a hit uses it, changes: every environment
 * kept before then misses from that release on (and is evicted in time).
 */
export const ENV_FORMAT = 1;

/** One file that feeds the key: its path in the repository and its exact bytes. */
export interface KeyFile {
  path: string;
  bytes: Buffer;
}

export interface EnvKeyInput {
  /** The sandbox image's id (`sha256:…`), never its tag: an image rebuilt under the same tag is another environment. */
  imageId: string;
  /** The setup commands, in order. */
  setup: readonly string[];
  /**
   * The repository, e.g. `github:123456` (its GitHub id, which survives a rename) or `local:/abs/path`.
   * Environments are never shared between repositories: it is in the key, and checked again on lookup.
   */
  repoId: string;
  /** Where the repository sits in the container: a virtual environment or node_modules holds absolute paths into it. */
  workdir: string;
  /** LILYPAD_SANDBOX_USER, or undefined for the image's own user (then the image id decides). */
  user: string | undefined;
  /** The lockfiles and manifests setup reads (keptEnvFiles), from the checkout setup runs on. */
  files: readonly KeyFile[];
}

const IMAGE_ID = /^sha256:[0-9a-f]{64}$/;

/**
 * The name of one environment: sha256 over everything that decides what setup leaves behind.
 * A change to any input (a lockfile byte, a setup command, a rebuilt image) makes a new key; the
 * same inputs always make the same key, whatever order the files were listed in.
 */
export function envKey(input: EnvKeyInput): string {
  if (!IMAGE_ID.test(input.imageId)) {
    throw new Error(`envKey needs the sandbox image's id (sha256:<64 hex>, from docker image inspect), not a tag or a short id: got ${JSON.stringify(input.imageId)}`);
  }
  if (!input.repoId.trim()) throw new Error('envKey needs the repository id: environments are never shared between repositories');
  const files = [...input.files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (let i = 1; i < files.length; i++) {
    if (files[i]!.path === files[i - 1]!.path) throw new Error(`envKey was given ${files[i]!.path} twice`);
  }
  // JSON keeps the parts apart: no choice of setup command or path can imitate another input.
  const canonical = JSON.stringify({
    format: ENV_FORMAT,
    image: input.imageId,
    repo: input.repoId,
    workdir: input.workdir,
    user: input.user ?? null,
    setup: input.setup,
    files: files.map((f) => [f.path, sha256(f.bytes)]),
  });
  return sha256(Buffer.from(canonical, 'utf8'));
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}
