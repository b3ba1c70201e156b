import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { Sandbox } from './sandbox.ts';

/**
 * Writes a tar of the regular files under argv[1] to stdout, or exits 4 (with the total on stderr)
 * when they hold more than argv[2] bytes, 3 when there is no such directory. Links are neither
 * followed nor copied: a cache holds files, and a link could name anything in the other sandbox.
 */
const READ_SCRIPT = `import os, stat, sys, tarfile
root, cap = sys.argv[1], int(sys.argv[2])
if os.path.islink(root) or not os.path.isdir(root):
    sys.stderr.write("no directory %s" % root); sys.exit(3)
files, total = [], 0
for here, _dirs, names in os.walk(root):
    for name in names:
        p = os.path.join(here, name)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            files.append(p); total += st.st_size
if total > cap:
    sys.stderr.write("%d bytes in %d files" % (total, len(files))); sys.exit(4)
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.GNU_FORMAT) as out:
    for p in files:
        out.add(p, arcname=os.path.relpath(p, root), recursive=False)
sys.stderr.write("%d bytes in %d files" % (total, len(files)))
`;

/**
 * Replaces the directory argv[1] with the regular files of the tar on stdin. Whatever the directory
 * held goes first, so it ends exactly as the copy; a member that is not a regular file, or whose
 * name leaves the directory, is skipped.
 */
const WRITE_SCRIPT = `import os, shutil, sys, tarfile
root = sys.argv[1]
if os.path.islink(root):
    os.unlink(root)
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root, exist_ok=True)
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as archive:
    for m in archive:
        name = os.path.normpath(m.name)
        if not m.isfile() or os.path.isabs(name) or name == ".." or name.startswith("../"):
            continue
        dest = os.path.join(root, name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            shutil.copyfileobj(archive.extractfile(m), f)
        os.utime(dest, (m.mtime, m.mtime))
`;

/** A directory read out of a sandbox into a tar file on the host, until `dispose()`. */
export interface HeldDir {
  dir: string;
  bytes: number;
  files: number;
  /** Writes it over the same directory of another sandbox; null when that worked, else why not. */
  writeInto(to: Sandbox, timeoutMs: number): Promise<string | null>;
  dispose(): Promise<void>;
}

/**
 * Reads `dir` of a sandbox out to a file on the host, through a process inside it run as the
 * agent's user (gVisor does not show the engine files a sandbox wrote, nor a sandbox files the
 * engine wrote behind it). Past `maxBytes` nothing is kept and the answer says why; the host
 * counts what arrives too, so a reader that understates the size cannot send more.
 */
export async function readDirOut(from: Sandbox, dir: string, opts: { maxBytes: number; timeoutMs: number }): Promise<HeldDir | { why: string }> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'lilypad-dir-copy-'));
  const dispose = () => rm(tmp, { recursive: true, force: true });
  try {
    const file = path.join(tmp, 'dir.tar');
    const read = await readInto(from, dir, file, opts);
    if ('why' in read) {
      await dispose();
      return read;
    }
    const writeInto = async (to: Sandbox, timeoutMs: number) => {
      const res = await to.pythonAsAgent(WRITE_SCRIPT, [dir], { input: createReadStream(file), timeoutMs });
      return res.exitCode === 0 ? null : `writing it failed (exit ${res.exitCode}): ${res.stderr.trim().slice(-200)}`;
    };
    return { dir, ...read, writeInto, dispose };
  } catch (err) {
    await dispose();
    throw err;
  }
}

async function readInto(from: Sandbox, dir: string, file: string, opts: { maxBytes: number; timeoutMs: number }): Promise<{ bytes: number; files: number } | { why: string }> {
  const sink = createWriteStream(file);
  // The host's own bound, whatever the reader says: the cap twice over leaves room for the headers.
  const counter = new CappedCounter(2 * opts.maxBytes + 1024 * 1024);
  counter.pipe(sink);
  const res = await from.pythonAsAgent(READ_SCRIPT, [dir, String(opts.maxBytes)], { output: counter, timeoutMs: opts.timeoutMs }).finally(() => counter.end());
  await finished(sink);
  const said = /^(\d+) bytes in (\d+) files$/.exec(res.stderr.trim());
  if (res.exitCode === 3) return { why: `there is no ${dir}` };
  if (res.exitCode === 4 && said) return { why: `it holds ${said[1]} bytes in ${said[2]} files, over the cap of ${opts.maxBytes} bytes` };
  if (res.exitCode !== 0 || !said) return { why: `reading it failed (exit ${res.exitCode}): ${res.stderr.trim().slice(-200)}` };
  if (counter.over) return { why: `its tar came to more than ${counter.limit} bytes` };
  return { bytes: Number(said[1]), files: Number(said[2]) };
}

/** Passes bytes on up to a limit, then drops the rest and says so. */
class CappedCounter extends Transform {
  bytes = 0;
  over = false;
  constructor(readonly limit: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.limit) this.over = true;
    done(null, this.over ? undefined : chunk);
  }
}
