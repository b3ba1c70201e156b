import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A file's content after the change: text or bytes, null to delete it, or made executable. */
export type Changed = string | Buffer | null | { content: string; executable: true };

export interface ChangeRepo {
  /** A real git repository at the base commit (the change is not applied). */
  dir: string;
  /** The change as Lilypad takes it out of a sandbox: `git diff --cached --binary --no-renames <base>`. */
  bytes: Buffer;
  /** The same, read as UTF-8. */
  diff: string;
  git: (...args: string[]) => string;
  remove: () => void;
}

/** Commits `base` in a new repository, makes `change` on top of it, and returns the diff with the tree back at base. */
export function changeRepo(base: Record<string, string | Buffer>, change: Record<string, Changed>, opts: { quotePath?: boolean } = {}): ChangeRepo {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-evidence-'));
  // Lilypad's sandbox git writes paths unquoted (core.quotepath=false); git's default quotes non-ASCII ones.
  const config = ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@localhost', '-c', 'init.defaultBranch=main', '-c', `core.quotePath=${opts.quotePath ?? false}`];
  const gitBytes = (...args: string[]) => execFileSync('git', [...config, ...args], { cwd: dir, stdio: 'pipe' });
  const git = (...args: string[]) => gitBytes(...args).toString('utf8');
  const write = (rel: string, content: string | Buffer) => {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  };
  git('init', '-q');
  for (const [rel, content] of Object.entries(base)) write(rel, content);
  git('add', '-A');
  git('commit', '-qm', 'base');
  for (const [rel, content] of Object.entries(change)) {
    if (content === null) rmSync(path.join(dir, rel));
    else if (typeof content === 'object' && !Buffer.isBuffer(content)) {
      write(rel, content.content);
      chmodSync(path.join(dir, rel), 0o755);
    } else write(rel, content);
  }
  git('add', '-A');
  const bytes = gitBytes('diff', '--cached', '--binary', '--no-renames', '--no-color', 'HEAD');
  git('reset', '-q', '--hard', 'HEAD');
  return { dir, bytes, diff: bytes.toString('utf8'), git, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
