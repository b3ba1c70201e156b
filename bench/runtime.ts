// The cost of a sandbox runtime (LILYPAD_SANDBOX_RUNTIME), side by side: runc (the engine's
// default) and runsc (gVisor, where the engine has it; scripts/setup-runsc.sh registers it).
// Per runtime: sandbox start (create, start, toolbox hello), tool-call overhead (Read of a small
// file, Bash `true`; median and p95 in ms), and a small test run (the calc fixture's unittest
// through the toolbox, after copyIn; the fixture carries a bug, so exit 1 is its normal outcome). Run with `npx tsx bench/runtime.ts`; BENCH_ITERATIONS
// (default 60) and BENCH_RUNTIMES (default "runc,runsc") change what is measured.
import os from 'node:os';
import { rmSync } from 'node:fs';
import Docker from 'dockerode';
import { checkSandboxRuntime, engineRuntimes } from '../src/sandbox/runtime.ts';
import { Sandbox } from '../src/sandbox/sandbox.ts';
import { CALC_REPO, makeRepo } from '../test/support/fixture-repo.ts';

const N = Number(process.env['BENCH_ITERATIONS'] ?? 60);
const image = process.env['LILYPAD_SANDBOX_IMAGE'] ?? 'lilypad-sandbox:latest';
const wanted = (process.env['BENCH_RUNTIMES'] ?? 'runc,runsc').split(',').map((r) => r.trim()).filter(Boolean);

function stats(samples: number[]): { median: number; p95: number } {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { median: at(0.5), p95: at(0.95) };
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t = process.hrtime.bigint();
  const value = await fn();
  return [value, Number(process.hrtime.bigint() - t) / 1e6];
}

async function measure(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < Math.min(5, n); i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await timed(fn))[1]);
  return out;
}

interface Row {
  runtime: string;
  startMs: number;
  read: { median: number; p95: number };
  bashTrue: { median: number; p95: number };
  testRunMs: number;
  testOutcome: string;
}

async function benchOne(runtime: string): Promise<Row> {
  const docker = new Docker();
  await checkSandboxRuntime(docker, { LILYPAD_SANDBOX_RUNTIME: runtime });
  const repo = makeRepo(CALC_REPO);
  const opts = { image, workdir: '/testbed', memoryMb: 1024, cpus: 1, pids: 256, network: 'none', runId: `bench-runtime-${runtime}-${process.pid}`, workerId: os.hostname() };
  const [sandbox, startMs] = await timed(() => Sandbox.create(docker, opts));
  try {
    await sandbox.copyIn(repo);
    const read = await measure(N, () => sandbox.tool('Read', JSON.stringify({ file_path: 'calc.py' }), 60));
    const bashTrue = await measure(N, () => sandbox.tool('Bash', JSON.stringify({ command: 'true' }), 60));
    const [res, testRunMs] = await timed(() => sandbox.exec(['/bin/bash', '-lc', 'python3 -m unittest -q 2>&1'], { cwd: '/testbed', timeoutSeconds: 120 }));
    return { runtime, startMs, read: stats(read), bashTrue: stats(bashTrue), testRunMs, testOutcome: `exit ${res.exitCode}` };
  } finally {
    await sandbox.destroy();
    rmSync(repo, { recursive: true, force: true });
  }
}

const available = (await engineRuntimes(new Docker())).available;
const rows: Row[] = [];
for (const runtime of wanted) {
  if (!available.includes(runtime)) {
    console.log(`${runtime}: not registered with the engine (it has ${available.join(', ')}); skipped`);
    continue;
  }
  rows.push(await benchOne(runtime));
}
const f = (n: number) => n.toFixed(1).padStart(8);
console.log(`\nruntime  | sandbox start ms | Read median / p95 ms | Bash true median / p95 ms | unittest run ms (calc) | N=${N}`);
for (const r of rows) {
  console.log(`${r.runtime.padEnd(8)} | ${f(r.startMs)}         | ${f(r.read.median)} / ${f(r.read.p95)} | ${f(r.bashTrue.median)} / ${f(r.bashTrue.p95)}      | ${f(r.testRunMs)} (${r.testOutcome})`);
}
