/**
 * The sandbox boundary under attack: a process inside the container (an agent's Bash call, a
 * repository's tests) tries to forge what the host reads, hang or flood the host, escape the
 * clean-up, or outgrow its limits. Each row is one attack against the real Docker engine.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { after, before } from 'node:test';
import { ModelClient } from '../../../src/agent/model-client.ts';
import { MemoryTrajectory, type StepRecord } from '../../../src/agent/trajectory.ts';
import { ToolboxChannel } from '../../../src/sandbox/channel.ts';
import { SandboxDeadlineError } from '../../../src/sandbox/deadline.ts';
import { SandboxBoundaryError, SandboxImageError, SandboxLimitError } from '../../../src/sandbox/errors.ts';
import { helloSchema } from '../../../src/sandbox/protocol.ts';
import { LABEL_RUN, Sandbox, type SandboxOptions } from '../../../src/sandbox/sandbox.ts';
import { runSandboxSession } from '../../../src/pipeline/sandbox-session.ts';
import { runTestCommand } from '../../../src/pipeline/test-command.ts';
import { faultTest } from '../../support/fault-table.ts';
import { CALC_REPO, makeRepo } from '../../support/fixture-repo.ts';
import { startModelServer, type ScriptedReply } from '../../support/model-server.ts';
import { signalToolbox, TEST_IMAGE, TEST_RUNTIME, testDocker } from '../../support/sandbox-harness.ts';
import { isGvisor } from '../../../src/sandbox/runtime.ts';

// Under LILYPAD_SANDBOX_RUNTIME (e.g. runsc) when it is set, as the worker would run them.
const docker = await testDocker();
const script = (name: string) => readFileSync(new URL(`./scripts/${name}`, import.meta.url), 'utf8');
const uniq = (p: string) => `fault-${p}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(16).slice(2, 6)}`;
const options = (runId: string, extra: Partial<SandboxOptions> = {}): SandboxOptions => ({
  image: TEST_IMAGE,
  workdir: '/testbed',
  memoryMb: 512,
  cpus: 1,
  pids: 128,
  network: 'none',
  runId,
  workerId: os.hostname(),
  deadlineMarginMs: 2000,
  ...extra,
});
const bash = (sb: Sandbox, command: string, cap = 60) => sb.tool('Bash', JSON.stringify({ command, timeout: cap }), cap);
const leftovers = async (runId: string) => (await docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN}=${runId}`] } })).length;
const put = (sb: Sandbox, target: string, content: string) =>
  sb.exec(['/bin/bash', '-c', 'printf %s "$2" | base64 -d > "$1"', 'put', target, Buffer.from(content).toString('base64')]);
/** Processes of the agent's uid other than the counting one and its parent (the toolbox). */
const COUNT_AGENT_PROCS =
  'import os\nme=os.getpid();pp=os.getppid();uid=os.getuid();n=0\n' +
  'for e in os.listdir("/proc"):\n' +
  '  if e.isdigit() and int(e) not in (me,pp):\n' +
  '    try:\n' +
  '      if str(uid) in [l for l in open("/proc/%s/status"%e) if l.startswith("Uid:")][0].split()[1:]: n+=1\n' +
  '    except Exception: pass\n' +
  'print(n)';
const agentProcs = async (sb: Sandbox) => Number((await sb.exec(['python3', '-c', COUNT_AGENT_PROCS])).stdout.toString().trim());
const within = async <T>(ms: number, p: Promise<T>): Promise<{ value?: T; error?: Error; ms: number }> => {
  const t = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms)));
  try {
    return { value: await Promise.race([p, late]), ms: Date.now() - t };
  } catch (error) {
    return { error: error as Error, ms: Date.now() - t };
  } finally {
    clearTimeout(timer);
  }
};

// A sandbox that is never attacked: it must still answer after every attack on the others.
let bystander: Sandbox;
before(async () => {
  bystander = await Sandbox.create(docker, options(uniq('bystander')));
});
after(async () => {
  await bystander?.destroy();
});
const bystanderFine = async () => (await bash(bystander, 'echo fine')).observation === 'Exit code: 0\nSTDOUT:\nfine\n\nSTDERR:\n';

