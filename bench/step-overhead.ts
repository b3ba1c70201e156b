// The agent loop's own cost per step, seen from the model server: the time from the scripted server
// finishing one response (a single tool call) to it having received the next request whole. That gap holds all
// of Lilypad's work for a step: reading the response, the tool call in the sandbox, the trajectory,
// secret redaction, the run record, metrics, and building and sending the next request.
//
// The loop is the real one (runSandboxSession, as `lilypad run` and the app run it) with the app's
// trajectory tee into the run recorder (Redis at REDIS_URL, default 127.0.0.1:6379; without one the
// recorder is left out and the output says so). The model server runs in a child process so that
// its own work (parsing a growing request, building the answer) is not on the loop's event loop.
// Beside the steps: a `docker exec` per call on the same container, and the floor of the Bash
// tool, `bash -lc true` spawned N times by a Python loop as the toolbox spawns it (measured by a Bash
// call itself, first and last, so that user, environment and profile are the tool's own).
//
// Targets: Read / Edit / Glob step under 1.5 ms median; Bash `true` step under 1.3x the floor.
// Run with `npm run bench` or `tsx bench/step-overhead.ts` (needs Docker and the sandbox image).
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { subscribe } from 'node:diagnostics_channel';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';
import { Redis } from 'ioredis';
import type { CompletionOutcome, RetryRecord } from '../src/agent/model-client.ts';

type ToolName = 'Read' | 'Edit' | 'Glob' | 'Bash';
const TOOLS: readonly ToolName[] = ['Read', 'Edit', 'Glob', 'Bash'];
const ROUNDS = Number(process.env['BENCH_STEP_ROUNDS'] ?? 40);
const WARMUP_ROUNDS = Number(process.env['BENCH_STEP_WARMUP'] ?? 5);
const N_EXEC = Number(process.env['BENCH_EXEC_ITERATIONS'] ?? 30);
const N_FLOOR = Number(process.env['BENCH_FLOOR_ITERATIONS'] ?? 200);
const image = process.env['LILYPAD_SANDBOX_IMAGE'] ?? 'lilypad-sandbox:latest';

// A short reasoning text per turn, as the model writes one before every call.
const REASONING = 'Let me look at the code before changing anything. The helper module is small, so I read it, make a focused edit, check the file list and run a quick command.';

/**
 * The tool call of model turn `i` (0-based): the Bash floor measurement first and last, and in
 * between `steps` turns in rounds of Read, Edit, Glob, Bash (`measured` names the tool timed).
 */
function planned(i: number, steps: number): { name: ToolName; arguments: Record<string, unknown>; measured?: ToolName } {
  if (i === 0 || i === steps + 1) return { name: 'Bash', arguments: { command: FLOOR_COMMAND, timeout: 600 } };
  const round = Math.floor((i - 1) / TOOLS.length);
  const name = TOOLS[(i - 1) % TOOLS.length]!;
  switch (name) {
    case 'Read':
      return { name, arguments: { file_path: 'small.py' }, measured: name };
    case 'Edit':
      return round % 2 === 0
        ? { name, arguments: { file_path: 'small.py', old_string: 'alpha = 1', new_string: 'alpha = 2' }, measured: name }
        : { name, arguments: { file_path: 'small.py', old_string: 'alpha = 2', new_string: 'alpha = 1' }, measured: name };
    case 'Glob':
      return { name, arguments: { pattern: '**/*.py' }, measured: name };
    case 'Bash':
      return { name, arguments: { command: 'true' }, measured: name };
  }
}

/**
 * The floor of a Bash call: `bash -lc true` spawned by Python the way the toolbox spawns one, run
 * as a Bash call itself so that it has the toolbox's user, environment (HOME and its profile, which
 * `bash -l` reads) and working directory. Prints the per-spawn times in ms as JSON.
 *
 * Then, for the record and not as the target, the same spawns with `user=` the caller's own uid:
 * Python then forks instead of using vfork, and the child sets its uid in C before the exec, which
 * is the toolbox's own path (it must set the child's real and saved uid to the agent's; its own
 * real uid is 0, so a vfork child would keep that, and an exec under no-new-privileges with real
 * uid 0 comes out as uid 0 without capabilities). The gap between the two rows is the fork.
 */
