import { compiledEcosystem, inferGo, inferJava, inferRust } from './compiled.ts';
import { inferNode } from './node.ts';
import { inferPython, isPython, isPythonPackage } from './python.ts';
import type { RepoReader } from './reader.ts';
import { RepoView, type Candidate, type InferOptions, type InferredCommands } from './types.ts';

export const DEFAULT_VENV = '$HOME/.lilypad-venv';
export const DEFAULT_TOOLS = '$HOME/.lilypad-tools';

/**
 * Setup and test commands for a repository nobody configured, as an experienced contributor
 * would pick them from its files at the base commit. Reads only; runs nothing. The primary
 * ecosystem is the one with its own packaging at the root: a Python package, then Rust, Go,
 * Java, then Node (package.json), then Python with only requirements files.
 */
export async function inferCommands(reader: RepoReader, opts: InferOptions = {}): Promise<InferredCommands> {
  const venv = opts.venvDir ?? DEFAULT_VENV;
  const tools = opts.toolsDir ?? DEFAULT_TOOLS;
  for (const [name, dir] of [['venvDir', venv], ['toolsDir', tools]] as const) {
    if (!/^(\$HOME|\/)[\w./-]*$/.test(dir)) throw new Error(`${name} ${JSON.stringify(dir)} must be an absolute path or start with $HOME, with letters, digits, . _ - and / only`);
  }
  const repo = new RepoView(await reader.listFiles(), reader);
  const found: Candidate[] = [];
  const pythonFirst = isPythonPackage(repo);
  if (pythonFirst) found.push(await inferPython(repo, venv));
  const compiled = compiledEcosystem(repo);
  if (compiled === 'rust') found.push(await inferRust(repo));
  if (compiled === 'go') found.push(await inferGo(repo));
  if (compiled === 'java') found.push(await inferJava(repo));
  if (repo.has('package.json')) found.push(await inferNode(repo, tools));
  if (!pythonFirst && isPython(repo)) found.push(await inferPython(repo, venv));

  // A candidate with a test command wins over one without; otherwise the order above decides.
  const primary = found.find((c) => c.test !== null) ?? found[0];
  if (!primary) {
    return {
      ecosystem: null,
      setup: { commands: [], source: 'inferred', inferred_from: [] },
      test: { command: null, source: 'inferred', inferred_from: [], runner: null },
      env_path: [],
      notes: ['no pyproject.toml, setup.py, requirements*.txt, package.json, Cargo.toml, go.mod, pom.xml or build.gradle at the root: no setup or test command was inferred; set `setup` and `test` in .github/lilypad.yml'],
    };
  }
  const others = found.filter((c) => c !== primary);
  const notes = [...primary.notes];
  if (others.length) notes.push(`also found ${others.map((c) => c.ecosystem).join(', ')} files; only the ${primary.ecosystem} setup is used (set \`setup\` in .github/lilypad.yml for more)`);
  return {
    ecosystem: primary.ecosystem,
    setup: { commands: primary.setup, source: 'inferred', inferred_from: primary.setupFrom },
    test: { command: primary.test, source: 'inferred', inferred_from: primary.testFrom, runner: primary.test === null ? null : primary.runner },
    env_path: primary.envPath,
    notes,
  };
}