faultTest(
  'forger: a daemon from a Bash call opens the toolbox pipes and forges replies; the agent tries to kill (`kill -9 $PPID`) and stop (`kill -STOP $PPID`) its toolbox',
  'observations, test results and the patch are genuine; the toolbox pipes cannot be opened (EACCES); kill and stop are refused (EPERM) and cost no call; no process of the agent survives into the test run',
  async () => {
    const repo = makeRepo(CALC_REPO);
    const start = 'env -u LILYPAD_CALL_ID setsid nohup python3 /tmp/forger.py >/dev/null 2>&1 & sleep 0.5; echo started';
    // The test command reports whether a forger is still alive while it runs.
    const leftForger = 'pgrep -f forger.p[y] >/dev/null || echo NO-FORGER-LEFT';
    const turns: ScriptedReply[] = [
      { toolCalls: [{ name: 'Write', arguments: { file_path: '/tmp/forger.py', content: script('forger.py') } }] },
      { toolCalls: [{ name: 'Bash', arguments: { command: start } }] },
      { toolCalls: [{ name: 'Read', arguments: { file_path: 'calc.py' } }] },
      { toolCalls: [{ name: 'Bash', arguments: { command: 'kill -9 $PPID; kill -STOP $PPID; echo toolbox-still-here' } }] },
      { toolCalls: [{ name: 'Bash', arguments: { command: 'pgrep -f forger.p[y] >/dev/null && echo forger-running' } }] },
      { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
      { toolCalls: [{ name: 'Read', arguments: { file_path: 'calc.py' } }, { name: 'Bash', arguments: { command: 'sleep 0.3; cat /tmp/forger.log' } }] },
      { content: 'Fixed add().' },
    ];
    const server = await startModelServer({ script: turns });
    const trajectory = new MemoryTrajectory();
    try {
      const result = await runSandboxSession({
        docker,
        checkoutDir: repo,
        // A commit id, as every caller gives: Lilypad reads the patch with a git of its own, where names such as HEAD mean nothing.
        baseCommit: execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repo, encoding: 'utf8' }).trim(),
        sandbox: { image: TEST_IMAGE, workdir: '/testbed', memoryMb: 512, cpus: 1, pids: 256 },
        runId: uniq('forger'),
        workerId: os.hostname(),
        setup: [],
        setupNetwork: null,
        setupTimeoutSeconds: 60,
        testCommand: `python3 -m unittest -v 2>&1; rc=$?; ${leftForger}; echo TEST-RUN-MARKER; exit $rc`,
        testTimeoutSeconds: 60,
        issue: { title: 'add() is wrong', body: 'add(2, 3) gives -1' },
        model: 'frognano-4b',
        client: new ModelClient({ baseURL: server.url, timeoutMs: 20_000, maxRetries: 0 }),
        budgets: { maxSteps: 20, maxContextTokens: 131072, maxTokensPerTurn: 8192, maxWallSeconds: 300, bashTimeoutCapSeconds: 60 },
        trajectory,
        phase: (_name, fn) => fn(),
      });
      const calls = (trajectory.records as StepRecord[]).flatMap((r) => r.tools);
      const observations = calls.map((t) => t.observation);
      const all = JSON.stringify({ observations, tests: result.tests, patch: result.patch?.diff.toString() });
      const forgerLog = observations.find((o) => o.includes('forger ')) ?? '';
      const killCall = calls.find((t) => t.observation.includes('toolbox-still-here'));
      const refusals = (killCall?.observation.match(/Operation not permitted/g) ?? []).length;
      const toolboxPid = /kill: \((\d+)\) - Operation not permitted/.exec(killCall?.observation ?? '')?.[1] ?? null;
      const childrenOpened = new Set([...forgerLog.matchAll(/opened the pipes of toolbox (\d+)/g)].map((m) => m[1])).size;
      const checks = {
        'no forged text anywhere': !all.includes('FORGED'),
        'Read was genuine': observations.includes('calc.py\n1. def add(a, b):\n2.     return a - b'),
        'Edit was genuine': observations.includes('Edited calc.py (1 replacement).'),
        'kill and stop of the toolbox were refused, in an ordinary call': refusals === 2 && killCall?.observation.startsWith('Exit code: 0\n') === true,
        'the forger ran during the agent phase': observations.some((o) => o.includes('forger-running')),
        // The toolbox itself ($PPID of the agent's calls). Under gVisor the forger also catches a
        // Bash call's child between its fork and its exec (it still bears the toolbox's name), when
        // its ids are the agent's and its stdin and stdout are already that call's own: counted below.
        'the pipes were refused': toolboxPid !== null && new RegExp(`denied toolbox ${toolboxPid}: \\[Errno 13\\] Permission denied`).test(forgerLog) && !new RegExp(`opened the pipes of toolbox ${toolboxPid}\\n`).test(forgerLog),
        'no forger in the test runs': /NO-FORGER-LEFT/.test(result.tests?.before?.outputTail ?? '') && /NO-FORGER-LEFT/.test(result.tests?.after?.outputTail ?? ''),
        'tests before failed for real': result.tests?.before?.outcome === 'failed' && /FAIL: test_add/.test(result.tests.before.outputTail),
        'tests after passed for real': result.tests?.after?.outcome === 'passed' && /TEST-RUN-MARKER/.test(result.tests.after.outputTail),
        'the patch is the real edit': /\+    return a \+ b/.test(result.patch?.diff.toString() ?? ''),
      };
      const failed = Object.entries(checks).filter(([, ok]) => !ok).map(([k]) => k);
      const denied = forgerLog.split('\n').find((l) => l.startsWith('denied')) ?? '';
      return {
        observed: failed.length === 0 ? `forger refused (${denied}); kill and stop refused (${refusals} x EPERM); all results genuine${childrenOpened ? `; ${childrenOpened} Bash call child(ren) opened between fork and exec (their pipes are the call's own)` : ''}` : `broken (the agent ended: ${result.agent.exitReason}): ${failed.join('; ')}; calls: ${calls.map((t) => `${t.name} ${t.duration_ms} ms ${JSON.stringify(t.observation.slice(0, 160))}`).join(' | ')}`,
        pass: failed.length === 0,
      };
    } finally {
      await server.close();
    }
  },
);

