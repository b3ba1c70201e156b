import os from 'node:os';
import type Docker from 'dockerode';
import { dockerForSandboxes } from '../../src/sandbox/runtime.ts';
import { execOnce } from '../../src/sandbox/exec-once.ts';
import { Sandbox, type ExecResult } from '../../src/sandbox/sandbox.ts';

export const TEST_IMAGE = process.env['LILYPAD_SANDBOX_IMAGE'] ?? 'lilypad-sandbox:latest';
export const TEST_WORKDIR = '/testbed';
/** LILYPAD_SANDBOX_RUNTIME for the suites (e.g. runsc); unset: the engine's default. */
export const TEST_RUNTIME = process.env['LILYPAD_SANDBOX_RUNTIME']?.trim() || undefined;

/**
 * A Docker client with LILYPAD_SANDBOX_RUNTIME checked and bound, exactly as a command gets it:
 * every sandbox a suite creates through it runs under that runtime.
 */
export function testDocker(): Promise<Docker> {
  return dockerForSandboxes(process.env);
}

export type FileSpec = string | Buffer | { symlink: string } | { dir: true };

export interface Toolbox {
  sandbox: Sandbox;
  /** Runs one tool call exactly as the agent loop does; `args` objects are JSON-encoded. */
  call(name: string, args: string | Record<string, unknown>, bashCapSeconds?: number): Promise<string>;
  /** Runs a shell command (bash -c) as Lilypad, not as the model. */
  sh(command: string): Promise<ExecResult & { out: string }>;
  /** Empties the repository directory and writes these files (paths relative to it). */
  reset(files?: Record<string, FileSpec>): Promise<void>;
  /** Raw bytes of a file inside the container. */
  readBytes(relPath: string): Promise<Buffer>;
  close(): Promise<void>;
}

/** A real hardened sandbox (real Docker engine) for tool and loop tests. */
export async function openToolbox(opts: { runId?: string } = {}): Promise<Toolbox> {
  const docker = await testDocker();
  const sandbox = await Sandbox.create(docker, {
    image: TEST_IMAGE,
    workdir: TEST_WORKDIR,
    memoryMb: 1024,
    cpus: 1,
    pids: 256,
    network: 'none',
    runId: opts.runId ?? `test-${process.pid}-${Date.now()}-${Math.random().toString(16).slice(2, 6)}`,
    workerId: os.hostname(),
  });
  const sh = async (command: string) => {
    const res = await sandbox.exec(['/bin/bash', '-c', command], { cwd: '/' });
    return { ...res, out: res.stdout.toString('utf8') };
  };
  const writeFile = async (rel: string, spec: FileSpec) => {
    const target = `${TEST_WORKDIR}/${rel}`;
    const dir = target.slice(0, target.lastIndexOf('/'));
    let script: string;
    if (typeof spec === 'object' && !Buffer.isBuffer(spec) && 'symlink' in spec) {
      script = `mkdir -p "$1" && ln -s "$3" "$2"`;
      await check(sandbox.exec(['/bin/bash', '-c', script, 'w', dir, target, spec.symlink], { cwd: '/' }), rel);
      return;
    }
    if (typeof spec === 'object' && !Buffer.isBuffer(spec) && 'dir' in spec) {
      await check(sandbox.exec(['mkdir', '-p', target], { cwd: '/' }), rel);
      return;
    }
    const b64 = Buffer.from(spec).toString('base64');
    script = `mkdir -p "$1" && printf %s "$3" | base64 -d > "$2"`;
    await check(sandbox.exec(['/bin/bash', '-c', script, 'w', dir, target, b64], { cwd: '/' }), rel);
  };
  return {
    sandbox,
    async call(name, args, bashCapSeconds = 1800) {
      const raw = typeof args === 'string' ? args : JSON.stringify(args);
      return (await sandbox.tool(name, raw, bashCapSeconds)).observation;
    },
    sh,
    async reset(files = {}) {
      await check(sandbox.exec(['/bin/bash', '-c', `find ${TEST_WORKDIR} -mindepth 1 -delete`], { cwd: '/' }), 'reset');
      for (const [rel, spec] of Object.entries(files)) await writeFile(rel, spec);
    },
    async readBytes(relPath) {
      const res = await sandbox.exec(['cat', `${TEST_WORKDIR}/${relPath}`], { cwd: '/' });
      if (res.exitCode !== 0) throw new Error(`cannot read ${relPath}: ${res.stderr.toString()}`);
      return res.stdout;
    },
    close: () => sandbox.destroy(),
  };
}

async function check(p: Promise<ExecResult>, what: string): Promise<void> {
  const res = await p;
  if (res.exitCode !== 0) throw new Error(`sandbox harness failed on ${what}: ${res.stderr.toString()}`);
}

/**
 * Sends Lilypad's toolbox in `sandbox` a signal from outside the agent's reach: a root exec in the
 * container, which may signal the toolbox (same real uid) where the agent's processes may not.
 * It stands for what the agent can no longer do itself (the out-of-memory killer, the engine losing
 * the exec), so the host's deadlines and recovery stay tested. Returns pkill's exit code (0: found).
 */
export async function signalToolbox(sandbox: Sandbox, signal: 'STOP' | 'KILL'): Promise<number | null> {
  const res = await execOnce(sandbox.container, {
    // The bracket keeps this command's own command line from matching.
    argv: ['pkill', `-${signal}`, '-f', 'lilypad-toolbo[x]'],
    user: '0:0',
    timeoutMs: 30_000,
    maxBytes: 4096,
  });
  return res.exitCode;
}