const FLOOR_SCRIPT = `
import os, subprocess, time, json, sys
n = int(sys.argv[1])
def spawns(**how):
    out = []
    for i in range(n + 5):
        t = time.perf_counter()
        p = subprocess.Popen(["/bin/bash", "-lc", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **how)
        p.communicate()
        if i >= 5:
            out.append((time.perf_counter() - t) * 1000)
    return out
print("FLOOR" + json.dumps(spawns()))
if sys.version_info >= (3, 9):
    print("FORKED" + json.dumps(spawns(user=os.getuid())))
`;
const FLOOR_COMMAND = `python3 - ${N_FLOOR} <<'PY'\n${FLOOR_SCRIPT}\nPY`;

/** The samples of one kind (FLOOR, FORKED) in a Bash observation, if it is one of the floor calls. */
function floorSamples(observation: string, kind: 'FLOOR' | 'FORKED' = 'FLOOR'): number[] | undefined {
  const m = new RegExp(`^${kind}(\\[.*\\])$`, 'm').exec(observation);
  return m ? (JSON.parse(m[1]!) as number[]) : undefined;
}

// ------------------------------------------------------------------ the model server's process

interface ServerReport {
  /** Per chat request in arrival order: when it was received whole and when its response was finished (ms since the epoch, sub-ms). */
  arrived: number[];
  finished: number[];
  /** Request body sizes (Content-Length). */
  bytes: number[];
}

async function serveModel(totalSteps: number): Promise<void> {
  const { startModelServer } = await import('../test/support/model-server.ts');
  const report: ServerReport = { arrived: [], finished: [], bytes: [] };
  const isChat = (req: { method?: string; url?: string }) => req.method === 'POST' && (req.url ?? '').startsWith('/v1/chat/completions');
  // The http server's own hooks: a request started (its body then read to the end: a server can
  // only start on a request it has whole), and a response handed to the kernel.
  subscribe('http.server.request.start', (m) => {
    const { request } = m as { request: { method?: string; url?: string; headers: Record<string, string | string[] | undefined>; once(event: 'end', fn: () => void): void } };
    if (!isChat(request)) return;
    const slot = report.arrived.push(NaN) - 1;
    report.bytes.push(Number(request.headers['content-length'] ?? NaN));
    request.once('end', () => {
      report.arrived[slot] = performance.now();
    });
  });
  subscribe('http.server.response.finish', (m) => {
    const { request } = m as { request: { method?: string; url?: string } };
    if (isChat(request)) report.finished.push(performance.now());
  });
  const server = await startModelServer({
    script: ({ index }) => {
      if (index > totalSteps + 1) return { content: 'The helper is unchanged; nothing to fix.' };
      const { name, arguments: args } = planned(index, totalSteps);
      return { reasoning: REASONING, content: '', toolCalls: [{ name, arguments: args }] };
    },
  });
  process.on('message', (msg: unknown) => {
    // Absolute times (this process's origin added) so that the bench can line them up with its own.
    if (msg === 'clock') process.send?.({ clock: performance.timeOrigin + performance.now() });
    if (msg === 'cpu') process.send?.({ cpu: cpuMs() });
    if (msg === 'report') process.send?.({ report: { ...report, arrived: report.arrived.map((t) => t + performance.timeOrigin), finished: report.finished.map((t) => t + performance.timeOrigin) } });
    if (msg === 'close') void server.close().then(() => process.exit(0));
  });
  process.send?.({ url: server.url });
}

// ------------------------------------------------------------------ the bench's own process

/** CPU time (user + system, every thread) this process has used, ms: the work behind the gaps, without the waiting. */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
function systemMs(): number {
  return process.cpuUsage().system / 1000;
}

function stats(samples: number[]): { median: number; p95: number } {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
  return { median: at(0.5), p95: at(0.95) };
}

async function timed(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < Math.min(5, n); i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

async function dockerApiExec(docker: Docker, id: string, cmd: string[], user?: string): Promise<{ stdout: string; stderr: string }> {
  const exec = await docker.getContainer(id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, ...(user ? { User: user } : {}) });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', resolve);
    stream.on('error', reject);
  });
  // Multiplexed stream: 8-byte frame headers before each payload.
  const raw = Buffer.concat(chunks);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  for (let at = 0; at + 8 <= raw.length; ) {
    const len = raw.readUInt32BE(at + 4);
    (raw[at] === 1 ? out : err).push(raw.subarray(at + 8, at + 8 + len));
    at += 8 + len;
  }
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

