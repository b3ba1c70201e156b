import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import Docker from 'dockerode';
import { loadEnv } from '../config/env.ts';
import { formatAge, formatBytes } from '../sandbox/env-cache/index.ts';
import { listKept, type KeptImageEntry } from '../sandbox/env-cache/evict.ts';
import { LastUsed } from '../sandbox/env-cache/last-used.ts';
import { withDeadline } from '../sandbox/deadline.ts';
import { UsageError } from '../shared/usage-error.ts';
import { parseCommandArgs } from './args.ts';

const USAGE = `Usage: lilypad env <command> [options]

Kept environments: after a repository's setup succeeds, Lilypad keeps the sandbox as an image and
later jobs of that repository start from it (docs/kept-environments.md). These commands act on
the environments of this machine's installations (LILYPAD_DATA_DIR) on this Docker engine.

Commands:
  list [--json]               Each kept environment: repository, age, size, last use
  purge --repo <owner/name>   Remove that repository's kept environments (for \`lilypad run\`: its path)
  purge --all                 Remove every kept environment

Its next job runs setup again and keeps a new environment. One a running sandbox uses is not
removed (the command says so and exits 1): purge again when its job has ended.`;

const COMMAND = 'lilypad env';
const OWNER_RE = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
const REPO_RE = /^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;

export async function envCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'list':
      return list(rest);
    case 'purge':
      return purge(rest);
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(`${USAGE}\n`);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown env command "${sub}"; use list or purge (see \`lilypad env --help\`)`, { command: COMMAND });
  }
}

/** One kept environment as `lilypad env list` shows it. */
interface Row {
  repository: string;
  repoId: string | null;
  account: string;
  owner: string;
  key: string | null;
  image: string;
  bytes: number;
  ageSeconds: number;
  lastUsedSecondsAgo: number;
  /** Past LILYPAD_ENV_MAX_AGE_HOURS (removed at its next lookup), or a leftover of a keep. */
  state: 'kept' | 'too old' | 'leftover';
}

