import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { runTestCommand } from '../../src/pipeline/test-command.ts';
import { EnvCache, envKey, keptEnvFiles, type EnvBuilder, type KeepOutcome } from '../../src/sandbox/env-cache/index.ts';
import { LABEL_ENV_OWNER } from '../../src/sandbox/env-cache/image.ts';
import { Sandbox } from '../../src/sandbox/sandbox.ts';
import { TEST_IMAGE, TEST_WORKDIR } from './sandbox-harness.ts';

export const uniq = (p: string) => `${p}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(16).slice(2, 6)}`;

/** A kept-environment owner no other test or installation uses (owners are lower-case). */
export const testOwner = (p: string) => uniq(p).toLowerCase();

export function newCache(docker: Docker, owner: string, maxBytes = 1e9): { cache: EnvCache; dataDir: string } {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-envcache-'));
  return { cache: new EnvCache({ docker, owner, dataDir, maxBytes }), dataDir };
}

export function startSandbox(docker: Docker, image: string, labels: Record<string, string> = {}, network = 'none'): Promise<Sandbox> {
  return Sandbox.create(docker, { image, workdir: TEST_WORKDIR, memoryMb: 512, cpus: 1, pids: 256, network, runId: uniq('envcache'), workerId: os.hostname(), labels });
}

export async function keyFor(repoDir: string, setup: string[], repoId: string, imageId: string): Promise<string> {
  return envKey({ imageId, setup, repoId, workdir: TEST_WORKDIR, user: undefined, files: await keptEnvFiles(repoDir, { setup }) });
}

/**
 * What the spine does on a miss, in the same order: copy in, setup commands (each must pass),
 * kill what they left, cut the network, keep; a failing command keeps nothing. The sandbox is
 * returned alive for the test to inspect, or null when setup failed.
 */
export async function setupAndKeep(
  docker: Docker,
  opts: { builder: EnvBuilder; repoDir: string; setup: string[]; baseImageId: string; image?: string; env?: Record<string, string>; labels?: Record<string, string> },
): Promise<{ sandbox: Sandbox; outcome: KeepOutcome | null }> {
  const sandbox = await startSandbox(docker, opts.image ?? TEST_IMAGE, opts.labels);
  try {
    await sandbox.copyIn(opts.repoDir);
    await sandbox.takeOver();
    const started = Date.now();
    for (const command of opts.setup) {
      const res = await runTestCommand(sandbox, command, 120, { env: opts.env ?? {}, what: `setup \`${command}\`` });
      if (res.outcome !== 'passed') return { sandbox, outcome: null };
    }
    await sandbox.takeOver();
    await sandbox.cutNetwork();
    const outcome = await opts.builder.keep(sandbox.container, { baseImageId: opts.baseImageId, setupSeconds: (Date.now() - started) / 1000 });
    return { sandbox, outcome };
  } finally {
    opts.builder.release();
  }
}

export async function sh(sandbox: Sandbox, script: string): Promise<string> {
  const res = await sandbox.exec(['/bin/bash', '-c', script], { cwd: TEST_WORKDIR });
  if (res.exitCode !== 0) throw new Error(`\`${script}\` failed in the sandbox: ${res.stderr.toString()}`);
  return res.stdout.toString('utf8');
}

export function commitAll(repoDir: string, files: Record<string, string | null>, message: string): string {
  for (const [rel, content] of Object.entries(files)) {
    const full = path.join(repoDir, rel);
    if (content === null) rmSync(full, { force: true });
    else writeFileSync(full, content);
  }
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@localhost', ...args], { cwd: repoDir, stdio: 'pipe' }).toString().trim();
  git('add', '-A');
  git('commit', '-qm', message);
  return git('rev-parse', 'HEAD');
}

/** Removes every image a test owner kept (and any leftover of a keep). */
export async function removeOwnerImages(docker: Docker, owner: string): Promise<void> {
  const images = await docker.listImages({ all: true, filters: { label: [`${LABEL_ENV_OWNER}=${owner}`] } });
  for (const img of images) await docker.getImage(img.Id).remove({ force: true }).catch(() => undefined);
}
