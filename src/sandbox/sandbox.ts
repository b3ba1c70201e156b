import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import Docker from 'dockerode';
import { ToolboxChannel } from './channel.ts';
import { CancelledError, SandboxError, reasonText } from './errors.ts';

const TOOLBOX_SOURCE = readFileSync(new URL('./toolbox.py', import.meta.url), 'utf8');
const TOOLBOX_BOOTSTRAP = 'import sys,json;exec(compile(json.loads(sys.stdin.buffer.readline()),"lilypad-toolbox","exec"))';
// Started through a link named for Lilypad, so that an agent's `pkill python` or `pkill -f python`
// does not take the toolbox down with the project's processes.
const TOOLBOX_LAUNCH = [
  '/bin/sh',
  '-c',
  'p=$(command -v python3) || { echo "python3 not found" >&2; exit 127; }; ' +
    'if ln -sf "$p" /tmp/.lilypad-toolbox 2>/dev/null; then exec /tmp/.lilypad-toolbox -u -c "$0"; fi; exec "$p" -u -c "$0"',
  TOOLBOX_BOOTSTRAP,
];
const FILE_TOOL_DEADLINE_MS = 120_000;
const BASH_DEADLINE_MARGIN_MS = 30_000;

export const LABEL_MANAGED = 'dev.lilypad.managed';
export const LABEL_RUN = 'dev.lilypad.run';
export const LABEL_WORKER = 'dev.lilypad.worker';

export interface SandboxOptions {
  image: string;
  /** The repository's path inside the container (the model saw /testbed in its evaluation). */
  workdir: string;
  /** Container user; undefined keeps the image's own USER. */
  user?: string | undefined;
  memoryMb: number;
  cpus: number;
  pids: number;
  /**
   * Docker network name: 'none' for the agent phase; a per-run internal network with the egress
   * proxy only while setup commands run, then cutNetwork().
   */
  network: string;
  runId: string;
  workerId: string;
  labels?: Record<string, string>;
}

export interface ToolResult {
  observation: string;
  meta: { capped?: boolean; timed_out?: boolean; timeout?: number; error?: boolean; unknown?: boolean; interrupted?: boolean };
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

export function createDockerClient(): Docker {
  // dockerode reads DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH itself.
  return new Docker();
}

/**
 * One hardened container for one run: no network in the agent phase, all capabilities dropped,
 * no-new-privileges, memory/CPU/pids limits, labelled with its run and worker so that orphans can
 * always be found. Nothing from the host's environment is passed in.
 */
export class Sandbox {
  private destroyed = false;
  private toolboxPid = 0;
  /** How often the toolbox had to be restarted during this run. */
  recoveries = 0;
  private removal: Promise<void> | undefined;
  private channel: ToolboxChannel | undefined;
  private uid = 0;
  private gid = 0;

  private constructor(
    readonly docker: Docker,
    readonly container: Docker.Container,
    readonly options: SandboxOptions,
  ) {}

  get id(): string {
    return this.container.id;
  }