faultTest(
  'the agent against its toolbox: signals, ptrace, /proc/<toolbox>/{fd/0,fd/1,mem}, `kill -9 -1`; files written by Write and by Bash',
  'every one refused (EPERM / EACCES); `kill -9 -1` ends only the agent\'s own processes and the toolbox answers on without a replacement; Write and Bash leave files of the same owner, the agent',
  async () => {
    const sb = await Sandbox.create(docker, options(uniq('reach')));
    try {
      await put(sb, '/tmp/reach.py', script('reach-toolbox.py'));
      const reach = await bash(sb, 'python3 /tmp/reach.py $PPID');
      const tries = (/STDOUT:\n([\s\S]*?)\nSTDERR:/.exec(reach.observation)?.[1] ?? '').trim().split('\n');
      const allowed = tries.filter((l) => !/ refused /.test(l));
      await bash(sb, 'sleep 300 >/dev/null 2>&1 &');
      const killAll = await bash(sb, 'kill -9 -1; echo after');
      const left = await agentProcs(sb);
      await sb.tool('Write', JSON.stringify({ file_path: 'by-write.txt', content: 'w\n' }), 60);
      // Python's stat, not coreutils': this gVisor release refuses the statx calls that stat(1) and ls(1) make.
      const owners = await bash(sb, `echo b > by-bash.txt; python3 -c 'import os,sys\nfor f in sys.argv[1:]: print("%d:%d" % (os.stat(f).st_uid, os.stat(f).st_gid))' by-write.txt by-bash.txt; echo "$(id -u):$(id -g)"`);
      const [w, b, me] = (/STDOUT:\n([\s\S]*?)\n\nSTDERR:/.exec(owners.observation)?.[1] ?? '').split('\n');
      const ok =
        tries.length >= 6 &&
        allowed.length === 0 &&
        killAll.observation === 'Exit code: 0\nSTDOUT:\nafter\n\nSTDERR:\n' &&
        left === 0 &&
        sb.recoveries === 0 &&
        w === me &&
        b === me &&
        me !== '0:0';
      return {
        observed: `${tries.length} tries, ${allowed.length ? `allowed: ${allowed.join('; ')}` : 'all refused'}; kill -9 -1: ${JSON.stringify(killAll.observation.split('\n').slice(0, 3).join(' '))}, ${left} agent process(es) left, ${sb.recoveries} toolbox replacement(s); owners Write ${w}, Bash ${b}, agent ${me}`,
        pass: ok,
      };
    } finally {
      await sb.destroy();
    }
  },
);

