import type { TestRunner } from '../test-results/types.ts';
import type { RepoReader } from './reader.ts';

export type Ecosystem = 'python' | 'node' | 'rust' | 'go' | 'java';

/** What inference found: the commands, the files they came from, and why anything is missing. */
export interface InferredCommands {
  ecosystem: Ecosystem | null;
  setup: { commands: string[]; source: 'inferred'; inferred_from: string[] };
  test: { command: string | null; source: 'inferred'; inferred_from: string[]; runner: TestRunner | null };
  /** Directories the setup fills with tools (a virtual environment's bin): first on PATH for the agent's shell too. */
  env_path: string[];
  notes: string[];
}

export interface InferOptions {
  /**
   * Where Python's virtual environment goes: outside the checkout, so that nothing setup writes
   * can end up in the patch. `$HOME` is expanded by the sandbox's shell.
   */
  venvDir?: string;
  /** Where yarn or pnpm is installed when a project needs one (the image has npm only); outside the checkout too. */
  toolsDir?: string;
}

/** One ecosystem's proposal, before the repository's hints are weighed. */
export interface Candidate {
  ecosystem: Ecosystem;
  setup: string[];
  setupFrom: string[];
  test: string | null;
  testFrom: string[];
  runner: TestRunner | null;
  envPath: string[];
  notes: string[];
}

/** The repository as detectors see it: the file list once, reads cached. */
export class RepoView {
  readonly set: Set<string>;
  private readonly cache = new Map<string, Promise<string | null>>();

  constructor(
    readonly files: string[],
    private readonly reader: RepoReader,
  ) {
    this.set = new Set(files);
  }

  has(p: string): boolean {
    return this.set.has(p);
  }

  /** The first of these paths that exists. */
  first(...paths: string[]): string | undefined {
    return paths.find((p) => this.set.has(p));
  }

  read(p: string): Promise<string | null> {
    if (!this.set.has(p)) return Promise.resolve(null);
    let hit = this.cache.get(p);
    if (!hit) {
      hit = this.reader.readFile(p);
      this.cache.set(p, hit);
    }
    return hit;
  }

  /** Whether any file lies under this directory. */
  hasDir(dir: string): boolean {
    const prefix = `${dir.replace(/\/$/, '')}/`;
    return this.files.some((f) => f.startsWith(prefix));
  }
}

export function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:=@%+,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