interface Side {
  execCat: number[];
  execBash: number[];
}

async function measureBeside(docker: Docker, benchLabel: string): Promise<Side> {
  const [info] = await docker.listContainers({ filters: { label: [`lilypad.bench=${benchLabel}`] } });
  if (!info) throw new Error('the bench could not find its sandbox container');
  const id = info.Id;
  // The agent's user (the toolbox runs Bash calls as it); the engine's default may differ.
  const user = await agentUser(docker, id);
  const execCat = await timed(N_EXEC, () => dockerApiExec(docker, id, ['cat', '/testbed/small.py'], user));
  const execBash = await timed(N_EXEC, () => dockerApiExec(docker, id, ['bash', '-lc', 'true'], user));
  return { execCat, execBash };
}

/** The owner of the repository directory: the user the agent's tool calls run as. */
async function agentUser(docker: Docker, id: string): Promise<string> {
  const { stdout } = await dockerApiExec(docker, id, ['stat', '-c', '%u:%g', '/testbed'], '0');
  return stdout.trim();
}

function ask<T>(child: ChildProcess, msg: string | undefined, pick: (m: Record<string, unknown>) => T | undefined): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: unknown) => {
      const v = typeof m === 'object' && m !== null ? pick(m as Record<string, unknown>) : undefined;
      if (v === undefined) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(v);
    };
    const onExit = (code: number | null) => reject(new Error(`the model server's process exited (code ${code})`));
    child.on('message', onMessage);
    child.once('exit', onExit);
    if (msg !== undefined) child.send(msg);
  });
}