faultTest(
  '1 GiB on one line of the toolbox channel (a toolbox replaced by `head -c 1G /dev/zero | tr`)',
  'the channel ends with an honest error at the 64 MiB line cap; the worker memory stays bounded',
  async () => {
    const sb = await Sandbox.create(docker, options(uniq('flood')));
    try {
      const rssBefore = process.memoryUsage().rss;
      const channel = await ToolboxChannel.open(docker, sb.container, {
        argv: ['/bin/sh', '-c', "head -c 1073741824 /dev/zero | tr '\\0' a"],
        env: [],
        user: '1000:1000',
        maxLineBytes: 64 * 1024 * 1024,
      });
      const res = await within(60_000, channel.request({ op: 'hello' }, helloSchema));
      const grew = (process.memoryUsage().rss - rssBefore) / (1 << 20);
      const ok = /longer than 64 MiB/.test(res.error?.message ?? '') && grew < 300;
      return { observed: `${res.error?.message ?? 'a reply was accepted'} after ${res.ms} ms; worker RSS grew ${grew.toFixed(0)} MiB`, pass: ok };
    } finally {
      await sb.destroy();
    }
  },
);

faultTest(
  'a line that is not JSON, then a reply to a request nobody made, on the toolbox channel',
  'each ends the channel with an honest error',
  async () => {
    const sb = await Sandbox.create(docker, options(uniq('garbage')));
    try {
      const open = (text: string) =>
        ToolboxChannel.open(docker, sb.container, { argv: ['/bin/sh', '-c', `printf '%s\\n' '${text}'; sleep 5`], env: [], user: '1000:1000', maxLineBytes: 1 << 20 });
      const garbage = await (await open('Exit code: 0')).request({ op: 'hello' }, helloSchema).catch((e: Error) => e.message);
      const forged = await (await open('{"id":99,"ok":true}')).request({ op: 'hello' }, helloSchema).catch((e: Error) => e.message);
      const ok = /not JSON/.test(String(garbage)) && /not waiting for an answer/.test(String(forged));
      return { observed: `${garbage} / ${forged}`, pass: ok };
    } finally {
      await sb.destroy();
    }
  },
);

