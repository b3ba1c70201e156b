import { PassThrough } from 'node:stream';
import { spawn } from 'node:child_process';
import path from 'node:path';
import Docker from 'dockerode';
import { sandboxClosed, sandboxOpened } from '../observability/metrics.ts';
import { ToolboxChannel } from './channel.ts';

import { SandboxBoundaryError, SandboxError, SandboxImageError, SandboxLimitError, SandboxLostError } from './errors.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import { SandboxDeadlineError, withDeadline } from './deadline.ts';
import { createHardenedContainer, resolveAgentUser } from './container-spec.ts';
import { execOnce } from './exec-once.ts';
import { execReplySchema, helloSchema, reaperReplySchema, toolReplySchema, type ToolMeta } from './protocol.ts';
import { bashTimeout, timedOutLine } from './bash-timeout.ts';
import { probeAgentIdentity, type AgentIdentity } from './agent-identity.ts';
import { checkToolboxHello, ToolboxIdentityError } from './toolbox-hello.ts';
import { agentIdsEnv, reaperArgv, ROOT_USER, TOOLBOX_SOURCE, toolboxEnv, toolboxLaunchArgv } from './toolbox-launch.ts';

const FILE_TOOL_DEADLINE_MS = 120_000;
const DEFAULT_MARGIN_MS = 30_000;
const CONTROL_DEADLINE_MS = 30_000;
const DEFAULT_DISK_CHECK_MS = 5_000;
const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;
// Docker's inspect takes `size` (measure the writable layer); dockerode's types do not list it.
const WITH_SIZE: Docker.ContainerInspectOptions & { size: boolean } = { size: true };

/**
 * Reads a tar stream on stdin into the directory it is given, as whoever runs it (the agent's user,
 * so everything it writes is the agent's). The archive is the run's own checkout and the process
 * runs inside the sandbox, so no filter is needed beyond what the agent's user may do there anyway.
 */
const EXTRACT_SCRIPT = `import sys, tarfile
kw = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as archive:
    archive.extractall(sys.argv[1], **kw)
`;

export const LABEL_MANAGED = 'dev.lilypad.managed';
export const LABEL_RUN = 'dev.lilypad.run';
export const LABEL_WORKER = 'dev.lilypad.worker';

export interface SandboxOptions {
  image: string;
  /** The repository's path inside the container (the model saw /testbed in its evaluation). */
  workdir: string;
  /** Container user; undefined keeps the image's own USER. Never uid 0 (see resolveAgentUser). */
  user?: string | undefined;
  /** An image whose user is root runs the agent as uid 1000 instead of being refused. */
  allowRootImage?: boolean | undefined;
  memoryMb: number;
  cpus: number;
  pids: number;
  /** Most the container may write, in MiB (quota where the engine has one, else a watchdog). */
  diskMb?: number | undefined;
  /**
   * Docker network name: 'none' for the agent phase; a per-run internal network with the egress
   * proxy only while setup commands run, then cutNetwork().
   */
  network: string;
  runId: string;
  workerId: string;
  labels?: Record<string, string>;
  /** Longest reply line accepted from the toolbox (LILYPAD_TOOLBOX_MAX_LINE_MB). */
  maxLineBytes?: number | undefined;
  /** Added to every operation's own timeout to make the host's deadline for it. */
  deadlineMarginMs?: number | undefined;
  /** How often the disk watchdog measures the container when the engine has no quota. */
  diskCheckMs?: number | undefined;
  /**
   * The engine's OCI runtime for this container (runsc: gVisor). Unset: the one checkSandboxRuntime()
   * bound to the Docker client (LILYPAD_SANDBOX_RUNTIME), else the engine's default.
   */
  runtime?: string | undefined;
}

export interface ToolResult {
  observation: string;
  meta: ToolMeta;
  /** Seconds spent inside the container executing the tool. */
  elapsed: number;
}

export interface ExecResult {
  exitCode: number | null;
  timedOut: boolean;
  elapsedSeconds: number;
  stdout: Buffer;
  /** Total stdout bytes produced (stdout above is only the first keepBytes). */
  stdoutBytes: number;
  stderr: Buffer;
}

