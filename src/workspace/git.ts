import { spawn } from 'node:child_process';
import { CancelledError, reasonText } from '../shared/cancel.ts';

export class GitError extends Error {
  override name = 'GitError';
}

/**
 * Flags on every host git command. Host git works on repository content strangers wrote, so nothing
 * from the repository or the operator's own git setup may run a program:
 * - hooks, fsmonitor and pagers are off;
 * - filters and LFS are off: a `.gitattributes` in the repository can name any filter driver, and an
 *   LFS filter would run `git-lfs` (and download) on checkout and on apply. With the drivers emptied
 *   and `required=false`, files are taken byte for byte (LFS files stay pointer files);
 * - `core.attributesFile` is /dev/null: the default per-user attributes file
 *   (~/.config/git/attributes) is read even when the global config is not;
 * - slow transfers end: a server that stops sending (or sends a byte a minute) cannot hold a job.
 *   Curl aborts when fewer than LOW_SPEED_BYTES per second arrive for LOW_SPEED_SECONDS.
 */
const LOW_SPEED_BYTES = 1024;
const LOW_SPEED_SECONDS = 60;

const NO_PROGRAMS = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'core.pager=cat'];
const NO_FILTERS = [
  '-c',
  'filter.lfs.required=false',
  '-c',
  'filter.lfs.smudge=',
  '-c',
  'filter.lfs.clean=',
  '-c',
  'filter.lfs.process=',
  '-c',
  'core.attributesFile=/dev/null',
];

/** Long enough for a first clone of a large repository; a stalled transfer ends sooner (low speed). */
const DEFAULT_GIT_TIMEOUT_MS = 15 * 60 * 1000;
const MAX_OUTPUT_BYTES = 256 * 1024 * 1024;

// Inherited variables that change which repository, config or programs git uses. The process's own
// environment is the operator's: GIT_DIR from an outer git hook, GIT_CONFIG_COUNT/_PARAMETERS
// defining a filter, GIT_SSH_COMMAND... none of it applies to strangers' repositories. Only the
// CA settings an operator may need to reach a GitHub Enterprise with a private CA pass through.
const INHERITED_GIT_VARS = new Set(['GIT_SSL_CAINFO', 'GIT_SSL_CAPATH']);

/** The environment of every host git command: the process's, minus git's own, plus isolation. */
function hostGitEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith('GIT_') || INHERITED_GIT_VARS.has(key)) env[key] = value;
  }
  return {
    ...env,
    // The operator's /etc/gitconfig and ~/.gitconfig (credential helpers, LFS, filters, url
    // rewrites, includeIf) never apply.
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    ...extra,
  };
}

interface GitOptions {
  cwd?: string;
  input?: Buffer | string;
  /** Added to the isolated environment (for example the auth header from gitAuthEnv). */
  env?: NodeJS.ProcessEnv;
  /** The process (and everything it started) is killed after this long. */
  timeoutMs?: number;
  /** Overrides the low-speed limit (tests use a short time). */
  lowSpeed?: { bytesPerSecond: number; seconds: number };
  /** A cancel kills git (and its remote helpers) at once; the call rejects with a CancelledError. */
  signal?: AbortSignal | undefined;
}

interface GitResult {
  code: number;
  stdout: string;
  /** stdout as bytes (a binary diff). */
  stdoutBytes: Buffer;
  stderr: string;
}

function commonArgs(opts: GitOptions): string[] {
  const speed = opts.lowSpeed ?? { bytesPerSecond: LOW_SPEED_BYTES, seconds: LOW_SPEED_SECONDS };
  return [...NO_PROGRAMS, ...NO_FILTERS, '-c', `http.lowSpeedLimit=${speed.bytesPerSecond}`, '-c', `http.lowSpeedTime=${speed.seconds}`];
}

/**
 * Runs host git and resolves with its exit code and output, whatever the code. Rejects with a
 * GitError only when git could not run or ran out of time.
 */
export function gitRun(args: string[], opts: GitOptions = {}): Promise<GitResult> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_GIT_TIMEOUT_MS;
  const signal = opts.signal;
  if (signal?.aborted) return Promise.reject(new CancelledError(reasonText(signal.reason)));
  return new Promise<GitResult>((resolve, reject) => {
    // Its own process group, so that a timeout also kills the remote helpers git started.
    const child = spawn('git', [...commonArgs(opts), ...args], { cwd: opts.cwd, env: hostGitEnv(opts.env), detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let outBytes = 0;
    let failure: Error | undefined;
    const kill = (why: Error) => {
      failure ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    };
    const timer = setTimeout(() => kill(new GitError(`git ${describeArgs(args)} timed out after ${Math.round(timeoutMs / 1000)} s and was killed`)), timeoutMs);
    const onAbort = () => kill(new CancelledError(reasonText(signal?.reason)));
    signal?.addEventListener('abort', onAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    child.stdout.on('data', (d: Buffer) => {
      outBytes += d.length;
      if (outBytes > MAX_OUTPUT_BYTES) kill(new GitError(`git ${describeArgs(args)} printed more than ${MAX_OUTPUT_BYTES} bytes; stopped`));
      else stdout.push(d);
    });
    child.stderr.on('data', (d: Buffer) => {
      if (stderr.reduce((n, b) => n + b.length, 0) < 1024 * 1024) stderr.push(d);
    });
    child.on('error', (err) => {
      done();
      reject(new GitError(`could not run git ${describeArgs(args)}: ${err.message}`));
    });
    child.on('close', (code) => {
      done();
      if (failure) reject(failure);
      else {
        const bytes = Buffer.concat(stdout);
        resolve({ code: code ?? 1, stdout: bytes.toString('utf8'), stdoutBytes: bytes, stderr: Buffer.concat(stderr).toString('utf8') });
      }
    });
    // A git that exits before reading its input must not crash the process with EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

/** Runs host git with isolation and a timeout; resolves with stdout, rejects with stderr on failure. */
export async function git(args: string[], opts: GitOptions = {}): Promise<string> {
  const res = await gitRun(args, opts);
  if (res.code !== 0) throw new GitError(`git ${describeArgs(args)} failed: ${(res.stderr || `exit code ${res.code}`).trim()}`);
  return res.stdout;
}

// Error messages name the command, not its configuration values (an auth header is passed through
// the environment, never argv, but keep messages short either way).
function describeArgs(args: string[]): string {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '-c') {
      i++;
      continue;
    }
    out.push(args[i]!);
  }
  return out.join(' ').slice(0, 300);
}