for (const sig of ['STOP', 'KILL'] as const) {
  const byAgent = sig === 'STOP' ? 'kill -STOP $PPID' : 'kill -9 $PPID';
  faultTest(
    `SIG${sig} of the toolbox during a Bash call: by the agent (\`${byAgent}\`), and from outside its reach (a root exec, as the OOM killer or a lost exec would)`,
    sig === 'STOP'
      ? "the agent's stop is refused (EPERM) and its call completes; the stopped toolbox's call is ended at the host's deadline and reads as timed out at its own timeout (3.0s), as the reference shows a timeout; the next call works"
      : "the agent's kill is refused (EPERM) and its call completes; the killed toolbox's call is reported as interrupted; a fresh toolbox answers the next call",
    async () => {
      const sb = await Sandbox.create(docker, options(uniq(`${sig.toLowerCase()}-bash`)));
      try {
        const refused = await bash(sb, `${byAgent}; echo rc=$?`, 3);
        const agentRefused = /Operation not permitted/.test(refused.observation) && /\nrc=1\n/.test(refused.observation) && refused.meta.interrupted !== true && sb.recoveries === 0;
        const call = within(30_000, bash(sb, 'sleep 2; echo late', 3));
        await new Promise((r) => setTimeout(r, 500));
        const signalled = await signalToolbox(sb, sig);
        const res = await call;
        const next = await bash(sb, 'echo next');
        const reported =
          sig === 'STOP'
            ? res.value?.meta.interrupted === true && /^Timed out after 3\.0s\n/.test(res.value.observation) && res.ms >= 4500
            : res.value?.meta.interrupted === true && res.value.observation === 'Exit code: -9\nSTDOUT:\n\nSTDERR:\n';
        const ok = agentRefused && signalled === 0 && reported && next.observation.includes('next') && sb.recoveries === 1;
        return {
          observed: `agent: ${JSON.stringify(refused.observation.split('\n').slice(0, 6).join(' '))}; from outside: ${JSON.stringify(res.value?.observation ?? res.error?.message)} after ${res.ms} ms; next call: ${JSON.stringify(next.observation.split('\n')[2])}`,
          pass: ok,
        };
      } finally {
        await sb.destroy();
      }
    },
  );
}

for (const sig of ['STOP', 'KILL'] as const) {
  faultTest(
    `SIG${sig} of the toolbox by the repository's tests, and from outside their reach during the test command`,
    "the tests' signal is refused (EPERM) and their result stands; a toolbox that stops or dies under the test command ends the run with an honest reason within the test timeout plus the margin; the sandbox is removed",
    async () => {
      const runId = uniq(`tests-${sig.toLowerCase()}`);
      const sb = await Sandbox.create(docker, options(runId));
      try {
        await put(sb, '/testbed/stop_toolbox.py', script('stop-toolbox.py'));
        const tried = await runTestCommand(sb, `python3 stop_toolbox.py ${sig}`, 10);
        const refused = tried.outcome === 'passed' && /signalled 0 toolbox process\(es\), refused [1-9]/.test(tried.outputTail) && /tests OK/.test(tried.outputTail);
        const run = within(30_000, runTestCommand(sb, 'sleep 3; echo tests OK', 5));
        await new Promise((r) => setTimeout(r, 500));
        await signalToolbox(sb, sig);
        const res = await run;
        const err = res.error;
        const expected = sig === 'STOP' ? err instanceof SandboxDeadlineError && /stopped answering/.test(err.message) : err instanceof SandboxBoundaryError && /died while running the test command/.test(err.message);
        const left = await leftovers(runId);
        const tail = tried.outputTail.trim().split('\n')[0] ?? '';
        return {
          observed: `tests: ${JSON.stringify(tail)} (${tried.outcome}); from outside: ${err ? err.message : `the test outcome was accepted: ${JSON.stringify(res.value?.outcome)}`} (after ${res.ms} ms; ${left} container(s) left)`,
          pass: refused && expected && left === 0,
        };
      } finally {
        await sb.destroy();
      }
    },
  );
}

faultTest(
  'a daemon that escapes the reap: double fork, setsid, no call marker, non-dumpable, renamed, SIGTERM ignored',
  'takeOver() kills it: no process of the agent uid is left and its file stops growing',
  async () => {
    const sb = await Sandbox.create(docker, options(uniq('escaper')));
    try {
      await put(sb, '/tmp/escaper.py', script('escaper.py'));
      // Wait (up to 10 s) until the daemon has written a few ticks: it runs before the take-over.
      const ticking = await bash(sb, 'python3 /tmp/escaper.py; for i in $(seq 200); do [ "$(cat /testbed/ticks 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.05; done; cat /testbed/ticks | wc -l');
      const before = Number(/STDOUT:\n(\d+)/.exec(ticking.observation)?.[1] ?? 0);
      const found = await sb.takeOver();
      const size = (await sb.exec(['stat', '-c', '%s', '/testbed/ticks'])).stdout.toString().trim();
      // No process of the agent uid left means nothing can write the file any more; the size is read
      // again after that check as a cross-check.
      const procs = await agentProcs(sb);
      const later = (await sb.exec(['stat', '-c', '%s', '/testbed/ticks'])).stdout.toString().trim();
      return {
        observed: `${before} tick(s) before; ${found} agent process(es) killed; ${procs} left; ticks file ${size} -> ${later} bytes`,
        pass: before >= 3 && procs === 0 && size === later && found >= 1,
      };
    } finally {
      await sb.destroy();
    }
  },
);

