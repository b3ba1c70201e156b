import { stat } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { parseRepoConfig, type RepoConfig } from '../config/repo-config.ts';
import { directoryReader, inferCommands, type InferredCommands } from '../inference/index.ts';
import { UsageError } from '../shared/usage-error.ts';
import { parseCommandArgs } from './args.ts';

const CONFIG_FILE = '.github/lilypad.yml';

const HELP = `Usage: lilypad config --repo <path> [--setup <command>]... [--test <command>] [--json]

Prints the configuration Lilypad would use for the repository at <path>: its ${CONFIG_FILE}
merged over the defaults, with setup and test commands inferred from the repository's files
where the file does not set them, and where each value came from (config, cli, inferred, default).

Options:
  --repo <path>       A local checkout of the repository
  --setup <command>   A setup command, as \`lilypad run --setup\` takes it (repeatable; replaces the file's)
  --test <command>    The test command, as \`lilypad run --test\` takes it
  --json              Print JSON: { config, sources, inferred, file }`;

export type ValueSource = 'config' | 'cli' | 'inferred' | 'default';

export interface EffectiveConfig {
  /** The configuration file read, relative to the repository; null when there is none. */
  file: string | null;
  config: RepoConfig;
  sources: Record<keyof RepoConfig, ValueSource>;
  /** What inference found, with the files it read and its notes (also where the file sets both). */
  inferred: InferredCommands;
}

/**
 * The effective configuration of a local repository: the file over the defaults, the command
 * line over the file for setup and test, inference where neither says.
 */
export async function effectiveConfig(repoDir: string, cli: { setup?: string[]; test?: string } = {}): Promise<EffectiveConfig> {
  const reader = directoryReader(repoDir);
  const text = await reader.readFile(CONFIG_FILE, 1024 * 1024);
  let raw: Record<string, unknown> = {};
  if (text !== null) {
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (err) {
      throw new UsageError(`${CONFIG_FILE} in ${repoDir} is not valid YAML: ${(err as Error).message.split('\n')[0]}; fix the file or remove it`);
    }
    const parsed = parseRepoConfig(doc, CONFIG_FILE);
    if (!parsed.ok) throw new UsageError(`${CONFIG_FILE} in ${repoDir} is not valid:\n  - ${parsed.problems.join('\n  - ')}`);
    raw = doc && typeof doc === 'object' ? (doc as Record<string, unknown>) : {};
  }
  const parsed = parseRepoConfig(text === null ? null : raw, text === null ? null : CONFIG_FILE);
  if (!parsed.ok) throw new UsageError(parsed.problems.join('; '));
  const config: RepoConfig = { ...parsed.config };
  const sources = Object.fromEntries(Object.keys(config).map((k) => [k, k in raw ? 'config' : 'default'])) as Record<keyof RepoConfig, ValueSource>;
  for (const key of ['image', 'reviewers', 'test'] as const) if (!(key in sources)) sources[key] = key in raw ? 'config' : 'default';

  const inferred = await inferCommands(reader);
  if (cli.setup && cli.setup.length > 0) {
    config.setup = cli.setup;
    sources.setup = 'cli';
  } else if (!('setup' in raw) && inferred.setup.commands.length > 0) {
    config.setup = inferred.setup.commands;
    sources.setup = 'inferred';
  }
  if (cli.test !== undefined) {
    config.test = cli.test;
    sources.test = 'cli';
  } else if (!('test' in raw) && inferred.test.command !== null) {
    config.test = inferred.test.command;
    sources.test = 'inferred';
  }
  return { file: text === null ? null : CONFIG_FILE, config, sources, inferred };
}

export async function configCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandArgs('lilypad config', {
    args: argv,
    options: {
      repo: { type: 'string' },
      setup: { type: 'string', multiple: true },
      test: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  if (!values.repo) throw new UsageError(`--repo <path> is required: the local checkout to describe\n\n${HELP}`);
  const dir = path.resolve(values.repo);
  const st = await stat(dir).catch(() => null);
  if (!st?.isDirectory()) throw new UsageError(`--repo ${values.repo}: no such directory; give the path of a local checkout`);
  if (values.test !== undefined && !values.test.trim()) throw new UsageError('--test must be a non-empty command');

  const eff = await effectiveConfig(dir, { ...(values.setup ? { setup: values.setup } : {}), ...(values.test !== undefined ? { test: values.test } : {}) });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(eff, null, 2)}\n`);
    return 0;
  }
  process.stdout.write(formatEffectiveConfig(dir, eff));
  return 0;
}

export function formatEffectiveConfig(dir: string, eff: EffectiveConfig): string {
  const lines = [`Configuration for ${dir} (${eff.file ?? `no ${CONFIG_FILE}: defaults and inference`})`, ''];
  const width = Math.max(...Object.keys(eff.sources).map((k) => k.length)) + 2;
  const origin = (key: keyof RepoConfig): string => {
    const s = eff.sources[key];
    if (s !== 'inferred') return s;
    const from = key === 'setup' ? eff.inferred.setup.inferred_from : eff.inferred.test.inferred_from;
    const runner = key === 'test' && eff.inferred.test.runner ? `, runner ${eff.inferred.test.runner}` : '';
    return `inferred from ${from.join(', ') || 'the file list'}${runner}`;
  };
  for (const key of Object.keys(eff.sources).sort() as Array<keyof RepoConfig>) {
    const value = eff.config[key];
    const shown = value === undefined ? ['(none)'] : Array.isArray(value) ? (value.length ? value.map(String) : ['[]']) : [String(value)];
    lines.push(`${key.padEnd(width)}${shown[0]}    [${origin(key)}]`);
    for (const more of shown.slice(1)) lines.push(`${''.padEnd(width)}${more}`);
  }
  if (eff.inferred.notes.length) {
    lines.push('', 'Inference notes:');
    for (const note of eff.inferred.notes) lines.push(`  - ${note}`);
  }
  return `${lines.join('\n')}\n`;
}
