// Label → first model request (issue 16, #5): how long `lilypad run` on a real project nobody
// configured takes from its start to the model server's first chat request, with and without a
// kept environment. Setup and tests are inferred (no --setup, no --test); the scripted model
// answers at once without changing anything. Three ways:
//   off   LILYPAD_ENV_CACHE_GB=0: setup, then the tests on the untouched code, then the agent;
//   cold  no kept environment yet: setup, keeping its environment, then the agent, with the
//         baseline beside it (in a sandbox of its own, from the environment just kept);
//   warm  the environment kept by the cold run: no setup, the baseline beside the agent.
// Then two runs where the model changes one file (a comment added to a package nothing else in the
// project imports: cmp/cmpopts/xform.go in go-cmp), with keeping off and warm, to show what the tests
// after a change cost: with keeping off they reuse Go's cache in the agent's own sandbox; warm, the
// cache is carried from the baseline's sandbox (result.json's tests.cache).
// Target (issue 16): warm under 3 s. "CLI up" is when `lilypad run` prints its first line (Node and
// the TypeScript loader started, settings read): the app's worker has that behind it when a label
// arrives, so the time after it is printed too. Run: `npx tsx bench/first-request.ts`.
//   BENCH_REPO        a git checkout of a real project (default /work/real/go-cmp, a checkout of a
//                     public Go module; copied to a temporary folder, never modified); without
//                     one, the Go fixture test/fixtures/zero-config/go stands in, and the table says so
//   BENCH_WARM_RUNS   warm runs, the median is shown (default 3)
// Setup's egress allows only a name that exists nowhere (lilypad.test): the bench sends nothing
// off this machine; a project whose setup must download fails its setup, which is reported.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { testDocker } from '../test/support/sandbox-harness.ts';
import { makeRepo } from '../test/support/fixture-repo.ts';
import { startModelServer, type ScriptedReply } from '../test/support/model-server.ts';
import { startCli } from '../test/support/run-cli.ts';
import { fixtureFiles } from '../test/support/zero-config-fixtures.ts';

const WARM_RUNS = Number(process.env['BENCH_WARM_RUNS'] ?? 3);
const realRepo = process.env['BENCH_REPO'] ?? '/work/real/go-cmp';

interface Sample {
  /** From starting `lilypad run` to its first line (the CLI loaded, settings read). */
  cliMs: number;
  /** From starting `lilypad run` to the model server's first chat request. */
  firstRequestMs: number;
  setupMs: number | null;
  baselineMs: number | null;
  afterMs: number | null;
  /** How the test runner's cache came to the agent's sandbox (result.json's tests.cache), or '–'. */
  cache: string;
  totalMs: number;
  envCache: string;
  setupOutcome: string;
  testsBefore: string;
  keptImage: string | undefined;
  savedSeconds: number | undefined;
}

function checkout(): { repo: string; what: string } {
  if (existsSync(path.join(realRepo, '.git'))) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-bench-repo-'));
    cpSync(realRepo, dir, { recursive: true });
    const head = execFileSync('git', ['log', '-1', '--format=%h %s'], { cwd: dir, encoding: 'utf8' }).trim();
    return { repo: dir, what: `${path.basename(realRepo)} (${head})` };
  }
  return { repo: makeRepo(fixtureFiles('go')), what: `the Go fixture (no checkout at ${realRepo}; set BENCH_REPO)` };
}

const NO_CHANGE: ScriptedReply[] = [{ content: 'Nothing to change here.' }];
/** The model appends a comment to `file`: a real change, which changes no test's result. */
const changeIn = (file: string): ScriptedReply[] => [
  { toolCalls: [{ name: 'Bash', arguments: { command: `printf '\\n// A comment the bench adds.\\n' >> ${file}` } }] },
  { content: 'Added a comment.' },
];

