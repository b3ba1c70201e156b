// Harness overhead of one tool call through the real sandbox, next to a `docker exec` per call.
// Prints median and p95 in milliseconds. Run with `npm run bench` (needs the Docker engine and the
// sandbox image). Targets: file tools <= 3 ms median, Bash `true` <= 10 ms median.
import { execFile } from 'node:child_process';
import os from 'node:os';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { createDockerClient, Sandbox } from '../src/sandbox/sandbox.ts';

const run = promisify(execFile);
const N = Number(process.env['BENCH_ITERATIONS'] ?? 200);
const N_EXEC = Number(process.env['BENCH_EXEC_ITERATIONS'] ?? 40);
const image = process.env['LILYPAD_SANDBOX_IMAGE'] ?? 'lilypad-sandbox:latest';

function stats(samples: number[]): { median: number; p95: number } {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { median: at(0.5), p95: at(0.95) };
}

async function measure(n: number, fn: (i: number) => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < Math.min(10, n); i++) await fn(i); // warm-up
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await fn(i);
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return out;
}

async function dockerApiExec(docker: Docker, id: string, cmd: string[]): Promise<void> {
  const exec = await docker.getContainer(id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.resume();
  });
}

async function main(): Promise<void> {
  const docker = createDockerClient();
  const sandbox = await Sandbox.create(docker, {
    image,
    workdir: '/testbed',
    memoryMb: 1024,
    cpus: 2,
    pids: 256,
    network: 'none',
    runId: `bench-${process.pid}-${Date.now()}`,
    workerId: os.hostname(),
  });
  try {
    await sandbox.exec(['/bin/bash', '-c', 'mkdir -p src && for i in $(seq 1 40); do printf "line %s\\n" $(seq 1 50) > src/m$i.py; done; printf "alpha = 1\\nbeta = 2\\n" > small.py']);
    const rows: Array<[string, number[]]> = [];
    const tool = (name: string, args: object) => sandbox.tool(name, JSON.stringify(args), 1800);
    rows.push(['Read small file (lilypad)', await measure(N, () => tool('Read', { file_path: 'small.py' }))]);
    rows.push([
      'Edit (lilypad)',
      await measure(N, (i) =>
        tool('Edit', i % 2 === 0 ? { file_path: 'small.py', old_string: 'alpha = 1', new_string: 'alpha = 2' } : { file_path: 'small.py', old_string: 'alpha = 2', new_string: 'alpha = 1' }),
      ),
    ]);
    rows.push(['Glob **/*.py, 41 files (lilypad)', await measure(N, () => tool('Glob', { pattern: '**/*.py' }))]);
    rows.push(['Bash `true` (lilypad)', await measure(N, () => tool('Bash', { command: 'true' }))]);
    rows.push(['docker exec via Engine API: cat small.py', await measure(N_EXEC, () => dockerApiExec(docker, sandbox.id, ['cat', '/testbed/small.py']))]);
    rows.push(['docker exec via Engine API: bash -lc true', await measure(N_EXEC, () => dockerApiExec(docker, sandbox.id, ['bash', '-lc', 'true']))]);
    rows.push(['docker exec via CLI: bash -lc true', await measure(Math.min(N_EXEC, 20), () => run('docker', ['exec', sandbox.id, 'bash', '-lc', 'true']))]);

    const width = Math.max(...rows.map(([name]) => name.length));
    console.log(`tool-call harness overhead (${N} calls each, ${N_EXEC} for docker exec; ms)`);
    console.log(`${'operation'.padEnd(width)}  ${'median'.padStart(8)}  ${'p95'.padStart(8)}`);
    for (const [name, samples] of rows) {
      const { median, p95 } = stats(samples);
      console.log(`${name.padEnd(width)}  ${median.toFixed(2).padStart(8)}  ${p95.toFixed(2).padStart(8)}`);
    }
    const med = (i: number) => stats(rows[i]![1]).median;
    const fileOk = [0, 1, 2].every((i) => med(i) <= 3);
    const bashOk = med(3) <= 10;
    console.log(`targets: file tools <= 3 ms median: ${fileOk ? 'met' : 'MISSED'}; Bash true <= 10 ms median: ${bashOk ? 'met' : 'MISSED'}`);
  } finally {
    await sandbox.destroy();
  }
}

await main();