  static async create(docker: Docker, options: SandboxOptions, signal?: AbortSignal): Promise<Sandbox> {
    if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
    const labels = { ...options.labels, [LABEL_MANAGED]: 'true', [LABEL_RUN]: options.runId, [LABEL_WORKER]: options.workerId };
    let container: Docker.Container;
    let agentUser: string | undefined;
    try {
      // The container's own init and sleep run as uid 0 (with no capabilities), the agent and the
      // toolbox as the image's user: the agent cannot kill the container from inside.
      agentUser = options.user ?? ((await docker.getImage(options.image).inspect()).Config?.User || undefined);
      container = await docker.createContainer({
        name: `lilypad-${options.runId}`,
        Image: options.image,
        Entrypoint: ['sleep'],
        Cmd: ['infinity'],
        WorkingDir: '/',
        Env: [],
        Labels: labels,
        User: '0:0',
        NetworkDisabled: false,
        HostConfig: {
          NetworkMode: options.network,
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges'],
          Memory: options.memoryMb * 1024 * 1024,
          MemorySwap: options.memoryMb * 1024 * 1024,
          NanoCpus: Math.round(options.cpus * 1e9),
          PidsLimit: options.pids,
          Init: true,
          Privileged: false,
          AutoRemove: false,
        },
      });
    } catch (err) {
      throw describeDockerError(err, options.image);
    }
    const sandbox = new Sandbox(docker, container, { ...options, user: agentUser });
    const onAbort = () => void sandbox.destroy();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await container.start();
      const hello = await sandbox.openToolbox().catch((err: unknown) => {
        throw new SandboxError(
          `could not start Lilypad's toolbox in image ${options.image}: ${(err as Error).message}. ` +
            'The sandbox image needs python3 (3.6 or newer) on its PATH; build the default image with `npm run images`.',
        );
      });
      sandbox.uid = Number(hello['uid']);
      sandbox.gid = Number(hello['gid']);
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

  /** Starts the toolbox process over one exec and returns its hello (uid, gid, pid). */
  private async openToolbox(): Promise<Record<string, unknown>> {
    this.channel = await ToolboxChannel.open(this.docker, this.container, {
      argv: TOOLBOX_LAUNCH,
      env: [`LILYPAD_REPO_DIR=${this.options.workdir}`],
      user: this.options.user ?? '0:0',
    });
    // The toolbox source travels as the first stdin line: no file to plant in the container,
    // and the process list the model can see stays short.
    this.channel.send(JSON.stringify(TOOLBOX_SOURCE));
    const hello = await this.channel.request({ op: 'hello' });
    this.toolboxPid = Number(hello['pid']);
    return hello;
  }

  /**
   * The agent can kill the toolbox (`kill -9 -1`, a stray pkill) or wedge it (reading a pipe).
   * While the container lives, that costs one tool call, not the run: start a new toolbox.
   */
  private async recover(): Promise<boolean> {
    if (this.destroyed) return false;
    const state = await this.container.inspect().then((i) => i.State.Running, () => false);
    if (!state || this.destroyed) return false;
    this.channel?.close();
    try {
      await this.openToolbox();
      this.recoveries++;
      return true;
    } catch {
      return false;
    }
  }

  /** Times a toolbox request out on the host too: a wedged toolbox is killed and replaced. */
  private async requestWithDeadline(payload: Record<string, unknown>, deadlineMs: number): Promise<Record<string, unknown> | 'timeout'> {
    const channel = this.requireChannel();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), deadlineMs)));
    try {
      const res = await Promise.race([channel.request(payload), deadline]);
      if (res === 'timeout') {
        await this.killToolbox();
        channel.close();
      }
      return res;
    } finally {
      clearTimeout(timer);
    }
  }

  private async killToolbox(): Promise<void> {
    if (!this.toolboxPid) return;
    try {
      const exec = await this.container.exec({ Cmd: ['kill', '-9', String(this.toolboxPid)], AttachStdout: false, AttachStderr: false, User: this.options.user ?? '0:0' });
      await exec.start({ Detach: true });
    } catch {
      /* the container is gone: nothing to kill */
    }
  }

  /** Destroys the container as soon as `signal` aborts; returns a function that stops listening. */
  destroyOnAbort(signal: AbortSignal | undefined): () => void {
    if (!signal) return () => {};
    const onAbort = () => void this.destroy();
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    return () => signal.removeEventListener('abort', onAbort);
  }

  private requireChannel(): ToolboxChannel {
    if (this.destroyed || !this.channel) throw new SandboxError('the sandbox has been removed');
    return this.channel;
  }

  /** Copies a host directory in as the repository (owned by the container user). */
  async copyIn(hostDir: string): Promise<void> {
    this.requireChannel();
    const name = path.posix.basename(this.options.workdir).replace(/[,\\&]/g, '\\$&');
    const tar = spawn(
      'tar',
      ['-C', hostDir, '-cf', '-', `--owner=${this.uid}`, `--group=${this.gid}`, '--numeric-owner', `--transform=s,^\\.,${name},S`, '.'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    tar.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number>((resolve) => tar.on('close', (code) => resolve(code ?? -1)));
    try {
      await this.container.putArchive(tar.stdout, { path: path.posix.dirname(this.options.workdir) });
    } catch (err) {
      tar.kill();
      throw new SandboxError(`copying the repository into the sandbox failed: ${(err as Error).message}`, { cause: err });
    }
    const code = await exited;
    if (code !== 0) throw new SandboxError(`tar of ${hostDir} failed (exit ${code}): ${stderr.trim()}`);
  }

  /** Runs one of the model's tool calls inside the container and returns its exact observation. */
  async tool(name: string, rawArguments: string, bashCapSeconds: number): Promise<ToolResult> {
    const deadlineMs = name === 'Bash' ? bashCapSeconds * 1000 + BASH_DEADLINE_MARGIN_MS : FILE_TOOL_DEADLINE_MS;
    let res: Record<string, unknown> | 'timeout';
    try {
      res = await this.requestWithDeadline({ op: 'tool', name, arguments: rawArguments, bash_cap: bashCapSeconds }, deadlineMs);
    } catch (err) {
      // The call killed the toolbox (e.g. `kill -9 -1`): report it like a killed command.
      if (!(await this.recover())) throw err;
      const observation = name === 'Bash' ? 'Exit code: -9\nSTDOUT:\n\nSTDERR:\n' : `OSError: the ${name} call was interrupted`;
      return { observation, meta: { error: true, interrupted: true }, elapsed: 0 };
    }
    if (res === 'timeout') {
      if (!(await this.recover())) throw new SandboxError(`a ${name} call did not return within ${Math.round(deadlineMs / 1000)} s and the sandbox could not be recovered`);
      const observation = name === 'Bash' ? `Timed out after ${(deadlineMs / 1000).toFixed(1)}s\nSTDOUT:\n\nSTDERR:\n` : `TimeoutError: the ${name} call did not finish within ${deadlineMs / 1000} seconds`;
      return { observation, meta: { error: true, interrupted: true }, elapsed: deadlineMs / 1000 };
    }
    return {
      observation: String(res['observation']),
      meta: (res['meta'] ?? {}) as ToolResult['meta'],
      elapsed: Number(res['elapsed'] ?? 0),
    };
  }

  /** Runs a command for Lilypad itself (tests, patch extraction); binary-safe, not shown to the model. */
  async exec(argv: string[], opts: { timeoutSeconds?: number; keepBytes?: number; cwd?: string; env?: Record<string, string> } = {}): Promise<ExecResult> {
    const payload = {
      op: 'exec',
      argv,
      timeout: opts.timeoutSeconds ?? 600,
      keep_bytes: opts.keepBytes ?? 1 << 20,
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      ...(opts.env ? { env: opts.env } : {}),
    };
    let res: Record<string, unknown>;
    try {
      res = await this.requireChannel().request(payload);
    } catch (err) {
      // A toolbox the agent killed is replaced once, so the patch and the tests can still be taken.
      if (!(await this.recover())) throw err;
      res = await this.requireChannel().request(payload);
    }
    return {
      exitCode: typeof res['exit_code'] === 'number' ? res['exit_code'] : null,
      timedOut: res['timed_out'] === true,
      elapsedSeconds: Number(res['elapsed'] ?? 0),
      stdout: Buffer.from(String(res['stdout'] ?? ''), 'base64'),
      stdoutBytes: Number(res['stdout_bytes'] ?? 0),
      stderr: Buffer.from(String(res['stderr'] ?? ''), 'base64'),
    };
  }

  /** Kills every process the agent left running (the container's own init is spared). */
  async reap(): Promise<number> {
    const res = await this.requireChannel().request({ op: 'reap' });
    return Number(res['killed'] ?? 0);
  }

  /** Disconnects every network: from here on the container reaches nothing. */
  async cutNetwork(): Promise<void> {
    const info = await this.container.inspect();
    for (const name of Object.keys(info.NetworkSettings.Networks ?? {})) {
      await this.docker.getNetwork(name).disconnect({ Container: this.container.id, Force: true });
    }
    const after = await this.container.inspect();
    const left = Object.keys(after.NetworkSettings.Networks ?? {}).filter((n) => n !== 'none');
    if (left.length > 0) throw new SandboxError(`could not cut the sandbox's network (still on ${left.join(', ')})`);
  }

  /** Removes the container (idempotent, never throws; later calls wait for the same removal). */
  destroy(): Promise<void> {
    this.destroyed = true;
    this.removal ??= this.remove();
    return this.removal;
  }

  private async remove(): Promise<void> {
    this.channel?.close();
    try {
      await this.container.remove({ force: true, v: true });
    } catch (err) {
      const status = (err as { statusCode?: number }).statusCode;
      if (status !== 404 && status !== 409) {
        // 409: removal already in progress. Anything else: try once more before giving up.
        await this.container.remove({ force: true, v: true }).catch(() => undefined);
      }
    }
  }
}

/** Removes every container carrying the given label value (orphans of a crashed run or worker). */
export async function removeLabelled(docker: Docker, label: string, value: string): Promise<number> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${label}=${value}`] } });
  await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined)));
  return list.length;
}

function describeDockerError(err: unknown, image: string): Error {
  const e = err as { statusCode?: number; message?: string; code?: string };
  if (e.statusCode === 404 && /image/i.test(e.message ?? '')) {
    return new SandboxError(
      `the sandbox image ${image} is not present on the Docker engine. Build the default one with \`npm run images\`, ` +
        'or set LILYPAD_SANDBOX_IMAGE to an image you have.',
      { cause: err },
    );
  }
  if (e.code === 'ENOENT' || e.code === 'ECONNREFUSED' || e.code === 'EACCES') {
    return new SandboxError(
      `cannot reach the Docker engine (${e.code}). Start it (e.g. \`dockerd &\` or \`systemctl start docker\`) or point DOCKER_HOST at it.`,
      { cause: err },
    );
  }
  return new SandboxError(`creating the sandbox container failed: ${e.message ?? String(err)}`, { cause: err });
}
