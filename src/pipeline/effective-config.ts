import { parse as parseYaml } from 'yaml';
import { parseRepoConfig, type RepoConfig } from '../config/repo-config.ts';
import { classifyCommand } from '../inference/hints.ts';
import { inferCommands, type InferredCommands, type RepoReader } from '../inference/index.ts';
import type { Ecosystem } from '../inference/index.ts';
import type { TestRunner } from '../test-results/index.ts';
import { UserError } from './failures.ts';
import type { EnvRepo } from '../sandbox/env-cache/index.ts';

export const CONFIG_FILE = '.github/lilypad.yml';

export type ValueSource = 'config' | 'cli' | 'inferred' | 'default';

export interface EffectiveConfig {
  /** The configuration file read, relative to the repository; null when there is none. */
  file: string | null;
  config: RepoConfig;
  sources: Record<keyof RepoConfig, ValueSource>;
  /** What inference found, with the files it read and its notes (also where the file sets both). */
  inferred: InferredCommands | null;
}

/** What a local run or eval instance says over the repository's file (the command line, the instance). */
export interface ConfigOverrides {
  setup?: string[] | undefined;
  test?: string | undefined;
}

/**
 * How a run's setup and tests are treated, from where they came from: inferred setup may fail
 * without stopping the run; the tools it installs go on PATH; the files it was inferred from (and
 * every lockfile) key the kept environment; the test runner says how to read its output per test.
 */
export interface RunPlan {
  /** Names the repository among kept environments (never shared between two). */
  repoKey: string;
  /** The account (GitHub App installation) and name its kept environments are labelled with; unset: read from repoKey. */
  envRepo?: EnvRepo | undefined;
  setupInferred: boolean;
  envPath: string[];
  keyFiles: string[];
  testRunner: TestRunner | null;
  /** The repository's ecosystem as inference found it (else Go's, when the tests run `go test`): whose test cache is carried. */
  ecosystem: Ecosystem | null;
  /** Where each setting came from, and the line saying what was inferred (for the record and the people reading it). */
  sources: Record<string, ValueSource>;
  origin: string | null;
}

export function runPlanOf(effective: EffectiveConfig, repoKey: string, envRepo?: EnvRepo): RunPlan {
  const inferred = effective.inferred;
  const setupInferred = effective.sources.setup === 'inferred';
  const testInferred = effective.sources.test === 'inferred';
  const testRunner = testInferred && inferred ? inferred.test.runner : effective.config.test ? classifyCommand(effective.config.test) : null;
  return {
    repoKey,
    ...(envRepo ? { envRepo } : {}),
    setupInferred,
    envPath: setupInferred && inferred ? inferred.env_path : [],
    keyFiles: inferred ? [...inferred.setup.inferred_from] : [],
    testRunner,
    ecosystem: inferred?.ecosystem ?? (testRunner === 'go' ? 'go' : null),
    sources: effective.sources,
    origin: originLine(effective),
  };
}

/** One line saying where setup and the tests came from, for the status comment and the pull request. */
export function originLine(effective: EffectiveConfig): string | null {
  const parts: string[] = [];
  const from = (files: string[] | undefined) => (files && files.length > 0 ? files.map((f) => `\`${f}\``).join(', ') : 'the repository\'s files');
  if (effective.sources.setup === 'inferred') parts.push(`setup inferred from ${from(effective.inferred?.setup.inferred_from)}`);
  if (effective.sources.test === 'inferred') parts.push(`tests inferred from ${from(effective.inferred?.test.inferred_from)}`);
  if (parts.length === 0) return null;
  return `${capitalise(parts.join('; '))}; write \`.github/lilypad.yml\` to change it.`;
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** `.github/lilypad.yml` is not valid YAML, or not a valid configuration. */
export class ConfigFileError extends UserError {
  override name = 'ConfigFileError';
}

/** A repository's configuration as read (its file, or the organisation's): the settings and which it set itself. */
export interface LoadedConfig {
  file: string | null;
  config: RepoConfig;
  keys: readonly string[];
}

/**
 * The effective configuration of a repository at its base commit, read from its own files
 * (`lilypad run`, `lilypad eval`): its `.github/lilypad.yml` over the defaults, then resolveConfig.
 */
export async function effectiveConfig(reader: RepoReader, overrides: ConfigOverrides = {}, opts: { infer: boolean } = { infer: true }): Promise<EffectiveConfig> {
  const text = await reader.readFile(CONFIG_FILE, 1024 * 1024);
  const raw = text === null ? {} : parseConfigText(text);
  const parsed = parseRepoConfig(text === null ? null : raw, text === null ? null : CONFIG_FILE);
  if (!parsed.ok) throw new ConfigFileError(`\`${CONFIG_FILE}\` is not valid:\n${parsed.problems.map((p) => `- ${p}`).join('\n')}`, `fix \`${CONFIG_FILE}\` or remove it, then run again.`);
  return resolveConfig({ file: parsed.source, config: parsed.config, keys: parsed.keys }, reader, overrides, opts);
}

/**
 * What every run uses, the app's included: the loaded configuration, the overrides (command line,
 * eval instance) over it for setup and test, and, with `infer`, setup and test worked out from the
 * repository's files at the base commit (`reader`) where neither says.
 */
export async function resolveConfig(loaded: LoadedConfig, reader: RepoReader, overrides: ConfigOverrides = {}, opts: { infer: boolean } = { infer: true }): Promise<EffectiveConfig> {
  const config: RepoConfig = { ...loaded.config };
  const set = new Set(loaded.keys);
  const sources = Object.fromEntries(Object.keys(config).map((k) => [k, set.has(k) ? 'config' : 'default'])) as Record<keyof RepoConfig, ValueSource>;
  for (const key of ['image', 'reviewers', 'test', 'instructions'] as const) if (!(key in sources)) sources[key] = set.has(key) ? 'config' : 'default';

  const inferred = opts.infer ? await inferCommands(reader) : null;
  if (overrides.setup && overrides.setup.length > 0) {
    config.setup = overrides.setup;
    sources.setup = 'cli';
  } else if (inferred && !set.has('setup') && inferred.setup.commands.length > 0) {
    config.setup = inferred.setup.commands;
    sources.setup = 'inferred';
  }
  if (overrides.test !== undefined) {
    config.test = overrides.test;
    sources.test = 'cli';
  } else if (inferred && !set.has('test') && inferred.test.command !== null) {
    config.test = inferred.test.command;
    sources.test = 'inferred';
  }
  return { file: loaded.file, config, sources, inferred };
}

function parseConfigText(text: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigFileError(`\`${CONFIG_FILE}\` is not valid YAML: ${(err as Error).message.split('\n')[0]}`, `fix \`${CONFIG_FILE}\` or remove it, then run again.`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigFileError(`\`${CONFIG_FILE}\` is not valid: the file must be a YAML mapping of settings (key: value)`, `fix \`${CONFIG_FILE}\` or remove it, then run again.`);
  return doc as Record<string, unknown>;
}