/**
 * The host's count of the sandbox's tasks (peak of limit), read from its pids cgroup when this
 * machine exposes it: under gVisor the sandbox's processes are backed by many host threads, and a
 * peak at the limit ends the whole sandbox. Empty when the cgroup cannot be read.
 */
const hostTasks = (id: string): string => {
  for (const dir of [`/sys/fs/cgroup/pids/docker/${id}`, `/sys/fs/cgroup/system.slice/docker-${id}.scope`]) {
    try {
      const peak = readFileSync(`${dir}/pids.peak`, 'utf8').trim();
      const max = readFileSync(`${dir}/pids.max`, 'utf8').trim();
      return `; host tasks peaked at ${peak} of ${max}`;
    } catch {
      // not this cgroup layout
    }
  }
  return '';
};

// Under gVisor the bomb slows the sandbox's own kernel, so the toolbox may not end the call by its
// own timeout: then the host's deadline for the call (the timeout plus the 2 s margin) ends it, the
// toolbox is replaced, and the call reads as timed out at its own timeout all the same.
const GVISOR = isGvisor(docker, TEST_RUNTIME);
const BOMB_TIMEOUT = /^Timed out after 5\.0s|^Exit code/;
faultTest(
  'a fork bomb in a Bash call',
  GVISOR
    ? "stops at the pids limit and the call ends at its timeout (or, with gVisor's kernel slowed by the bomb, at the host's deadline for it); the sandbox and the worker keep working"
    : 'stops at the pids limit and the call ends at its timeout; the sandbox and the worker keep working',
  async () => {
  const sb = await Sandbox.create(docker, options(uniq('forkbomb')));
  try {
    const res = await within(60_000, bash(sb, 'bomb() { bomb | bomb & }; bomb', 5));
    await sb.takeOver();
    const procs = await agentProcs(sb);
    const next = await bash(sb, 'echo alive');
    const ok = BOMB_TIMEOUT.test(res.value?.observation ?? '') && next.observation.includes('alive') && procs === 0 && (await bystanderFine());
    return { observed: `${JSON.stringify((res.value?.observation ?? res.error?.message ?? '').split('\n')[0])} after ${res.ms} ms; ${procs} left after takeOver; next call answered; bystander answered${hostTasks(sb.id)}`, pass: ok };
  } finally {
    await sb.destroy();
  }
  },
);

// Under gVisor the host's OOM killer can only end the sandbox's kernel, so the balloon ends the
// sandbox; what must hold then is an honest memory reason, no leftover and an untouched neighbour.
faultTest(
  'a memory balloon (python allocating 2 GiB in a 512 MiB sandbox)',
  GVISOR ? 'under gVisor: the sandbox is removed with the memory reason (SandboxLimitError), nothing is left, the bystander answers' : 'killed at the memory limit (exit -9); the next call works',
  async () => {
  const runId = uniq('balloon');
  const sb = await Sandbox.create(docker, options(runId));
  if (GVISOR) {
    try {
      const err = await bash(sb, "python3 -c 'x = bytearray(2 << 30); print(len(x))'", 60).then(
        (r) => new Error(`the call returned ${JSON.stringify(r.observation.split('\n')[0])}`),
        (e: Error) => e,
      );
      const left = await leftovers(runId);
      const ok = err instanceof SandboxLimitError && /ran out of memory/.test(err.message) && left === 0 && (await bystanderFine());
      return { observed: `${err.message} (${left} container(s) left); bystander answered`, pass: ok };
    } finally {
      await sb.destroy();
    }
  }
  try {
    const res = await bash(sb, "python3 -c 'x = bytearray(2 << 30); print(len(x))'", 60);
    const next = await bash(sb, 'echo alive');
    const ok = /^Exit code: (-9|137)/.test(res.observation) && next.observation.includes('alive') && (await bystanderFine());
    return { observed: `${JSON.stringify(res.observation.split('\n')[0])}; next call answered; bystander answered`, pass: ok };
  } finally {
    await sb.destroy();
  }
  },
);