interface ExecOptions {
  timeoutSeconds?: number;
  keepBytes?: number;
  cwd?: string;
  env?: Record<string, string>;
  /** What the command is, for error messages ("the test command"). */
  what?: string;
}

export function createDockerClient(): Docker {
  // dockerode reads DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH itself.
  return new Docker();
}

/**
 * One hardened container for one run: no network in the agent phase, all capabilities dropped,
 * no-new-privileges, memory/CPU/pids/disk limits, never uid 0 for the agent, labelled with its
 * run and worker so that orphans can always be found. Nothing from the host's environment goes in.
 *
 * The host trusts nothing a sandboxed process could have written: the toolbox runs with real and
 * saved uid 0 while it acts as the agent, and non-dumpable, so no process of the agent's can open
 * its pipes, signal it or trace it (under runc and under gVisor, which lets a process of the same
 * uid open a non-dumpable one's pipes); every reply is bounded and parsed, every request has a
 * deadline, and before each phase whose result the host believes (setup, tests, the patch)
 * takeOver() kills every process of the agent's uid and starts a fresh toolbox.
 */
export class Sandbox {
  private destroyed = false;
  /** Why the sandbox was torn down by Lilypad itself (deadline, disk), reported to callers. */
  private fatal: SandboxError | undefined;
  /** How often the toolbox had to be replaced during the agent's run. */
  recoveries = 0;
  private removal: Promise<void> | undefined;
  private channel: ToolboxChannel | undefined;
  /** Who the agent is (probed once in create()); the toolbox and the reaper act as exactly these ids. */
  private identity: AgentIdentity | undefined;
  private diskTimer: NodeJS.Timeout | undefined;
  private readonly marginMs: number;

  private constructor(
    readonly docker: Docker,
    readonly container: Docker.Container,
    readonly options: SandboxOptions & { user: string },
  ) {
    this.marginMs = options.deadlineMarginMs ?? DEFAULT_MARGIN_MS;
  }

  get id(): string {
    return this.container.id;
  }

