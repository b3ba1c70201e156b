import { lstat, open, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import type { KeyFile } from './key.ts';

/**
 * Which files of a checkout decide what setup installs: every lockfile and manifest of the
 * ecosystems Lilypad sets up, at any depth (workspaces and monorepos have several), plus the files
 * an inferred setup names and any file a setup command mentions (`bash scripts/bootstrap.sh`,
 * `pip install -r ci/deps.txt`). Taking too many only costs a miss; missing one would start a job
 * from dependencies its lockfile no longer asks for.
 */
const BASENAMES = new Set([
  // Node
  'package.json', 'package-lock.json', 'npm-shrinkwrap.json', 'yarn.lock', 'pnpm-lock.yaml', 'pnpm-workspace.yaml',
  '.npmrc', '.yarnrc', '.yarnrc.yml', '.pnpmfile.cjs', '.nvmrc', '.node-version', 'bun.lockb',
  // Python
  'pyproject.toml', 'setup.py', 'setup.cfg', 'Pipfile', 'Pipfile.lock', 'poetry.lock', 'pdm.lock', 'uv.lock',
  'tox.ini', '.python-version', 'MANIFEST.in',
  // Rust, Go
  'Cargo.toml', 'Cargo.lock', 'rust-toolchain', 'rust-toolchain.toml', 'go.mod', 'go.sum', 'go.work', 'go.work.sum',
  // Java
  'pom.xml', 'build.gradle', 'build.gradle.kts', 'settings.gradle', 'settings.gradle.kts', 'gradle.properties', 'libs.versions.toml',
  // Ruby
  'Gemfile', 'Gemfile.lock',
]);
const PATTERNS = [
  /(^|\/)(requirements|constraints)[^/]*\.(txt|in)$/,
  /(^|\/)requirements\/[^/]+\.(txt|in)$/,
  /(^|\/)gradle\/wrapper\/[^/]+$/,
  /(^|\/)\.mvn\/(wrapper\/[^/]+|maven\.config|jvm\.config)$/,
  /(^|\/)\.cargo\/config(\.toml)?$/,
];
/** Dependencies and build output a checkout may hold: what setup makes, never what it reads. */
const SKIPPED_DIRS = new Set(['.git', 'node_modules', '.venv', 'venv', '__pycache__', '.tox', '.nox', 'target', '.mypy_cache', '.pytest_cache']);

export const MAX_KEY_BYTES = 128 * 1024 * 1024;
const MAX_VISITED = 500_000;
const MAX_MENTIONED = 200;
/** Tools whose command names no file but reads one from the repository's root. */
const TOOL_FILES = new Map([
  ['make', ['Makefile', 'GNUmakefile', 'makefile']],
  ['nox', ['noxfile.py']],
  ['just', ['justfile', 'Justfile']],
]);

export class EnvKeyFilesError extends Error {
  override name = 'EnvKeyFilesError';
}

export function isKeyFile(relPath: string): boolean {
  return BASENAMES.has(path.posix.basename(relPath)) || PATTERNS.some((re) => re.test(relPath));
}

/**
 * The files that feed the environment's key, read byte for byte from the checkout setup runs on
 * (for a follow-up, the worktree at the setup commit). A symbolic link is never followed: its
 * target text is what counts. `named`: paths an inferred setup says it read (inferred_from).
 */
export async function keptEnvFiles(checkoutDir: string, opts: { setup: readonly string[]; named?: readonly string[] }): Promise<KeyFile[]> {
  const root = path.resolve(checkoutDir);
  const wanted = new Set(await walkKeyFiles(root));
  for (const p of opts.named ?? []) wanted.add(normalise(p));
  for (const p of mentionedPaths(opts.setup)) wanted.add(p);
  const files: KeyFile[] = [];
  let total = 0;
  for (const rel of [...wanted].sort()) {
    if (!rel) continue;
    const bytes = await readInside(root, rel);
    if (bytes === null) continue;
    total += bytes.length;
    if (total > MAX_KEY_BYTES) {
      throw new EnvKeyFilesError(`the lockfiles and manifests of this repository are more than ${MAX_KEY_BYTES / 1024 / 1024} MiB together (at ${rel}); its environment is not kept`);
    }
    files.push({ path: rel, bytes });
  }
  return files;
}

async function walkKeyFiles(root: string): Promise<string[]> {
  const found: string[] = [];
  let visited = 0;
  const walk = async (rel: string): Promise<void> => {
    const entries = await readdir(rel ? path.join(root, rel) : root, { withFileTypes: true });
    for (const e of entries) {
      if (++visited > MAX_VISITED) throw new EnvKeyFilesError(`the checkout has more than ${MAX_VISITED} files and directories; its environment is not kept`);
      const p = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (!SKIPPED_DIRS.has(e.name)) await walk(p);
      } else if ((e.isFile() || e.isSymbolicLink()) && isKeyFile(p)) {
        found.push(p);
      }
    }
  };
  await walk('');
  return found;
}

/** Words of the setup commands that look like paths in the repository (checked for existence later). */
export function mentionedPaths(setup: readonly string[]): string[] {
  const out = new Set<string>();
  for (const command of setup) {
    for (const word of command.split(/[\s;&|<>()'"`=,]+/)) {
      for (const f of TOOL_FILES.get(word) ?? []) out.add(f);
      const p = normalise(word);
      if (p && /^[\w.@+-][\w./@+-]*$/.test(p) && !p.split('/').includes('..') && /[./]/.test(p)) out.add(p);
      if (out.size >= MAX_MENTIONED) return [...out];
    }
  }
  return [...out];
}

function normalise(p: string): string {
  return p.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
}

/**
 * A file's bytes, or a symbolic link's target marked as such; null when the path is missing, a
 * directory, or reached through a symbolic link on the way.
 */
async function readInside(root: string, rel: string): Promise<Buffer | null> {
  const parts = rel.split('/');
  if (parts.some((s) => s === '..' || s === '' || s === '.git')) return null;
  let at = root;
  for (const part of parts.slice(0, -1)) {
    at = path.join(at, part);
    const st = await lstat(at).catch(() => null);
    if (!st?.isDirectory()) return null;
  }
  const full = path.join(root, rel);
  const st = await lstat(full).catch(() => null);
  if (!st) return null;
  if (st.isSymbolicLink()) return Buffer.from(`\0symlink\0${await readlink(full)}`);
  if (!st.isFile()) return null;
  if (st.size > MAX_KEY_BYTES) throw new EnvKeyFilesError(`${rel} is larger than ${MAX_KEY_BYTES / 1024 / 1024} MiB; the environment is not kept`);
  const fh = await open(full, 'r');
  try {
    return await fh.readFile();
  } finally {
    await fh.close();
  }
}
