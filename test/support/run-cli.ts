/** `lilypad run` started as a user would, with a clean environment, for the CLI's end-to-end tests. */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  runId: string;
}

export function startCli(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'run', ...args], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), LILYPAD_MODEL_RETRY_BASE_MS: '5', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let runId = '';
  const idSeen: Array<(id: string) => void> = [];
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    const m = /lilypad run (run-\S+):/.exec(stderr);
    if (m && !runId) {
      runId = m[1]!;
      for (const f of idSeen) f(runId);
    }
  });
  const done = new Promise<CliRun>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr, runId })));
  const runIdPromise = new Promise<string>((resolve) => (runId ? resolve(runId) : idSeen.push(resolve)));
  return { child, done, runIdPromise };
}

export const runCli = (args: string[], env: Record<string, string> = {}): Promise<CliRun> => startCli(args, env).done;