async function list(argv: string[]): Promise<number> {
  const { values } = parseCommandArgs(`${COMMAND} list`, { args: argv, options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const env = loadEnv();
  const rows = await rowsOf(env.LILYPAD_DATA_DIR, env.LILYPAD_ENV_MAX_AGE_HOURS);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    return 0;
  }
  if (rows.length === 0) {
    process.stdout.write(`No kept environments of this machine's installations (LILYPAD_DATA_DIR=${env.LILYPAD_DATA_DIR}).\n`);
    return 0;
  }
  const table = [['REPOSITORY', 'AGE', 'SIZE', 'LAST USE', 'ACCOUNT', 'STATE'], ...rows.map((r) => [r.repository, formatAge(r.ageSeconds), formatBytes(r.bytes), `${formatAge(r.lastUsedSecondsAgo)} ago`, r.account, r.state])];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((line) => line[i]!.length)));
  const lines = table.map((line) => line.map((cell, i) => (i === line.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '));
  const total = rows.reduce((sum, r) => sum + r.bytes, 0);
  process.stdout.write(`${lines.join('\n')}\n\n${rows.length} kept environment(s), ${formatBytes(total)} (LILYPAD_ENV_CACHE_GB=${env.LILYPAD_ENV_CACHE_GB}, LILYPAD_ENV_MAX_AGE_HOURS=${env.LILYPAD_ENV_MAX_AGE_HOURS})\n`);
  return 0;
}

async function purge(argv: string[]): Promise<number> {
  const command = `${COMMAND} purge`;
  const { values } = parseCommandArgs(command, { args: argv, options: { repo: { type: 'string' }, all: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (values.all && values.repo !== undefined) throw new UsageError('give either --repo <owner/name> or --all, not both', { command });
  if (!values.all && values.repo === undefined) throw new UsageError('say what to remove: --repo <owner/name> for one repository, or --all for every kept environment', { command });
  const match = values.repo === undefined ? () => true : repoMatcher(values.repo, command);
  const env = loadEnv();
  const rows = (await rowsOf(env.LILYPAD_DATA_DIR, env.LILYPAD_ENV_MAX_AGE_HOURS)).filter((r) => (values.all ? true : r.state !== 'leftover' && match(r)));
  if (rows.length === 0) {
    process.stdout.write(values.repo !== undefined ? `lilypad env: no kept environment of ${values.repo}; nothing removed.\n` : 'lilypad env: no kept environments; nothing removed.\n');
    return 0;
  }
  const docker = new Docker();
  let refused = 0;
  for (const r of rows) {
    const what = `the kept environment of ${r.repository} (${formatBytes(r.bytes)}, made ${formatAge(r.ageSeconds)} ago, ${r.image.slice(7, 19)})`;
    const outcome = await withDeadline(docker.getImage(r.image).remove({ force: false, noprune: false }), 60_000, 'removing a kept environment').then(
      () => 'removed',
      (err: { statusCode?: number; message?: string }) => (err.statusCode === 404 ? 'removed' : err.statusCode === 409 ? 'in use' : (err.message ?? String(err)).slice(0, 200)),
    );
    if (outcome === 'removed') {
      if (r.key) await new LastUsed(env.LILYPAD_DATA_DIR, r.owner).forget(r.key);
      process.stdout.write(`lilypad env: removed ${what}\n`);
    } else {
      refused += 1;
      const why = outcome === 'in use' ? 'a running sandbox uses it; purge again when its job has ended' : outcome;
      process.stdout.write(`lilypad env: kept ${what}: ${why}\n`);
    }
  }
  return refused > 0 ? 1 : 0;
}

/** `owner/name` (any case) or, for `lilypad run`'s environments, the repository's local path. */
function repoMatcher(raw: string, command: string): (r: Row) => boolean {
  const given = raw.trim();
  const local = `local:${path.resolve(given)}`;
  if (REPO_RE.test(given)) return (r) => r.repository.toLowerCase() === given.toLowerCase() || r.repoId === local;
  if (given.startsWith('/') || given.startsWith('.')) return (r) => r.repoId === local;
  throw new UsageError(`--repo ${JSON.stringify(raw)} is not a repository: give it as owner/name (e.g. --repo octo-org/widgets), or the path \`lilypad run\` was given`, { command });
}

/** The owners whose environments this machine keeps: its installations and every owner with last-use records here. */
async function ownersOf(dataDir: string): Promise<string[]> {
  const owners = new Set<string>();
  const text = await readFile(path.join(dataDir, 'installations.json'), 'utf8').catch(() => '{}');
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object') for (const v of Object.values(parsed)) if (typeof v === 'string' && OWNER_RE.test(v)) owners.add(v);
  } catch {
    // A damaged file names no installation; the last-use records below still do.
  }
  for (const name of await readdir(path.join(dataDir, 'env-cache')).catch(() => [] as string[])) if (OWNER_RE.test(name)) owners.add(name);
  return [...owners].sort();
}

async function rowsOf(dataDir: string, maxAgeHours: number): Promise<Row[]> {
  const docker = new Docker();
  const now = Date.now();
  const rows: Row[] = [];
  for (const owner of await ownersOf(dataDir)) {
    let entries: KeptImageEntry[];
    try {
      entries = await listKept(docker, owner, new LastUsed(dataDir, owner));
    } catch (err) {
      const e = err as { code?: string; message?: string };
      if (e.code === 'ENOENT' || e.code === 'ECONNREFUSED' || e.code === 'EACCES') {
        throw new UsageError(`cannot reach the Docker engine (${e.code}); start it (e.g. \`dockerd &\`) or point DOCKER_HOST at it`, { command: COMMAND });
      }
      throw err;
    }
    for (const e of entries) {
      const ageSeconds = Math.max(0, (now - e.createdMs) / 1000);
      rows.push({
        repository: e.repoName ?? e.repoId ?? '(unknown)',
        repoId: e.repoId,
        account: e.account,
        owner,
        key: e.key,
        image: e.id,
        bytes: e.bytes,
        ageSeconds: Math.round(ageSeconds),
        lastUsedSecondsAgo: Math.max(0, Math.round((now - e.lastUsed) / 1000)),
        state: e.leftover && e.leftover !== 'base-gone' ? 'leftover' : ageSeconds > maxAgeHours * 3600 ? 'too old' : 'kept',
      });
    }
  }
  return rows.sort((a, b) => a.repository.localeCompare(b.repository) || b.lastUsedSecondsAgo - a.lastUsedSecondsAgo);
}
