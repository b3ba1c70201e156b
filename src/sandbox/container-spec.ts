import type Docker from 'dockerode';
import { withDeadline } from './deadline.ts';
import { SandboxError, SandboxImageError } from './errors.ts';
import { hostPidsLimit, isGvisor, sandboxRuntimeOf } from './runtime.ts';
import type { SandboxOptions } from './sandbox.ts';

const DOCKER_CALL_MS = 60_000;
/** Where an image's user is root and the administrator allowed it anyway, the agent runs as this. */
const FALLBACK_AGENT_USER = '1000:1000';

type ContainerSpecInput = Pick<SandboxOptions, 'image' | 'memoryMb' | 'cpus' | 'pids' | 'diskMb' | 'network' | 'runId' | 'runtime'> & { labels: Record<string, string> };

/** True for a user spec that means uid 0: unset, `root`, `0`, with or without a group. */
function isRootUser(user: string): boolean {
  const name = user.trim().split(':')[0] ?? '';
  return name === '' || name === 'root' || /^0+$/.test(name);
}

/**
 * The user the agent and the toolbox run as. Never uid 0: an image whose user is root (or unset)
 * is refused, unless the administrator allowed such images, in which case uid 1000 is used.
 */
export async function resolveAgentUser(docker: Docker, opts: { image: string; user?: string | undefined; allowRootImage?: boolean | undefined }): Promise<string> {
  let configured = opts.user;
  if (configured === undefined) {
    const info = await withDeadline(docker.getImage(opts.image).inspect(), DOCKER_CALL_MS, 'inspecting the sandbox image').catch((err: unknown) => {
      throw describeDockerError(err, opts.image);
    });
    configured = info.Config?.User ?? '';
  }
  if (!isRootUser(configured)) return configured;
  if (opts.allowRootImage) return FALLBACK_AGENT_USER;
  throw new SandboxImageError(
    `the sandbox image ${opts.image} would run the agent as root (its user is ${configured ? `\`${configured}\`` : 'not set'}). ` +
      'Add `USER <unprivileged user>` to the image (the default image uses uid 1000), ' +
      'or ask the Lilypad administrator to set LILYPAD_ALLOW_ROOT_IMAGES=true (the agent then runs as uid 1000).',
  );
}


/** What uid 0 keeps in the sandbox: only what it takes to become the agent. */
export const SANDBOX_CAPABILITIES = ['CAP_SETUID', 'CAP_SETGID'] as const;

/** Engines that refused a storage quota once are not asked again (overlay2 needs xfs with pquota). */
const noQuota = new WeakSet<Docker>();

/**
 * Creates the container: no capabilities but CAP_SETUID and CAP_SETGID, no-new-privileges, an init,
 * memory without extra swap, CPU, pids and file-size limits, and a storage quota where the engine
 * supports one. The container's own init and `sleep` run as uid 0, so the agent cannot stop them.
 *
 * The two capabilities are for Lilypad's toolbox and reaper: a `docker exec` cannot be given
 * capabilities of its own (the Engine API's exec has `User` and `Privileged`, no CapAdd), and with
 * every capability dropped uid 0 could not take the agent's ids. They start as uid 0, take the
 * agent's ids and give both up at once (agent-user.py). The agent never holds them: its user is
 * not uid 0 (so `docker exec --user` and the toolbox's commands start without capabilities), and
 * no-new-privileges keeps a setuid or file-capability binary from granting them.
 */
export async function createHardenedContainer(docker: Docker, input: ContainerSpecInput): Promise<{ container: Docker.Container; quota: boolean }> {
  const diskBytes = input.diskMb ? input.diskMb * 1024 * 1024 : undefined;
  const runtime = input.runtime ?? sandboxRuntimeOf(docker);
  // Under gVisor the sandbox's processes are tasks of its kernel (the sentry), each backed by
  // several host threads on the ptrace platform (9 to 16 measured), and the host's pids cgroup
  // counts those: at the configured limit the sentry cannot make a thread and the whole sandbox
  // dies. So the sentry counts processes (RLIMIT_NPROC, which it enforces per uid inside the
  // sandbox; under runc that limit would count the uid across the host) and the host's pids limit
  // is only the backstop, sized for the sentry's threads.
  const gvisor = isGvisor(docker, runtime);
  const pidsLimit = hostPidsLimit(input.pids, gvisor);
  const ulimits = [
    // RLIMIT_FSIZE is in bytes: no single file may outgrow the disk cap.
    ...(diskBytes ? [{ Name: 'fsize', Soft: diskBytes, Hard: diskBytes }] : []),
    ...(gvisor ? [{ Name: 'nproc', Soft: input.pids, Hard: input.pids }] : []),
  ];
  const spec = (quota: boolean): Docker.ContainerCreateOptions => ({
    name: `lilypad-${input.runId}`,
    Image: input.image,
    Entrypoint: ['sleep'],
    Cmd: ['infinity'],
    WorkingDir: '/',
    Env: [],
    Labels: input.labels,
    User: '0:0',
    NetworkDisabled: false,
    HostConfig: {
      NetworkMode: input.network,
      CapDrop: ['ALL'],
      CapAdd: [...SANDBOX_CAPABILITIES],
      SecurityOpt: ['no-new-privileges'],
      Memory: input.memoryMb * 1024 * 1024,
      MemorySwap: input.memoryMb * 1024 * 1024,
      NanoCpus: Math.round(input.cpus * 1e9),
      PidsLimit: pidsLimit,
      Init: true,
      Privileged: false,
      AutoRemove: false,
      // LILYPAD_SANDBOX_RUNTIME (e.g. runsc): unset keeps the engine's default runtime.
      ...(runtime ? { Runtime: runtime } : {}),
      ...(ulimits.length > 0 ? { Ulimits: ulimits } : {}),
      ...(quota && input.diskMb ? { StorageOpt: { size: `${input.diskMb}M` } } : {}),
    },
  });
  const create = (quota: boolean) => withDeadline(docker.createContainer(spec(quota)), DOCKER_CALL_MS, 'creating the sandbox container');
  const wantQuota = input.diskMb !== undefined && !noQuota.has(docker);
  try {
    return { container: await create(wantQuota), quota: wantQuota };
  } catch (err) {
    if (wantQuota && /storage-opt|pquota|quota/i.test((err as Error).message ?? '')) {
      noQuota.add(docker);
      try {
        return { container: await create(false), quota: false };
      } catch (err2) {
        throw describeDockerError(err2, input.image);
      }
    }
    throw describeDockerError(err, input.image);
  }
}

function describeDockerError(err: unknown, image: string): Error {
  if (err instanceof SandboxError) return err;
  const e = err as { statusCode?: number; message?: string; code?: string };
  if (e.statusCode === 404 && /image/i.test(e.message ?? '')) {
    return new SandboxImageError(
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