  static async create(docker: Docker, options: SandboxOptions, signal?: AbortSignal): Promise<Sandbox> {
    if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
    const labels = { ...options.labels, [LABEL_MANAGED]: 'true', [LABEL_RUN]: options.runId, [LABEL_WORKER]: options.workerId };
    const agentUser = await resolveAgentUser(docker, options);
    const created = await createHardenedContainer(docker, { ...options, labels });
    const sandbox = new Sandbox(docker, created.container, { ...options, user: agentUser });
    sandboxOpened();
    const onAbort = () => void sandbox.destroy();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await withDeadline(created.container.start(), CONTROL_DEADLINE_MS, 'starting the sandbox container');
      if (!created.quota && options.diskMb) sandbox.watchDisk(options.diskMb);
      // Who the agent is, asked before anything of the repository's is in the container.
      sandbox.identity = await probeAgentIdentity(created.container, { user: agentUser, image: options.image, timeoutMs: CONTROL_DEADLINE_MS });
      await sandbox.openToolbox().catch((err: unknown) => {
        if (err instanceof SandboxImageError || err instanceof ToolboxIdentityError) throw err;
        throw new SandboxImageError(
          `could not start Lilypad's toolbox in image ${options.image}: ${(err as Error).message}. ` +
            'The sandbox image needs python3 (3.6 or newer) on its PATH; build the default image with `npm run images`.',
        );
      });
      if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
      return sandbox;
    } catch (err) {
      await sandbox.destroy();
      if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
      throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Starts a toolbox over a fresh root exec and checks what it says about itself. */
  private async openToolbox(): Promise<void> {
    const identity = this.requireIdentity();
    const channel = await ToolboxChannel.open(this.docker, this.container, {
      argv: toolboxLaunchArgv(identity.python),
      env: toolboxEnv(identity, this.options.workdir),
      user: ROOT_USER,
      maxLineBytes: this.options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES,
      openTimeoutMs: CONTROL_DEADLINE_MS,
    });
    this.channel = channel;
    // The toolbox source travels as the first stdin line: no file to plant in the container,
    // and the process list the model can see stays short.
    channel.send(JSON.stringify(TOOLBOX_SOURCE));
    try {
      const hello = await withDeadline(channel.request({ op: 'hello' }, helloSchema), CONTROL_DEADLINE_MS, 'starting the toolbox');
      checkToolboxHello(hello, identity, this.options.image);
    } catch (err) {
      channel.close();
      throw err;
    }
  }

  private requireIdentity(): AgentIdentity {
    if (!this.identity) throw new SandboxError("the sandbox's agent user is not known yet");
    return this.identity;
  }

  /**
   * Kills every earlier toolbox and every process of the agent's uid (checked by listing /proc)
   * over a root exec of its own (reaper.py), then starts a fresh toolbox that no agent process
   * existed to touch. Returns how many such processes were found (the old toolbox included).
   */
  async takeOver(): Promise<number> {
    this.requireAlive();
    this.channel?.close();
    this.channel = undefined;
    const reaped = await this.guard(this.reap(), 'clearing the sandbox of the agent\'s processes');
    if (reaped.left > 0) {
      const err = new SandboxBoundaryError(`${reaped.left} process(es) of the agent's user survived SIGKILL in the sandbox; the sandbox was removed`);
      await this.fail(err);
      throw err;
    }
    await this.guard(this.openToolbox(), 'starting a fresh toolbox');
    return reaped.killed;
  }

  /** Runs the reaper; retried briefly, since a fork bomb at the pids limit can refuse one exec. */
  private async reap(): Promise<{ killed: number; left: number }> {
    let lastError = '';
    for (let attempt = 0; attempt < 20; attempt++) {
      const identity = this.requireIdentity();
      const res = await execOnce(this.container, {
        argv: reaperArgv(identity.python),
        user: ROOT_USER,
        env: [agentIdsEnv(identity)],
        timeoutMs: CONTROL_DEADLINE_MS,
        maxBytes: 4096,
      });
      const line = res.stdout.toString('utf8').trim().split('\n').at(-1) ?? '';
      const parsed = reaperReplySchema.safeParse(safeJson(line));
      if (parsed.success) return parsed.data;
      lastError = `${res.stderr.toString('utf8').trim().slice(-300) || `exit ${res.exitCode}`}`;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new SandboxError(`could not clear the sandbox of the agent's processes: ${lastError}`);
  }

  /** Runs `op`; a deadline or broken boundary on it removes the sandbox and rethrows why. */
  private async guard<T>(op: Promise<T>, what: string): Promise<T> {
    try {
      return await withDeadline(op, CONTROL_DEADLINE_MS + this.marginMs, what);
    } catch (err) {
      const stopped = !this.fatal && !this.destroyed ? await this.stoppedReason(what, err) : undefined;
      const reason =
        this.fatal ??
        (stopped
          ? stopped
          : err instanceof SandboxError
            ? err
            : new SandboxError(`${what} failed: ${(err as Error).message}`));
      await this.fail(reason);
      throw reason;
    }
  }

  /** Removes the sandbox and remembers why, so that every later call reports the same reason. */
  private async fail(reason: SandboxError): Promise<void> {
    this.fatal ??= reason;
    await this.destroy();
  }

  /** Destroys the container as soon as `signal` aborts; returns a function that stops listening. */
  destroyOnAbort(signal: AbortSignal | undefined): () => void {
    if (!signal) return () => {};
    const onAbort = () => void this.destroy();
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    return () => signal.removeEventListener('abort', onAbort);
  }

  private requireAlive(): void {
    if (this.fatal) throw this.fatal;
    if (this.destroyed) throw new SandboxError('the sandbox has been removed');
  }

  private requireChannel(): ToolboxChannel {
    this.requireAlive();
    if (!this.channel || this.channel.closed) throw new SandboxError("Lilypad's toolbox in the sandbox is not running");
    return this.channel;
  }

  /** Copies a host directory in as the repository (owned by the container user). */
  async copyIn(hostDir: string): Promise<void> {
    this.requireAlive();
    const { uid, gid } = this.requireIdentity();
    const name = path.posix.basename(this.options.workdir).replace(/[,\\&]/g, '\\$&');
    const args = [`--owner=${uid}`, `--group=${gid}`, '--numeric-owner', `--transform=s,^\\.,${name},S`];
    await this.streamTar(hostDir, args, (tar) =>
      withDeadline(this.container.putArchive(tar, { path: path.posix.dirname(this.options.workdir) }), 600_000, 'copying the repository into the sandbox'),
    );
  }

  /**
   * Copies a host directory into the existing worktree through a process inside the sandbox, run
   * as the agent's user. For a sandbox that has already looked at its worktree (a kept
   * environment, cleared in place): gVisor keeps what it has seen of a directory and does not see
   * files the engine writes behind it, so `copyIn` would leave the worktree empty under runsc.
   */
  async copyInFromInside(hostDir: string): Promise<void> {
    this.requireAlive();
    // Read from at once: Node drains and drops a child's unread output when the child exits.
    const res = await this.streamTar(hostDir, [], (tar) => this.pythonAsAgent(EXTRACT_SCRIPT, [this.options.workdir], { input: tar.pipe(new PassThrough()), timeoutMs: 600_000 }));
    if (res.exitCode !== 0) throw new SandboxError(`copying the repository into the sandbox failed (exit ${res.exitCode}): ${res.stderr.trim().slice(-300)}`);
  }

  /**
   * Runs a Python script of Lilypad's as the agent's user over an exec of its own (never the
   * toolbox, whose replies are not made for bulk data), with stdin from `input` and stdout streamed
   * to `output`: files moved in or out through a process inside the sandbox, as gVisor requires.
   */
  async pythonAsAgent(script: string, args: string[], opts: { input?: NodeJS.ReadableStream; output?: NodeJS.WritableStream; timeoutMs: number }): Promise<{ exitCode: number | null; stderr: string }> {
    this.requireAlive();
    const identity = this.requireIdentity();
    const res = await execOnce(this.container, {
      argv: [identity.python, '-c', script, ...args],
      user: `${identity.uid}:${identity.gid}`,
      ...(opts.input ? { input: opts.input } : {}),
      ...(opts.output ? { output: opts.output } : {}),
      timeoutMs: opts.timeoutMs,
      maxBytes: 4096,
    });
    return { exitCode: res.exitCode, stderr: res.stderr.toString('utf8') };
  }

  /** A tar of `hostDir` (with `args`) handed to `into`; a failure of either side is a SandboxError. */
  private async streamTar<T>(hostDir: string, args: string[], into: (tar: NodeJS.ReadableStream) => Promise<T>): Promise<T> {
    const tar = spawn('tar', ['-C', hostDir, '-cf', '-', ...args, '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    tar.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number>((resolve) => tar.on('close', (code) => resolve(code ?? -1)));
    let result: T;
    try {
      result = await into(tar.stdout);
    } catch (err) {
      tar.kill();
      throw new SandboxError(`copying the repository into the sandbox failed: ${(err as Error).message}`, { cause: err });
    }
    const code = await exited;
    if (code !== 0) throw new SandboxError(`tar of ${hostDir} failed (exit ${code}): ${stderr.trim()}`);
    return result;
  }

  /**
   * Runs one of the model's tool calls inside the container and returns its exact observation. A
   * Bash call runs for the timeout bashTimeout() decides under `bashCapSeconds`; the toolbox
   * enforces that number and the host waits for it plus the margin.
   */
  async tool(name: string, rawArguments: string, bashCapSeconds: number): Promise<ToolResult> {
    const bash = name === 'Bash' ? bashTimeout(rawArguments, { capSeconds: bashCapSeconds, marginMs: this.marginMs }) : undefined;
    const deadlineMs = bash ? bash.deadlineMs : FILE_TOOL_DEADLINE_MS;
    try {
      const channel = this.requireChannel();
      const decided = bash ? ('error' in bash ? { timeout_error: bash.error } : { timeout: bash.seconds }) : {};
      const res = await withDeadline(channel.request({ op: 'tool', name, arguments: rawArguments, ...decided }, toolReplySchema), deadlineMs, `a ${name} call`);
      // The host decided the timeout, so the host reports it; the toolbox says whether it ran out.
      const meta: ToolMeta = bash && 'seconds' in bash && res.meta.timed_out !== undefined ? { capped: bash.capped, timed_out: res.meta.timed_out, timeout: bash.seconds } : res.meta;
      return { observation: res.observation, meta, elapsed: res.elapsed };
    } catch (err) {
      if (this.fatal || this.destroyed) {
        await this.removal;
        throw this.fatal ?? err;
      }
      // The toolbox died, stopped answering or wedged under the call (the agent cannot signal it,
      // but it can run the sandbox out of memory, or the engine can lose the exec): while the
      // container lives, that costs one call, not the run.
      await this.takeOver();
      this.recoveries++;
      if (err instanceof SandboxDeadlineError) {
        // The model reads the timeout its call was given, as the reference would show it; that the
        // host's deadline (the timeout plus the margin) ended it is Lilypad's business (meta, logs).
        const observation =
          name === 'Bash'
            ? `${timedOutLine(bash && 'seconds' in bash ? bash.seconds : deadlineMs / 1000)}\nSTDOUT:\n\nSTDERR:\n`
            : `TimeoutError: the ${name} call did not finish within ${deadlineMs / 1000} seconds`;
        return { observation, meta: { error: true, interrupted: true }, elapsed: deadlineMs / 1000 };
      }
      const observation = name === 'Bash' ? 'Exit code: -9\nSTDOUT:\n\nSTDERR:\n' : `OSError: the ${name} call was interrupted`;
      return { observation, meta: { error: true, interrupted: true }, elapsed: 0 };
    }
  }

  /**
   * Runs a command for Lilypad itself (setup, tests, patch extraction); binary-safe, never shown
   * to the model. Past its timeout plus the margin, or if the toolbox dies under it, the sandbox
   * is removed and the reason thrown: the host never waits forever and never re-runs it.
   */
  async exec(argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const timeout = opts.timeoutSeconds ?? 600;
    const payload = {
      op: 'exec',
      argv,
      timeout,
      keep_bytes: opts.keepBytes ?? 1 << 20,
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      ...(opts.env ? { env: opts.env } : {}),
    };
    const what = opts.what ?? `\`${argv.join(' ').slice(0, 80)}\``;
    let res;
    try {
      const channel = this.requireChannel();
      res = await withDeadline(channel.request(payload, execReplySchema), timeout * 1000 + this.marginMs, `${what} in the sandbox`);
    } catch (err) {
      if (this.fatal || this.destroyed) {
        await this.removal;
        throw this.fatal ?? err;
      }
      const stopped = await this.stoppedReason(`running ${what}`, err);
      if (stopped) {
        await this.fail(stopped);
        throw stopped;
      }
      const reason =
        err instanceof SandboxDeadlineError
          ? new SandboxDeadlineError(`${err.message}, although it was given ${timeout} s: Lilypad's toolbox stopped answering (a process in the sandbox may have stopped it); the sandbox was removed`)
          : new SandboxBoundaryError(`Lilypad's toolbox in the sandbox died while running ${what} (${(err as Error).message}); the sandbox was removed`);
      await this.fail(reason);
      throw reason;
    }
    return {
      exitCode: res.exit_code,
      timedOut: res.timed_out,
      elapsedSeconds: res.elapsed,
      stdout: Buffer.from(res.stdout, 'base64'),
      stdoutBytes: res.stdout_bytes,
      stderr: Buffer.from(res.stderr, 'base64'),
    };
  }

  /** Disconnects every network: from here on the container reaches nothing. */
  async cutNetwork(): Promise<void> {
    const info = await withDeadline(this.container.inspect(), CONTROL_DEADLINE_MS, 'inspecting the sandbox');
    for (const name of Object.keys(info.NetworkSettings.Networks ?? {})) {
      if (name === 'none') continue;
      await withDeadline(this.docker.getNetwork(name).disconnect({ Container: this.container.id, Force: true }), CONTROL_DEADLINE_MS, `disconnecting the sandbox from ${name}`);
    }
    const after = await withDeadline(this.container.inspect(), CONTROL_DEADLINE_MS, 'inspecting the sandbox');
    const left = Object.keys(after.NetworkSettings.Networks ?? {}).filter((n) => n !== 'none');
    if (left.length > 0) throw new SandboxError(`could not cut the sandbox's network (still on ${left.join(', ')})`);
  }

  /** Without a storage quota, measures the container's writable layer and ends the run past the cap. */
  private watchDisk(diskMb: number): void {
    const limit = diskMb * 1024 * 1024;
    let busy = false;
    this.diskTimer = setInterval(() => {
      if (busy || this.destroyed) return;
      busy = true;
      withDeadline(this.container.inspect(WITH_SIZE), CONTROL_DEADLINE_MS, 'measuring the sandbox disk')
        .then((info) => {
          const used = (info as unknown as { SizeRw?: number }).SizeRw ?? 0;
          if (used > limit) {
            void this.fail(new SandboxLimitError(`the sandbox wrote more than ${diskMb} MiB to its disk (LILYPAD_SANDBOX_DISK_MB); it was removed`));
          }
        })
        .catch(() => undefined)
        .finally(() => (busy = false));
    }, this.options.diskCheckMs ?? DEFAULT_DISK_CHECK_MS);
    this.diskTimer.unref();
  }

  /**
   * Why the container is not running any more, or undefined while it runs. Out of memory is the
   * sandbox's own doing (under gVisor one process past LILYPAD_SANDBOX_MEMORY_MB ends the whole
   * sandbox: the host kills its kernel), not lost infrastructure to retry elsewhere.
   */
  private async stoppedReason(what: string, err: unknown): Promise<SandboxError | undefined> {
    const info = await withDeadline(this.container.inspect(), CONTROL_DEADLINE_MS, 'inspecting the sandbox').catch(() => undefined);
    if (info?.State.Running === true) return undefined;
    if (info?.State.OOMKilled === true) {
      return new SandboxLimitError(`the sandbox ran out of memory (LILYPAD_SANDBOX_MEMORY_MB=${this.options.memoryMb}) while ${what}; it was removed`);
    }
    // The engine lost the container (a restart, an OOM of the engine): infrastructure, retried.
    return new SandboxLostError(`the sandbox container stopped or disappeared while ${what} (${(err as Error).message})`);
  }

  private async running(): Promise<boolean> {
    return withDeadline(this.container.inspect(), CONTROL_DEADLINE_MS, 'inspecting the sandbox').then(
      (info) => info.State.Running === true,
      () => false,
    );
  }

  /** Why Lilypad removed this sandbox itself, if it did. */
  get failure(): SandboxError | undefined {
    return this.fatal;
  }

  /** Removes the container (idempotent, never throws; later calls wait for the same removal). */
  destroy(): Promise<void> {
    this.destroyed = true;
    clearInterval(this.diskTimer);
    this.removal ??= this.remove().finally(sandboxClosed);
    return this.removal;
  }

  private async remove(): Promise<void> {
    this.channel?.close();
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await withDeadline(this.container.remove({ force: true, v: true }), CONTROL_DEADLINE_MS, 'removing the sandbox');
        return;
      } catch (err) {
        const status = (err as { statusCode?: number }).statusCode;
        // 404: already gone; 409: a removal is already in progress.
        if (status === 404 || status === 409) return;
      }
    }
  }
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** Removes every container carrying the given label value (orphans of a crashed run or worker). */
export async function removeLabelled(docker: Docker, label: string, value: string): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${label}=${value}`] } });
  await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined)));
  return list.length;
}
