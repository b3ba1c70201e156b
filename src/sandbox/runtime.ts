import Docker from 'dockerode';
import { z } from 'zod';
import { ConfigError } from '../config/env.ts';

/**
 * LILYPAD_SANDBOX_RUNTIME: the OCI runtime the Docker engine runs sandboxes under (runc, runsc for
 * gVisor, or any other name the engine has registered). Unset keeps the engine's default.
 *
 * The runtime belongs to the engine connection: checkSandboxRuntime() asks the engine once, at the
 * start of a command, and binds the checked name to that client, so every container made through
 * it for a repository's code (sandboxes, and the registry discovery that runs the sandbox image)
 * gets it without each caller threading it through. A name the engine does not have stops the
 * command before any container is made or any model request is sent.
 */
export const RUNTIME_VAR = 'LILYPAD_SANDBOX_RUNTIME';

/** How runtime names look in `docker info` (and in daemon.json's `runtimes`). */
export const RUNTIME_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** The parsed settings (Env) or the raw environment (tests, benches). */
export type RuntimeEnv = { readonly [RUNTIME_VAR]?: string | undefined } | NodeJS.ProcessEnv;

const bound = new WeakMap<Docker, { name: string; gvisor: boolean }>();
const DOCKER_CALL_MS = 30_000;

const infoSchema = z.object({
  Runtimes: z.record(z.string(), z.unknown()).nullish(),
  DefaultRuntime: z.string().nullish(),
});

/** The runtime checkSandboxRuntime() bound to this client; undefined: the engine's default. */
export function sandboxRuntimeOf(docker: Docker): string | undefined {
  return bound.get(docker)?.name;
}

/**
 * Whether containers under `runtime` run on gVisor: the engine's entry for it points at runsc (as
 * checkSandboxRuntime() saw it), or, for a runtime the client was not checked for, its name says so.
 * gVisor's processes are the sentry's tasks, not the host's: limits on them are set differently.
 */
export function isGvisor(docker: Docker, runtime: string | undefined): boolean {
  if (runtime === undefined) return false;
  const known = bound.get(docker);
  if (known?.name === runtime) return known.gvisor;
  return /runsc|gvisor/i.test(runtime);
}

export interface EngineRuntimes {
  /** Every runtime name `docker info` lists. */
  available: string[];
  /** The binary behind each runtime, where the engine says. */
  paths: Record<string, string>;
  /** The engine's default runtime (usually runc). */
  defaultRuntime: string;
}

/** The runtimes the engine has, as `docker info` lists them. */
export async function engineRuntimes(docker: Docker): Promise<EngineRuntimes> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the engine did not answer within ${DOCKER_CALL_MS / 1000} s`)), DOCKER_CALL_MS);
  });
  const raw: unknown = await Promise.race([docker.info() as Promise<unknown>, late]).finally(() => clearTimeout(timer));
  const info = infoSchema.parse(raw);
  const paths: Record<string, string> = {};
  for (const [name, entry] of Object.entries(info.Runtimes ?? {})) {
    const path = (entry as { path?: unknown } | null)?.path;
    if (typeof path === 'string') paths[name] = path;
  }
  return { available: Object.keys(info.Runtimes ?? {}).sort(), paths, defaultRuntime: info.DefaultRuntime ?? 'runc' };
}

/**
 * Checks LILYPAD_SANDBOX_RUNTIME against the engine's runtimes and binds it to `docker`.
 * Returns the runtime (undefined when unset: the engine's default, and no engine call is made).
 * Throws a ConfigError naming the setting when the name is malformed, the engine cannot be asked,
 * or it has no such runtime.
 */
export async function checkSandboxRuntime(docker: Docker, env: RuntimeEnv): Promise<string | undefined> {
  const name = env[RUNTIME_VAR]?.trim() || undefined;
  if (name === undefined) {
    bound.delete(docker);
    return undefined;
  }
  if (!RUNTIME_NAME_RE.test(name)) {
    throw new ConfigError(`${RUNTIME_VAR}=${JSON.stringify(name)} is not a runtime name; give one that \`docker info\` lists under Runtimes (e.g. runc, or runsc for gVisor), or leave it empty for the engine's default`);
  }
  let runtimes: EngineRuntimes;
  try {
    runtimes = await engineRuntimes(docker);
  } catch (err) {
    throw new ConfigError(
      `${RUNTIME_VAR}=${name}: cannot ask the Docker engine which runtimes it has (${(err as Error).message}); start the engine (\`dockerd &\` or \`systemctl start docker\`) or point DOCKER_HOST at it`,
      { cause: err },
    );
  }
  if (!runtimes.available.includes(name)) throw new ConfigError(missingRuntimeMessage(name, runtimes));
  bound.set(docker, { name, gvisor: /(^|\/)runsc[^/]*$/.test(runtimes.paths[name] ?? name) });
  return name;
}

function missingRuntimeMessage(name: string, runtimes: EngineRuntimes): string {
  const has = runtimes.available.length > 0 ? runtimes.available.join(', ') : 'none listed';
  const register =
    name === 'runsc'
      ? 'register gVisor with it (`bash scripts/setup-runsc.sh` installs runsc and adds it to /etc/docker/daemon.json; or add "runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=host"]}} yourself and send dockerd SIGHUP)'
      : `register it under "runtimes" in /etc/docker/daemon.json and send dockerd SIGHUP`;
  return `${RUNTIME_VAR}=${name}: the Docker engine has no runtime named ${name} (it has ${has}; default ${runtimes.defaultRuntime}). Either ${register}, or unset ${RUNTIME_VAR} to run sandboxes under the engine's default`;
}

