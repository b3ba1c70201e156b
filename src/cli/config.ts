import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { RepoConfig } from '../config/repo-config.ts';
import { directoryReader } from '../inference/index.ts';
import { CONFIG_FILE, ConfigFileError, effectiveConfig, type EffectiveConfig } from '../pipeline/effective-config.ts';
import { UsageError } from '../shared/usage-error.ts';
import { parseCommandArgs } from './args.ts';

const HELP = `Usage: lilypad config --repo <path> [--setup <command>]... [--test <command>] [--json]

Prints the configuration Lilypad would use for the repository at <path>: its ${CONFIG_FILE}
merged over the defaults, with setup and test commands inferred from the repository's files
where the file does not set them, and where each value came from (config, cli, inferred, default).

Options:
  --repo <path>       A local checkout of the repository
  --setup <command>   A setup command, as \`lilypad run --setup\` takes it (repeatable; replaces the file's)
  --test <command>    The test command, as \`lilypad run --test\` takes it
  --json              Print JSON: { config, sources, inferred, file }`;

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

  const eff = await effectiveConfig(directoryReader(dir), { setup: values.setup, test: values.test }).catch((err: unknown) => {
    if (err instanceof ConfigFileError) throw new UsageError(`${err.message.replace(/^`[^`]+`/, `${CONFIG_FILE} in ${values.repo}`)}; ${err.todo}`);
    throw err;
  });
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
    const from = (key === 'setup' ? eff.inferred?.setup.inferred_from : eff.inferred?.test.inferred_from) ?? [];
    const runner = key === 'test' && eff.inferred?.test.runner ? `, runner ${eff.inferred.test.runner}` : '';
    return `inferred from ${from.join(', ') || 'the file list'}${runner}`;
  };
  for (const key of Object.keys(eff.sources).sort() as Array<keyof RepoConfig>) {
    const value = eff.config[key];
    const shown = value === undefined ? ['(none)'] : Array.isArray(value) ? (value.length ? value.map(String) : ['[]']) : [String(value)];
    lines.push(`${key.padEnd(width)}${shown[0]}    [${origin(key)}]`);
    for (const more of shown.slice(1)) lines.push(`${''.padEnd(width)}${more}`);
  }
  if (eff.inferred?.notes.length) {
    lines.push('', 'Inference notes:');
    for (const note of eff.inferred.notes) lines.push(`  - ${note}`);
  }
  return `${lines.join('\n')}\n`;
}