async function main(): Promise<void> {
  const { createDockerClient } = await import('../src/sandbox/sandbox.ts');
  const { runSandboxSession } = await import('../src/pipeline/sandbox-session.ts');
  const { ModelClient, jsonBytes } = await import('../src/agent/model-client.ts');
  const { Agent } = await import('undici');
  const { JsonlTrajectory } = await import('../src/agent/trajectory.ts');
  const { SecretScanner } = await import('../src/observability/secrets.ts');
  const { RunStore } = await import('../src/observability/run-store.ts');
  const { makeRepo } = await import('../test/support/fixture-repo.ts');

  const warmSteps = WARMUP_ROUNDS * TOOLS.length;
  const totalSteps = warmSteps + ROUNDS * TOOLS.length;
  const child = fork(fileURLToPath(import.meta.url), ['--model-server', String(totalSteps)], { execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const docker = createDockerClient();
  const files: Record<string, string> = { 'small.py': 'alpha = 1\nbeta = 2\n' };
  for (let i = 1; i <= 40; i++) files[`src/m${i}.py`] = Array.from({ length: 50 }, (_, j) => `line ${j + 1}\n`).join('');
  const repo = makeRepo(files);
  const outDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-step-bench-'));
  const benchLabel = `${process.pid}-${Date.now()}`;
  const runId = `bench-step-${benchLabel}`;
  const prefix = `lilypad-bench-${benchLabel}`;

  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  redis.on('error', () => undefined);
  const haveRedis = await redis.connect().then(
    () => true,
    () => false,
  );
  const apiKey = 'sk-bench-not-a-real-key-0123456789abcdef';
  const scanner = new SecretScanner([apiKey]);
  const recorder = haveRedis
    ? new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 64 * 1024 * 1024 }).recorder(
        { runId, jobId: 'bench', owner: 'bench', repo: 'bench', repoId: 1, issueNumber: 1, triggeredBy: 'bench', attempt: 1, workerId: os.hostname() },
        scanner,
      )
    : undefined;

  let side: Side | undefined;
  let cpu = { loop: NaN, loopSystem: NaN, server: NaN };
  try {
    const url = await ask(child, undefined, (m) => (typeof m['url'] === 'string' ? m['url'] : undefined));
    const floor: number[] = [];
    const forked: number[] = [];
    const trajectory = new JsonlTrajectory(path.join(outDir, 'trajectory.jsonl'), scanner, (r) => {
      for (const t of r.tools) {
        floor.push(...(floorSamples(t.observation) ?? []));
        forked.push(...(floorSamples(t.observation, 'FORKED') ?? []));
      }
      recorder?.step(r);
    });
    // The loop's side of each turn, to split the gap: when a request left and when its answer was in hand.
    const issued: number[] = [];
    const returned: number[] = [];
    let lastBody: Record<string, unknown> = {};
    class TimedClient extends ModelClient {
      override async complete(body: Record<string, unknown>, signal: AbortSignal | undefined, onRetry: (r: RetryRecord) => void, onSent?: () => void): Promise<CompletionOutcome> {
        issued.push(performance.timeOrigin + performance.now());
        lastBody = body;
        try {
          return await super.complete(body, signal, onRetry, onSent);
        } finally {
          returned.push(performance.timeOrigin + performance.now());
        }
      }
    }
    const client = new TimedClient({ baseURL: url, apiKey, timeoutMs: 60_000, maxRetries: 2 });
    const baseCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repo, encoding: 'utf8' }).trim();
    const session = await runSandboxSession({
      docker,
      checkoutDir: repo,
      baseCommit,
      sandbox: { image, workdir: '/testbed', memoryMb: 1024, cpus: 2, pids: 256 },
      runId,
      workerId: os.hostname(),
      labels: { 'lilypad.bench': benchLabel },
      setup: [],
      setupNetwork: null,
      setupTimeoutSeconds: 60,
      testTimeoutSeconds: 60,
      issue: { title: 'Step overhead bench', body: 'Read, edit, list and run, many times.' },
      model: 'frognano-4b',
      client,
      budgets: { maxSteps: totalSteps + 10, maxContextTokens: 10_000_000, maxTokensPerTurn: 8192, maxWallSeconds: 3600, bashTimeoutCapSeconds: 1800 },
      trajectory,
      phase: async (name, fn) => {
        // The docker exec and floor rows run on the agent's own container, just before the agent.
        if (name !== 'agent') return fn();
        side = await measureBeside(docker, benchLabel);
        const serverCpu = () => ask(child, 'cpu', (m) => (typeof m['cpu'] === 'number' ? m['cpu'] : undefined));
        const [loop0, system0, server0] = [cpuMs(), systemMs(), await serverCpu()];
        try {
          return await fn();
        } finally {
          cpu = { loop: cpuMs() - loop0, loopSystem: systemMs() - system0, server: (await serverCpu()) - server0 };
        }
      },
    });
    await trajectory.close();
    await recorder?.finish({ outcome: 'no_change', exitReason: session.agent.exitReason });
    if (session.agent.exitReason !== 'agent' || session.agent.steps !== totalSteps + 3) {
      throw new Error(`the bench's agent run ended with ${session.agent.exitReason} after ${session.agent.steps} steps (${session.agent.error ?? 'no error'}); expected ${totalSteps + 3} steps`);
    }
    if (floor.length !== 2 * N_FLOOR) throw new Error(`the floor measurement in the sandbox gave ${floor.length} samples, not ${2 * N_FLOOR}: see the Bash observations`);

    const report = await ask(child, 'report', (m) => (m['report'] as ServerReport | undefined) ?? undefined);
    // The two processes' clocks differ by a fraction of a millisecond: estimate the offset from the
    // quickest of a few pings (its error is at most half that ping) so that the split below is fair.
    let offset = 0;
    let bestPing = Infinity;
    for (let i = 0; i < 30; i++) {
      const t0 = performance.timeOrigin + performance.now();
      const theirs = await ask(child, 'clock', (m) => (typeof m['clock'] === 'number' ? m['clock'] : undefined));
      const t1 = performance.timeOrigin + performance.now();
      if (t1 - t0 < bestPing) {
        bestPing = t1 - t0;
        offset = theirs - (t0 + t1) / 2;
      }
    }
    // The transport alone: the last request's bytes posted to the same server and its answer read,
    // nothing else (the server answers these with its closing reply).
    const agent = new Agent();
    const chat = new URL(`${url}/chat/completions`);
    const lastBytes = jsonBytes(lastBody);
    const roundTrip = await timed(N_EXEC, async () => {
      const res = await agent.request({ origin: chat.origin, path: chat.pathname, method: 'POST', headers: { 'content-type': 'application/json' }, body: lastBytes });
      await res.body.arrayBuffer();
    });
    await agent.close();
    const gaps: Record<ToolName, number[]> = { Read: [], Edit: [], Glob: [], Bash: [] };
    const parts: Record<ToolName, { toLoop: number[]; loop: number[]; toServer: number[] }> = {
      Read: { toLoop: [], loop: [], toServer: [] },
      Edit: { toLoop: [], loop: [], toServer: [] },
      Glob: { toLoop: [], loop: [], toServer: [] },
      Bash: { toLoop: [], loop: [], toServer: [] },
    };
    for (let i = 1 + warmSteps; i <= totalSteps; i++) {
      const finished = report.finished[i];
      const next = report.arrived[i + 1];
      if (finished === undefined || next === undefined || Number.isNaN(next)) throw new Error(`the model server recorded no timing for turn ${i + 1}`);
      const tool = planned(i, totalSteps).measured!;
      gaps[tool].push(next - finished);
      parts[tool].toLoop.push(returned[i]! - (finished - offset));
      parts[tool].loop.push(issued[i + 1]! - returned[i]!);
      parts[tool].toServer.push(next - offset - issued[i + 1]!);
    }

    const floorMedian = stats(floor).median;
    const rows: Array<[string, number[], string]> = [
      ['Read small file: step', gaps.Read, '< 1.50'],
      ['Edit: step', gaps.Edit, '< 1.50'],
      ['Glob **/*.py, 41 files: step', gaps.Glob, '< 1.50'],
      ['Bash `true`: step', gaps.Bash, `< ${(1.3 * floorMedian).toFixed(2)}`],
      ['floor: bash -lc true spawned as the toolbox does', floor, ''],
      ['the same, forked with a uid set in the child (info)', forked, ''],
      ['docker exec via Engine API: cat small.py', side!.execCat, ''],
      ['docker exec via Engine API: bash -lc true', side!.execBash, ''],
      [`HTTP round trip alone, last request (${(lastBytes.length / 1024).toFixed(0)} KiB)`, roundTrip, ''],
    ];
    const width = Math.max(...rows.map(([name]) => name.length));
    console.log(
      `agent step overhead, model server's view: its response finished -> the next request received whole (${ROUNDS} steps per tool after ${warmSteps} warm-up steps; ` +
        `run recorder: ${haveRedis ? 'on' : `OFF, no Redis at ${redisUrl}`}; ms)`,
    );
    const kib = (n: number | undefined) => `${((n ?? NaN) / 1024).toFixed(0)} KiB`;
    console.log(`request bodies: ${kib(report.bytes[1 + warmSteps])} at the first measured step, ${kib(report.bytes[totalSteps + 1])} at the last`);
    console.log(`${'operation'.padEnd(width)}  ${'median'.padStart(8)}  ${'p95'.padStart(8)}  ${'target'.padStart(8)}`);
    for (const [name, samples, target] of rows) {
      const { median, p95 } = stats(samples);
      console.log(`${name.padEnd(width)}  ${median.toFixed(2).padStart(8)}  ${p95.toFixed(2).padStart(8)}  ${target.padStart(8)}`);
    }
    console.log(
      `the step split (medians, ms; first and last column +-${(bestPing / 2).toFixed(2)} ms, the clock offset's error): ` +
        'response finished -> loop has it | loop, tool call included | request issued -> server has it whole',
    );
    for (const t of TOOLS) {
      const p = parts[t];
      console.log(`  ${t.padEnd(5)} ${stats(p.toLoop).median.toFixed(2).padStart(6)} | ${stats(p.loop).median.toFixed(2).padStart(6)} | ${stats(p.toServer).median.toFixed(2).padStart(6)}`);
    }
    const steps = session.agent.steps;
    console.log(
      `CPU time per step, all ${steps} steps of the run averaged (ms, every thread; a busy machine raises it too): ` +
        `the loop's process ${(cpu.loop / steps).toFixed(3)} (${(cpu.loopSystem / steps).toFixed(3)} of it in the kernel), the model server's ${(cpu.server / steps).toFixed(3)}`,
    );
    const fileOk = (['Read', 'Edit', 'Glob'] as const).every((t) => stats(gaps[t]).median < 1.5);
    const bashOk = stats(gaps.Bash).median < 1.3 * floorMedian;
    console.log(`targets: Read/Edit/Glob step < 1.5 ms median: ${fileOk ? 'met' : 'MISSED'}; Bash true step < 1.3x floor median: ${bashOk ? 'met' : 'MISSED'}`);
  } finally {
    child.send('close');
    if (haveRedis) {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
    rmSync(repo, { recursive: true, force: true });
    rmSync(outDir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--model-server') await serveModel(Number(process.argv[3]));
else await main();
