import { spawn } from 'node:child_process';
import { lstat, open, readdir } from 'node:fs/promises';
import path from 'node:path';

/** A repository at one commit, as inference reads it: the file list and capped file contents. */
export interface RepoReader {
  /** Every regular file's path (posix, relative to the root); symlinks and submodules left out. */
  listFiles(): Promise<string[]>;
  /** The file's first maxBytes bytes as UTF-8; null when there is no such regular file. */
  readFile(filePath: string, maxBytes?: number): Promise<string | null>;
}

export const DEFAULT_READ_BYTES = 256 * 1024;
/** More files than this and the listing stops: inference only needs the top of the tree and a sample. */
export const MAX_LISTED_FILES = 100_000;
// Never descended into: build output and dependencies a checkout may hold, and git's own files.
const SKIPPED_DIRS = new Set(['.git', 'node_modules', '.venv', 'venv', 'target', '__pycache__', '.tox', '.nox', 'dist', 'build', '.mypy_cache', '.pytest_cache']);

/** A checked-out directory. Symlinks are neither followed nor read: they could point out of the repository. */
export function directoryReader(root: string): RepoReader {
  const abs = path.resolve(root);
  let listed: Promise<string[]> | null = null;
  return {
    listFiles() {
      listed ??= (async () => {
        const out: string[] = [];
        const walk = async (rel: string): Promise<void> => {
          if (out.length >= MAX_LISTED_FILES) return;
          const entries = await readdir(path.join(abs, rel), { withFileTypes: true });
          entries.sort((a, b) => (a.name < b.name ? -1 : 1));
          for (const e of entries) {
            const p = rel ? `${rel}/${e.name}` : e.name;
            if (e.isDirectory()) {
              if (!SKIPPED_DIRS.has(e.name)) await walk(p);
            } else if (e.isFile() && out.length < MAX_LISTED_FILES) out.push(p);
          }
        };
        await walk('');
        return out;
      })();
      return listed;
    },
    async readFile(filePath, maxBytes = DEFAULT_READ_BYTES) {
      const full = path.join(abs, filePath);
      if (!full.startsWith(abs + path.sep)) return null;
      // Every component must be a real directory or file: no symlink anywhere on the way.
      let at = abs;
      for (const part of filePath.split('/')) {
        at = path.join(at, part);
        const st = await lstat(at).catch(() => null);
        if (!st || st.isSymbolicLink()) return null;
      }
      const fh = await open(full, 'r').catch(() => null);
      if (!fh) return null;
      try {
        if (!(await fh.stat()).isFile()) return null;
        const buf = Buffer.alloc(maxBytes);
        const { bytesRead } = await fh.read(buf, 0, maxBytes, 0);
        return buf.subarray(0, bytesRead).toString('utf8');
      } finally {
        await fh.close();
      }
    },
  };
}

/**
 * A commit in a (bare) git repository, read with `git ls-tree` and `git cat-file`, no checkout:
 * what the base commit holds, before anything runs. Symlinks (mode 120000) and submodules are left out.
 */
export function gitTreeReader(gitDir: string, commit: string): RepoReader {
  if (!/^[0-9a-f]{7,64}$/i.test(commit) && !/^[\w./-]+$/.test(commit)) throw new Error(`not a commit: ${JSON.stringify(commit)}`);
  let listed: Promise<string[]> | null = null;
  const git = ['--git-dir', gitDir, '-c', 'core.quotepath=false'];
  return {
    listFiles() {
      listed ??= gitOutput([...git, 'ls-tree', '-r', '-z', '--full-tree', commit], 64 * 1024 * 1024).then((out) => {
        if (out === null) throw new Error(`git ls-tree ${commit} failed in ${gitDir}: is the commit there?`);
        const files: string[] = [];
        for (const entry of out.toString('utf8').split('\0')) {
          // "<mode> <type> <sha>\t<path>"
          const m = /^(\d+) (\w+) [0-9a-f]+\t(.+)$/s.exec(entry);
          if (m && m[2] === 'blob' && m[1] !== '120000' && files.length < MAX_LISTED_FILES) files.push(m[3]!);
        }
        return files;
      });
      return listed;
    },
    async readFile(filePath, maxBytes = DEFAULT_READ_BYTES) {
      if (!(await this.listFiles()).includes(filePath)) return null;
      const out = await gitOutput([...git, 'cat-file', 'blob', `${commit}:${filePath}`], maxBytes);
      return out === null ? null : out.toString('utf8');
    },
  };
}

// Stdout up to maxBytes (the process is stopped past it); null on a non-zero exit.
function gitOutput(args: string[], maxBytes: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { stdio: ['ignore', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    let size = 0;
    let cut = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (cut) return;
      chunks.push(chunk);
      size += chunk.length;
      if (size >= maxBytes) {
        cut = true;
        child.kill();
      }
    });
    child.on('error', reject);
    child.on('close', (code) => resolve(cut || code === 0 ? Buffer.concat(chunks).subarray(0, maxBytes) : null));
  });
}
