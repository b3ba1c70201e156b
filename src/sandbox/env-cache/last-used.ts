import { mkdir, open, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';

/**
 * When each kept environment was last used, for least-recently-used eviction. An image's labels
 * cannot change after it is made, so the time lives on this machine, as the modification time of
 * one empty file per key under LILYPAD_DATA_DIR/env-cache/<owner>/used/: touching it is one
 * atomic system call, so workers sharing the directory need no lock and no index to keep whole.
 * A key with no file (a wiped data directory) counts as last used when it was made.
 */
export class LastUsed {
  private readonly dir: string;

  constructor(dataDir: string, owner: string) {
    this.dir = path.join(dataDir, 'env-cache', owner, 'used');
  }

  private file(key: string): string {
    if (!/^[0-9a-f]{64}$/.test(key)) throw new Error(`not an environment key: ${JSON.stringify(key)}`);
    return path.join(this.dir, key);
  }

  async touch(key: string, at: Date = new Date()): Promise<void> {
    const file = this.file(key);
    try {
      await utimes(file, at, at);
    } catch {
      await mkdir(this.dir, { recursive: true });
      await (await open(file, 'a')).close();
      await utimes(file, at, at);
    }
  }

  /** Milliseconds since the epoch, or null when this machine never used the key. */
  async get(key: string): Promise<number | null> {
    const st = await stat(this.file(key)).catch(() => null);
    return st ? st.mtimeMs : null;
  }

  async forget(key: string): Promise<void> {
    await rm(this.file(key), { force: true });
  }
}
