import type Docker from 'dockerode';
import { SandboxImageError } from './errors.ts';
import { execOnce } from './exec-once.ts';
import { identityProbeSchema } from './protocol.ts';
import { IDENTITY_PROBE_SOURCE } from './toolbox-launch.ts';

/** Who the agent is inside the sandbox, as the engine makes it for `docker exec --user`. */
export interface AgentIdentity {
  uid: number;
  gid: number;
  groups: number[];
  home: string | null;
  /** The python3 that Lilypad's own processes (toolbox, reaper) are started from as uid 0. */
  python: string;
}

const NEEDS_PYTHON = 'The sandbox image needs python3 (3.6 or newer) on its PATH; build the default image with `npm run images`.';

/**
 * Asks the engine who `user` is in this container, by running identity-probe.py as that user (once,
 * right after the container starts, before any repository file is in it). The toolbox then acts as
 * exactly these ids, so what the model sees (`id`, `ls -l`, `$HOME`) is what an exec as the user
 * shows. Refuses an image whose user is uid 0, or whose python3 the user could replace.
 */
export async function probeAgentIdentity(container: Docker.Container, opts: { user: string; image: string; timeoutMs: number }): Promise<AgentIdentity> {
  const res = await execOnce(container, { argv: ['python3', '-I', '-S', '-c', IDENTITY_PROBE_SOURCE], user: opts.user, timeoutMs: opts.timeoutMs, maxBytes: 64 * 1024 });
  const line = res.stdout.toString('utf8').trim().split('\n').at(-1) ?? '';
  const parsed = identityProbeSchema.safeParse(safeJson(line));
  if (!parsed.success) {
    const why = res.stderr.toString('utf8').trim().split('\n').slice(-3).join(' | ') || `exit ${res.exitCode}`;
    throw new SandboxImageError(`could not start Lilypad's toolbox in image ${opts.image}: python3 did not run as ${opts.user} (${why}). ${NEEDS_PYTHON}`);
  }
  const probe = parsed.data;
  const [major, minor] = probe.version;
  if (major < 3 || (major === 3 && minor < 6)) {
    throw new SandboxImageError(`could not start Lilypad's toolbox in image ${opts.image}: its python3 is ${major}.${minor}. ${NEEDS_PYTHON}`);
  }
  if (probe.uid === 0) {
    throw new SandboxImageError(
      `the sandbox image ${opts.image} runs the agent as root (user ${opts.user || '(unset)'} is uid 0). ` +
        'Set USER in the image to an unprivileged user, or set LILYPAD_SANDBOX_USER to one.',
    );
  }
  if (probe.writable.length > 0) {
    throw new SandboxImageError(
      `in the sandbox image ${opts.image}, the agent's user (uid ${probe.uid}) can write ${probe.writable.slice(0, 5).join(', ')}: ` +
        `it could replace the python3 (${probe.python}) that Lilypad's toolbox runs as uid 0, or put one of its own before it on PATH. ` +
        'Install python3 as root in a folder only root can write (the default image uses /usr/bin/python3), and keep folders the user can write after it on PATH.',
    );
  }
  return { uid: probe.uid, gid: probe.gid, groups: probe.groups, home: probe.home, python: probe.python };
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