async function once(repo: string, dataDir: string, env: Record<string, string>, script: ScriptedReply[] = NO_CHANGE): Promise<Sample> {
  const model = await startModelServer({ script });
  const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-bench-out-'));
  try {
    const started = Date.now();
    let cliAt = 0;
    const cli = startCli(['--repo', repo, '--title', 'Look at the comparison options', '--out', out, '--base-url', model.url], {
      LILYPAD_DATA_DIR: dataDir,
      LILYPAD_SETUP_EGRESS: 'lilypad.test',
      ...env,
    });
    void cli.runIdPromise.then(() => (cliAt = Date.now()));
    const run = await cli.done;
    if (run.code !== 0) throw new Error(`lilypad run failed (exit ${run.code}):\n${run.stdout}\n${run.stderr.slice(-2000)}`);
    const chat = model.requests.find((r) => r.path.startsWith('/v1/chat/completions'));
    if (!chat) throw new Error('the model server got no chat request');
    const result = JSON.parse(readFileSync(path.join(out, 'result.json'), 'utf8')) as {
      durations_ms: Record<string, number>;
      setup: { failed: string | null; commands: unknown[]; env_cache: { result: string; image?: string; setup_seconds_saved?: number } | null } | null;
      tests: {
        before: { outcome: string; counts: Record<string, number> | null } | null;
        after_not_run: string | null;
        cache: { carried: true; bytes: number; files: number; read_ms: number; write_ms: number } | { carried: false; why: string } | null;
      } | null;
    };
    const cache = result.tests?.cache;
    const before = result.tests?.before;
    return {
      cliMs: cliAt - started,
      firstRequestMs: chat.receivedAt - started,
      setupMs: result.durations_ms['setup'] ?? null,
      baselineMs: result.durations_ms['tests_before'] ?? null,
      afterMs: result.durations_ms['tests_after'] ?? null,
      cache: !cache ? (result.tests?.after_not_run ? `tests after not run: ${result.tests.after_not_run}` : '–') : cache.carried ? `carried: ${(cache.bytes / 1e6).toFixed(1)} MB, ${cache.files} files; read ${s(cache.read_ms)} s beside the agent, written ${s(cache.write_ms)} s after it` : `not carried: ${cache.why}`,
      totalMs: result.durations_ms['total'] ?? 0,
      envCache: result.setup?.env_cache?.result ?? 'none',
      setupOutcome: !result.setup ? 'none inferred' : result.setup.commands.length === 0 ? 'skipped' : result.setup.failed ? `failed: ${result.setup.failed}` : 'passed',
      testsBefore: before ? `${before.outcome}${before.counts ? ` (${Object.entries(before.counts).map(([k, v]) => `${v} ${k}`).join(', ')})` : ''}` : 'not run',
      keptImage: result.setup?.env_cache?.image,
      savedSeconds: result.setup?.env_cache?.setup_seconds_saved,
    };
  } finally {
    await model.close();
  }
}

const s = (ms: number | null) => (ms === null ? '–' : (ms / 1000).toFixed(2));

function median(samples: Sample[]): Sample {
  const sorted = [...samples].sort((a, b) => a.firstRequestMs - b.firstRequestMs);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const docker = await testDocker();
  const { repo, what } = checkout();
  const cfg = execFileSync(process.execPath, [path.resolve(path.dirname(new URL(import.meta.url).pathname), '../bin/lilypad.js'), 'config', '--repo', repo], { encoding: 'utf8' });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-bench-data-'));
  const kept = new Set<string>();
  try {
    process.stdout.write(`label → first model request on ${what}, ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
    process.stdout.write(`${cfg.trim().split('\n').filter((l) => /^(setup|test)\s/.test(l.trim())).map((l) => `  ${l.trim()}`).join('\n')}\n`);
    const off = await once(repo, mkdtempSync(path.join(os.tmpdir(), 'lilypad-bench-off-')), { LILYPAD_ENV_CACHE_GB: '0' });
    const cold = await once(repo, dataDir, {});
    if (cold.keptImage) kept.add(cold.keptImage);
    const warms: Sample[] = [];
    for (let i = 0; i < WARM_RUNS; i++) {
      const w = await once(repo, dataDir, {});
      if (w.keptImage) kept.add(w.keptImage);
      warms.push(w);
    }
    const warm = median(warms);
    const file = existsSync(path.join(repo, 'cmp/cmpopts/xform.go')) ? 'cmp/cmpopts/xform.go' : 'wrap.go';
    const offChange = await once(repo, mkdtempSync(path.join(os.tmpdir(), 'lilypad-bench-off-')), { LILYPAD_ENV_CACHE_GB: '0' }, changeIn(file));
    const warmChange = await once(repo, dataDir, {}, changeIn(file));
    const rows: Array<[string, Sample]> = [
      ['off (LILYPAD_ENV_CACHE_GB=0)', off],
      ['cold (no kept environment)', cold],
      [`warm (kept; median of ${warms.length})`, warm],
      [`off, a change to ${file}`, offChange],
      [`warm, a change to ${file}`, warmChange],
    ];
    process.stdout.write('\n| run | env | setup | setup s | baseline s | CLI up s | first request s | of which after CLI up s | tests after s | total s | tests before | test cache |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n');
    for (const [name, r] of rows) {
      process.stdout.write(`| ${name} | ${r.envCache} | ${r.setupOutcome} | ${s(r.setupMs)} | ${s(r.baselineMs)} | ${s(r.cliMs)} | ${s(r.firstRequestMs)} | ${s(r.firstRequestMs - r.cliMs)} | ${s(r.afterMs)} | ${s(r.totalMs)} | ${r.testsBefore} | ${r.cache} |\n`);
    }
    const met = (ms: number) => (ms < 3000 ? 'met' : 'NOT met');
    process.stdout.write(`\nwarm first requests from start: ${warms.map((w) => s(w.firstRequestMs)).join(', ')} s (target under 3 s: ${met(warm.firstRequestMs)}); after the CLI is up: ${warms.map((w) => s(w.firstRequestMs - w.cliMs)).join(', ')} s (${met(warm.firstRequestMs - warm.cliMs)})\n`);
    const saved = warm.savedSeconds ?? (cold.setupMs ?? 0) / 1000;
    process.stdout.write(`setup time saved per warm run: ${saved.toFixed(2)} s of setup; first request ${s(cold.firstRequestMs - warm.firstRequestMs)} s sooner than cold, ${s(off.firstRequestMs - warm.firstRequestMs)} s sooner than with keeping off\n`);
  } finally {
    for (const image of kept) await docker.getImage(image).remove({ force: true }).catch(() => undefined);
  }
}

await main();