/**
 * A Docker client for a command that creates sandboxes, with LILYPAD_SANDBOX_RUNTIME checked and
 * bound (dockerode reads DOCKER_HOST and the TLS variables itself). Throws the ConfigError of
 * checkSandboxRuntime(), so call it before the first model request or container.
 */
export async function dockerForSandboxes(env: RuntimeEnv): Promise<Docker> {
  const docker = new Docker();
  await checkSandboxRuntime(docker, env);
  return docker;
}

/** What `lilypad doctor` prints for the runtime (the same shape as its other checks). */
export interface RuntimeDoctorResult {
  name: string;
  status: 'OK' | 'WARN' | 'FAIL';
  detail: string;
  fix?: string;
}

/**
 * The doctor's check: which runtime sandboxes will run under, and whether the engine has it.
 * On success the runtime is bound to `docker`, so the doctor's sandbox check then runs under it.
 */
export async function sandboxRuntimeCheck(docker: Docker, env: RuntimeEnv): Promise<RuntimeDoctorResult> {
  const check = 'sandbox runtime';
  try {
    const runtime = await checkSandboxRuntime(docker, env);
    if (runtime === undefined) {
      const engine = await engineRuntimes(docker).catch(() => undefined);
      return { name: check, status: 'OK', detail: `the engine's default${engine ? ` (${engine.defaultRuntime})` : ''}; ${RUNTIME_VAR} is not set` };
    }
    return { name: check, status: 'OK', detail: `${runtime} (${RUNTIME_VAR}), registered with the engine` };
  } catch (err) {
    const name = env[RUNTIME_VAR]?.trim() ?? '';
    const fix =
      name === 'runsc'
        ? `run \`bash scripts/setup-runsc.sh\` as root on the engine's machine, or unset ${RUNTIME_VAR}`
        : `register ${name || 'the runtime'} under "runtimes" in /etc/docker/daemon.json and send dockerd SIGHUP, or unset ${RUNTIME_VAR}`;
    return { name: check, status: 'FAIL', detail: (err as Error).message, fix };
  }
}

/**
 * Host threads the pids backstop allows per sandbox process under gVisor, and for the sentry
 * itself. Measured on the ptrace platform: an idle sandbox holds 54 host tasks; a fork bomb capped
 * at 128 processes peaked at 1556 to 2148 host tasks in 12 runs on a quiet 2-core machine, at 1986
 * to 3463 in 8 runs with four busy loops beside it, and at 6163 in a CI run (48 per process). A
 * sentry that cannot make a thread ends the whole sandbox (runsc exits 2), as a backstop of 16 per
 * process plus 512 (2560) did in CI. The sentry's Go runtime stops at 10000 threads of its own in
 * any case; 64 per process plus 2048 is 10240 for the fault suite's 128 processes, just above it.
 */
const GVISOR_HOST_THREADS_PER_TASK = 64;
const GVISOR_SENTRY_THREADS = 2048;

/** Docker's pids limit for a container whose processes are capped at `pids`: under gVisor only a backstop. */
export function hostPidsLimit(pids: number, gvisor: boolean): number {
  return gvisor ? pids * GVISOR_HOST_THREADS_PER_TASK + GVISOR_SENTRY_THREADS : pids;
}

/**
 * The doctor's check of the pids backstop under gVisor against the host's pid space: every
 * sandbox a worker runs at once may reach its backstop, and past `kernel.pid_max` the host itself
 * runs out of process ids. Undefined when the sandboxes do not run under gVisor.
 */
export function gvisorPidsCheck(input: { gvisor: boolean; pids: number; concurrency: number; pidMax: number | undefined }): RuntimeDoctorResult | undefined {
  if (!input.gvisor) return undefined;
  const check = 'gVisor process limit';
  const each = hostPidsLimit(input.pids, true);
  const total = each * input.concurrency;
  const detail = `LILYPAD_SANDBOX_PIDS=${input.pids} allows up to ${each} host threads per sandbox under gVisor (${GVISOR_HOST_THREADS_PER_TASK} per process plus ${GVISOR_SENTRY_THREADS}), ${total} for ${input.concurrency} sandbox(es) at once (LILYPAD_WORKER_CONCURRENCY)`;
  if (input.pidMax === undefined) return { name: check, status: 'OK', detail: `${detail}; this machine's kernel.pid_max could not be read` };
  if (total <= input.pidMax) return { name: check, status: 'OK', detail: `${detail}, within kernel.pid_max (${input.pidMax})` };
  const fitting = Math.max(1, Math.floor((Math.floor(input.pidMax / input.concurrency) - GVISOR_SENTRY_THREADS) / GVISOR_HOST_THREADS_PER_TASK));
  return {
    name: check,
    status: 'WARN',
    detail: `${detail}: more than this machine's kernel.pid_max (${input.pidMax}), so sandboxes at their process cap could leave the host without process ids`,
    fix: `lower LILYPAD_SANDBOX_PIDS to ${fitting} or less, or raise kernel.pid_max (sysctl -w kernel.pid_max=4194304) on the engine's machine`,
  };
}
