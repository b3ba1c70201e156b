// `lilypad eval run` on 20 instances with --workers 4 and with --workers 1; prints both wall times
// and their ratio. Real Docker, real git, the scripted model server over HTTP (each model call
// answered after BENCH_MODEL_DELAY_MS, default 300, standing in for generation time).
// Run: npx tsx bench/eval-workers.ts   (BENCH_EVAL_INSTANCES, BENCH_EVAL_WORKERS to change the sizes)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startModelServer, type ScriptedReply } from '../test/support/model-server.ts';
import { calcInstance, makeFixture, scriptFor, writeInstances } from '../test/fixtures/eval/instances.ts';

const N = Number(process.env['BENCH_EVAL_INSTANCES'] ?? 20);
const WORKERS = Number(process.env['BENCH_EVAL_WORKERS'] ?? 4);
const DELAY = Number(process.env['BENCH_MODEL_DELAY_MS'] ?? 300);
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

async function runOnce(file: string, url: string, workers: number): Promise<number> {
  const out = mkdtempSync(path.join(os.tmpdir(), `lilypad-bench-eval-w${workers}-`));
  const started = process.hrtime.bigint();
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'eval', 'run', '--instances', file, '--endpoint', `bench=${url}`, '--workers', String(workers), '--out', path.join(out, 'o')], {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child.on('close', resolve);
  });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  rmSync(out, { recursive: true, force: true });
  if (code !== 0) throw new Error(`lilypad eval run --workers ${workers} exited ${code}`);
  return seconds;
}

async function main(): Promise<void> {
  const f = makeFixture();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-bench-eval-'));
  const ids = Array.from({ length: N }, (_, i) => `bench-${i + 1}`);
  const file = writeInstances(dir, ids.map((id) => calcInstance(f, id)));
  const script = scriptFor(Object.fromEntries(ids.map((id) => [id, 'resolve'])));
  const server = await startModelServer({ script: (req) => ({ ...(script(req) as object), delayMs: DELAY }) as ScriptedReply });
  try {
    const parallel = await runOnce(file, server.url, WORKERS);
    const serial = await runOnce(file, server.url, 1);
    console.log(`lilypad eval run, ${N} instances (model calls ${DELAY} ms each), on ${os.cpus().length} cores:`);
    console.log(`  --workers ${WORKERS}: ${parallel.toFixed(1)} s`);
    console.log(`  --workers 1: ${serial.toFixed(1)} s`);
    console.log(`  ratio (workers ${WORKERS} / workers 1): ${(parallel / serial).toFixed(2)}  (speed-up ${(serial / parallel).toFixed(2)}x)`);
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
