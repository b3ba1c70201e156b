import type { z } from 'zod';
import type { AgentIdentity } from './agent-identity.ts';
import { SandboxError, SandboxImageError } from './errors.ts';
import type { helloSchema } from './protocol.ts';

/** The toolbox started but is not the agent, or not out of the agent's reach: nothing of it is used. */
export class ToolboxIdentityError extends SandboxError {
  override name = 'ToolboxIdentityError';
}

/**
 * Checks what a fresh toolbox says about itself before the host trusts a byte of it: it acts as
 * exactly the agent (so files it writes and processes it starts are the agent's), it is out of the
 * agent's reach (real and saved uid not the agent's, non-dumpable) and holds no capability.
 */
export function checkToolboxHello(hello: z.infer<typeof helloSchema>, identity: AgentIdentity, image: string): void {
  if (hello.identity_error !== null) {
    throw new ToolboxIdentityError(
      `Lilypad's toolbox could not take the agent's user (${hello.identity_error}). The sandbox container gives uid 0 CAP_SETUID and CAP_SETGID for this ` +
        '(the agent never holds them); a Docker engine or runtime that refuses them cannot run Lilypad sandboxes: check `docker info` and LILYPAD_SANDBOX_RUNTIME.',
    );
  }
  if (!hello.nondumpable) {
    throw new SandboxImageError(
      `python3 ${hello.python} in the sandbox image ${image} cannot make Lilypad's toolbox private (prctl through ctypes failed), ` +
        "so the agent's processes could tamper with it. Use an image whose python3 has ctypes.",
    );
  }
  const acts = hello.uid === identity.uid && hello.gid === identity.gid && sameIds(hello.groups, identity.groups);
  const apart = hello.real_uid !== identity.uid && hello.saved_uid !== identity.uid;
  if (!acts || !apart || hello.capabilities !== 0) {
    const seen = `real uid ${hello.real_uid}, effective ${hello.uid}, saved ${hello.saved_uid}, gid ${hello.gid}, groups ${hello.groups.join(',')}, capabilities ${hello.capabilities}`;
    throw new ToolboxIdentityError(`Lilypad's toolbox did not take the agent's user as it must (${seen}; the agent is uid ${identity.uid}, gid ${identity.gid}); the sandbox was removed`);
  }
}

function sameIds(a: number[], b: number[]): boolean {
  const x = [...a].sort((p, q) => p - q);
  const y = [...b].sort((p, q) => p - q);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}