faultTest('`sleep infinity` in a Bash call, and `nohup sleep infinity &` left behind', 'the call ends at its timeout; the background sleep is killed before the host reads anything', async () => {
  const sb = await Sandbox.create(docker, options(uniq('sleep')));
  try {
    const res = await bash(sb, 'sleep infinity', 2);
    await bash(sb, 'nohup sleep infinity >/dev/null 2>&1 &');
    const found = await sb.takeOver();
    const procs = await agentProcs(sb);
    return { observed: `${JSON.stringify(res.observation.split('\n')[0])}; takeOver killed ${found}; ${procs} left`, pass: res.observation.startsWith('Timed out after 2.0s') && procs === 0 };
  } finally {
    await sb.destroy();
  }
});

faultTest('`fallocate` of one 200 MiB file with a 64 MiB disk cap', 'refused by RLIMIT_FSIZE (File size limit exceeded); nothing is allocated', async () => {
  const sb = await Sandbox.create(docker, options(uniq('fallocate'), { diskMb: 64 }));
  try {
    const res = await bash(sb, 'fallocate -l 200M /testbed/big; echo rc=$?; wc -c < /testbed/big');
    const size = Number(/\n(\d+)\n/.exec(res.observation)?.[1] ?? -1);
    return { observed: `${JSON.stringify(res.observation.replace(/\n+/g, ' ').slice(0, 160))}`, pass: /rc=153/.test(res.observation) && size === 0 };
  } finally {
    await sb.destroy();
  }
});

faultTest('writing past the disk cap in files each under it (3 x 40 MiB, cap 64 MiB)', 'the watchdog removes the sandbox and the run ends with the disk reason', async () => {
  const runId = uniq('disk');
  const sb = await Sandbox.create(docker, options(runId, { diskMb: 64, diskCheckMs: 300 }));
  try {
    await bash(sb, 'for i in 1 2 3; do head -c 40M /dev/zero > /testbed/f$i; done; sleep 30', 60).catch((e: Error) => e);
    const after = await bash(sb, 'echo still-here').then(
      () => new Error('the sandbox still answers'),
      (e: Error) => e,
    );
    const left = await leftovers(runId);
    return { observed: `${after.message} (${left} container(s) left)`, pass: after instanceof SandboxLimitError && /more than 64 MiB/.test(after.message) && left === 0 };
  } finally {
    await sb.destroy();
  }
});

faultTest('an image whose user is root (or unset)', 'refused before anything runs, unless LILYPAD_ALLOW_ROOT_IMAGES=true (then the agent runs as uid 1000)', async () => {
  const runId = uniq('root');
  const refused = await Sandbox.create(docker, options(runId, { user: 'root' })).then(
    async (sb) => {
      await sb.destroy();
      return new Error('created');
    },
    (e: Error) => e,
  );
  const allowed = await Sandbox.create(docker, options(uniq('root-allowed'), { user: 'root', allowRootImage: true }));
  let uid = '';
  try {
    uid = (await bash(allowed, 'id -u')).observation.split('\n')[2] ?? '';
  } finally {
    await allowed.destroy();
  }
  const ok = refused instanceof SandboxImageError && /would run the agent as root/.test(refused.message) && uid === '1000' && (await leftovers(runId)) === 0;
  return { observed: `${refused.message.slice(0, 90)}…; allowed: agent uid ${uid}`, pass: ok };
});
