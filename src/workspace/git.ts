import { execFile } from 'node:child_process';

export class GitError extends Error {
  override name = 'GitError';
}

// Host git never honours repository-controlled hooks, fsmonitor or pagers.
const SAFE = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'core.pager=cat', '-c', 'protocol.file.allow=always'];

/** Runs host git with hardening flags; rejects with the command's stderr on failure. */
export function git(args: string[], opts: { cwd?: string; input?: Buffer | string; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      [...SAFE, ...args],
      { cwd: opts.cwd, env: { ...process.env, GIT_TERMINAL_PROMPT: '0', ...opts.env }, maxBuffer: 256 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err) reject(new GitError(`git ${args.join(' ')} failed: ${(stderr || err.message).trim()}`));
        else resolve(stdout);
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}
