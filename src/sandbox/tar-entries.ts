/**
 * A POSIX (ustar) archive of a few small directories and files, built in memory: what the Docker
 * engine's putArchive unpacks into a container. The engine writes the files itself, with the
 * owner and mode given here, so nothing inside the container has to run to receive them.
 */
export type TarEntry =
  | { kind: 'dir'; path: string; mode: number; uid?: number; gid?: number }
  | { kind: 'file'; path: string; mode: number; content: string | Buffer; uid?: number; gid?: number };

const BLOCK = 512;

export function tarArchive(entries: readonly TarEntry[], mtime = new Date()): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const body = entry.kind === 'file' ? Buffer.from(entry.content) : Buffer.alloc(0);
    parts.push(header(entry, body.length, mtime));
    if (body.length > 0) {
      parts.push(body, Buffer.alloc((BLOCK - (body.length % BLOCK)) % BLOCK));
    }
  }
  // Two empty blocks end an archive.
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

function header(entry: TarEntry, size: number, mtime: Date): Buffer {
  const name = entry.kind === 'dir' ? `${entry.path.replace(/\/+$/, '')}/` : entry.path;
  if (name.startsWith('/') || name.split('/').includes('..')) throw new Error(`tar entry ${name} must be a relative path without ..`);
  // ustar keeps a name of up to 100 bytes, or a prefix of up to 155 plus that, split at a slash.
  const [prefix, short] = splitName(name);
  const h = Buffer.alloc(BLOCK);
  h.write(short, 0, 100, 'utf8');
  octal(h, 100, 8, entry.mode);
  octal(h, 108, 8, entry.uid ?? 0);
  octal(h, 116, 8, entry.gid ?? 0);
  octal(h, 124, 12, size);
  octal(h, 136, 12, Math.floor(mtime.getTime() / 1000));
  h.write(' '.repeat(8), 148, 8, 'ascii');
  h.write(entry.kind === 'dir' ? '5' : '0', 156, 1, 'ascii');
  h.write('ustar\u000000', 257, 8, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(`${sum.toString(8).padStart(6, '0')}\u0000 `, 148, 8, 'ascii');
  return h;
}

function splitName(name: string): [string, string] {
  if (Buffer.byteLength(name) <= 100) return ['', name];
  for (let i = name.lastIndexOf('/', name.length - 2); i > 0; i = name.lastIndexOf('/', i - 1)) {
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(rest) <= 100) return [prefix, rest];
  }
  throw new Error(`tar entry name too long for ustar: ${name}`);
}

function octal(h: Buffer, offset: number, width: number, value: number): void {
  h.write(`${value.toString(8).padStart(width - 1, '0')}\u0000`, offset, width, 'ascii');
}
