/**
 * `lilypad run` on a repository nobody configured, the way the zero-config end-to-end tests and
 * the first-request bench drive it: the real CLI, the scripted model, setup's network through the
 * egress proxy to the test npm registry only (LILYPAD_SETUP_EGRESS=lilypad.test, the registry's
 * name pinned with LILYPAD_SETUP_EGRESS_HOSTS), and kept environments under a data folder of the
 * caller's own, so that they can be counted and removed afterwards.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { LABEL_RUN } from '../../src/sandbox/sandbox.ts';
import { runCli, type CliRun } from './run-cli.ts';
import { startModelServer, type ModelServer, type ScriptedReply } from './model-server.ts';
import type { NpmRegistry } from './npm-registry.ts';

export interface ZeroConfigRun {
  run: CliRun;
  /** result.json, as written. */
  result: ZeroConfigResult;
  patch: string;
  model: ModelServer;
  out: string;
}

/** The parts of result.json these tests read. */
export interface ZeroConfigResult {
  outcome: string;
  exit_reason: string;
  config: { file: string | null; sources: Record<string, string> } | null;
  setup: {
    planned: string[];
    commands: Array<{ command: string; outcome: string; exitCode: number | null; outputTail: string }>;
    source: string;
    inferred_from: string[];
    network: string;
    failed: string | null;
    env_cache: { result: string; key?: string; image?: string; stored?: boolean; note?: string; age_seconds?: number; setup_seconds_saved?: number } | null;
  } | null;
  tests: {
    command: string;
    source: string;
    inferred_from: string[];
    runner: string | null;
    before: { outcome: string; exitCode: number | null; outputTail: string; counts: Record<string, number> | null } | null;
    after: { outcome: string; exitCode: number | null; outputTail: string; counts: Record<string, number> | null } | null;
    fixed: string[];
    broken: string[];
    still_failing: string[];
    per_test_fallback: string | null;
    after_not_run: string | null;
    cache: { carried: boolean; dir: string | null; why?: string } | null;
  } | null;
  evidence: { verdict: string | null; reproduction: string[]; fixed: string[]; broken: string[]; change_tests: { files: string[]; command: string } } | null;
  durations_ms: Record<string, number>;
  patch: { files: string[] };
}

export class ZeroConfigRunner {
  readonly dataDir: string;
  private readonly hostsFile: string;
  private readonly models: ModelServer[] = [];
  /** Every kept environment a run reported, to remove afterwards. */
  readonly keptImages = new Set<string>();

  constructor(private readonly registry: NpmRegistry) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-zero-config-'));
    this.dataDir = path.join(dir, 'data');
    this.hostsFile = path.join(dir, 'egress-hosts');
    writeFileSync(this.hostsFile, `# the test registry, pinned as an administrator pins an internal one\n${registry.hostsLine}\n`);
  }

  /** The settings every run gets: setup may reach the test registry and nothing else. */
  env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      LILYPAD_SETUP_EGRESS: 'lilypad.test',
      LILYPAD_SETUP_EGRESS_PRIVATE: `${this.registry.ip}/32`,
      LILYPAD_SETUP_EGRESS_HOSTS: this.hostsFile,
      LILYPAD_DATA_DIR: this.dataDir,
      ...extra,
    };
  }

  async run(repo: string, issue: { title: string; body: string }, script: ScriptedReply[], extraEnv: Record<string, string> = {}): Promise<ZeroConfigRun> {
    const model = await startModelServer({ script });
    this.models.push(model);
    const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-zero-config-out-'));
    const run = await runCli(['--repo', repo, '--title', issue.title, '--body', issue.body, '--out', out, '--base-url', model.url], this.env(extraEnv));
    const result = JSON.parse(readFileSync(path.join(out, 'result.json'), 'utf8')) as ZeroConfigResult;
    const image = result.setup?.env_cache?.image;
    if (image) this.keptImages.add(image);
    return { run, result, patch: readFileSync(path.join(out, 'patch.diff'), 'utf8'), model, out };
  }

  /** Removes the kept environments these runs made (never another's: only the ones they reported). */
  async close(docker: Docker): Promise<void> {
    for (const m of this.models) await m.close();
    for (const image of this.keptImages) await docker.getImage(image).remove({ force: true }).catch(() => undefined);
  }
}

/** Containers and networks a run left behind (the sandboxes, the proxy and its setup network). */
export async function leftBehind(docker: Docker, runId: string): Promise<number> {
  let count = 0;
  // The baseline beside the agent runs in a sandbox of its own, under `<run id>-baseline`.
  for (const id of [runId, `${runId}-baseline`]) {
    const filters = { label: [`${LABEL_RUN}=${id}`] };
    count += (await docker.listContainers({ all: true, filters })).length + (await docker.listNetworks({ filters })).length;
  }
  return count;
}
