import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from './env.ts';

/**
 * `.env` support: every command reads `.env` from the working directory (or the file
 * `LILYPAD_ENV_FILE` names) before it parses its settings. A variable already in the environment
 * wins over the file, so `FOO=x lilypad start` still overrides what registration wrote.
 *
 * The format is the common one (and what the registration flow, and Probot's before it, write):
 * `KEY=value`, `export KEY=value`, `#` comments and blank lines, values in single quotes (literal),
 * double quotes (`\n`, `\r`, `\t`, `\"` and `\\` escapes; may span lines, as a PEM key does) or bare
 * (trailing ` # comment` removed). Anything else is an error that names the line.
 */
export interface DotEnvResult {
  /** The file read, or null when there was none to read. */
  file: string | null;
  /** Names set from the file (not those the environment already had). */
  applied: string[];
}

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function envFilePath(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): { file: string; explicit: boolean } {
  const named = env['LILYPAD_ENV_FILE']?.trim();
  if (named) return { file: path.resolve(cwd, named), explicit: true };
  return { file: path.join(cwd, '.env'), explicit: false };
}

/** Reads the `.env` file (if any) into `env`, leaving variables that are already set alone. */
export function loadDotEnv(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): DotEnvResult {
  const { file, explicit } = envFilePath(env, cwd);
  let text: string;
  try {
    if (statSync(file).isDirectory()) throw new ConfigError(`${file} is a directory, not a settings file: remove it, or set LILYPAD_ENV_FILE to the file to read`);
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !explicit) return { file: null, applied: [] };
    if (code === 'ENOENT') throw new ConfigError(`LILYPAD_ENV_FILE=${env['LILYPAD_ENV_FILE']} does not exist: create it (copy .env.example) or unset LILYPAD_ENV_FILE`);
    throw new ConfigError(`cannot read ${file} (${(err as Error).message}): make it readable by this user (chmod 600, owned by it), or move it away`);
  }
  const parsed = parseDotEnv(text, file);
  const applied: string[] = [];
  for (const [key, value] of parsed) {
    if (env[key] !== undefined) continue;
    env[key] = value;
    applied.push(key);
  }
  return { file, applied };
}

/** Parses `.env` text; throws a ConfigError naming the file and line of the first malformed entry. */
export function parseDotEnv(text: string, file = '.env'): Map<string, string> {
  const out = new Map<string, string>();
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const bad = (why: string) => new ConfigError(`${file}, line ${lineNo}: ${why}. Each line must be KEY=value (see .env.example); fix or remove the line`);
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    const body = line.startsWith('export ') ? line.slice('export '.length).trimStart() : line;
    const eq = body.indexOf('=');
    if (eq <= 0) throw bad(`"${clip(line)}" has no KEY=`);
    const key = body.slice(0, eq).trim();
    if (!KEY.test(key)) throw bad(`"${clip(key)}" is not a variable name (letters, digits and _, not starting with a digit)`);
    let rest = body.slice(eq + 1).trimStart();
    let value: string;
    const quote = rest[0];
    if (quote === '"' || quote === "'") {
      // A quoted value may continue over the following lines until its closing quote.
      let raw = rest.slice(1);
      let close = findClose(raw, quote);
      while (close < 0 && i + 1 < lines.length) {
        i++;
        raw += `\n${lines[i]!}`;
        close = findClose(raw, quote);
      }
      if (close < 0) throw new ConfigError(`${file}, line ${lineNo}: the value of ${key} opens a ${quote} quote that is never closed; add the closing ${quote}`);
      const after = raw.slice(close + 1).trim();
      if (after !== '' && !after.startsWith('#')) throw bad(`unexpected text after the quoted value of ${key}: "${clip(after)}"`);
      raw = raw.slice(0, close);
      value = quote === '"' ? unescapeDouble(raw) : raw;
    } else {
      const hash = rest.search(/\s#/);
      if (hash >= 0) rest = rest.slice(0, hash);
      value = rest.trim();
    }
    out.set(key, value);
  }
  return out;
}

function findClose(raw: string, quote: string): number {
  for (let j = 0; j < raw.length; j++) {
    if (quote === '"' && raw[j] === '\\') {
      j++;
      continue;
    }
    if (raw[j] === quote) return j;
  }
  return -1;
}

function unescapeDouble(raw: string): string {
  return raw.replace(/\\([nrt"\\])/g, (_m, c: string) => ({ n: '\n', r: '\r', t: '\t', '"': '"', '\\': '\\' })[c] ?? c);
}

function clip(s: string): string {
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}

/** Renders a value for `.env` so that parseDotEnv gives it back unchanged. */
export function formatDotEnvValue(value: string): string {
  if (/^[A-Za-z0-9_./:@+-]*$/.test(value)) return value;
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\r/g, '\\r').replace(/\n/g, '\\n')}"`;
}

/**
 * Sets `values` in the `.env` file (replacing lines that set the same names, appending the rest),
 * written to a temporary file and renamed into place, readable by this user only: it holds the
 * app's private key.
 */
export function updateDotEnv(file: string, values: Record<string, string>): void {
  let lines: string[] = [];
  try {
    lines = readFileSync(file, 'utf8').split(/\r?\n/);
    if (lines.at(-1) === '') lines.pop();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const pending = new Map(Object.entries(values));
  const kept: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.?)/.exec(line);
    const key = m?.[1];
    if (key !== undefined && pending.has(key)) {
      // Skip the continuation lines of a quoted multi-line value being replaced.
      const quote = m?.[2];
      if (quote === '"' || quote === "'") {
        let raw = line.slice(line.indexOf(quote) + 1);
        while (findClose(raw, quote) < 0 && i + 1 < lines.length) raw += `\n${lines[++i]!}`;
      }
      kept.push(`${key}=${formatDotEnvValue(pending.get(key)!)}`);
      pending.delete(key);
      continue;
    }
    kept.push(line);
  }
  for (const [key, value] of pending) kept.push(`${key}=${formatDotEnvValue(value)}`);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${kept.join('\n')}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}
