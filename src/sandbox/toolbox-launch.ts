import { readFileSync } from 'node:fs';
import type { AgentIdentity } from './agent-identity.ts';

/**
 * How the host starts Lilypad's side of the sandbox: the toolbox and the reaper run as uid 0 over
 * their own `docker exec` (with only CAP_SETUID and CAP_SETGID, which they give up at once) and act
 * as the agent from there (agent-user.py). Both are started from the absolute python3 the identity
 * probe found out of the agent's reach, with -I -S: no PATH lookup, no user site-packages, no
 * PYTHON* variables, no .pth files, so nothing the agent can write runs as uid 0.
 */
export const ROOT_USER = '0:0';

const read = (name: string) => readFileSync(new URL(`./${name}`, import.meta.url), 'utf8');
const AGENT_USER_SOURCE = read('agent-user.py');
export const TOOLBOX_SOURCE = `${AGENT_USER_SOURCE}\n${read('toolbox.py')}`;
const REAPER_SOURCE = `${AGENT_USER_SOURCE}\n${read('reaper.py')}`;
export const IDENTITY_PROBE_SOURCE = read('identity-probe.py');

// The first statement makes the process non-dumpable, before it reads a byte from the host.
const TOOLBOX_BOOTSTRAP = [
  'import sys,json',
  'try:',
  ' import ctypes;ctypes.CDLL(None).prctl(4,0,0,0,0)',
  'except Exception:',
  ' pass',
  'exec(compile(json.loads(sys.stdin.buffer.readline()),"lilypad-toolbox","exec"))',
].join('\n');

/**
 * Started through a link named for Lilypad, so that an agent's `pkill python` or `pkill -f python`
 * does not even try the toolbox (it would print "Operation not permitted"). The link sits beside
 * the interpreter, in a directory the agent cannot write: Python looks for a pyvenv.cfg beside the
 * path it was started as and one directory up, and one the agent planted (in /tmp, say) would
 * hand it the standard library of a uid-0 process. Where the link cannot be made, the interpreter
 * is started as it is.
 */
export function toolboxLaunchArgv(python: string): string[] {
  const script =
    'p=$1; l=${p%/*}/.lilypad-toolbox; ' +
    'if ln -sf "$p" "$l" 2>/dev/null; then exec "$l" -u -I -S -c "$0"; fi; ' +
    'exec "$p" -u -I -S -c "$0"';
  return ['/bin/sh', '-c', script, TOOLBOX_BOOTSTRAP, python];
}

export function reaperArgv(python: string): string[] {
  return [python, '-I', '-S', '-c', REAPER_SOURCE];
}

/** LILYPAD_AGENT_IDS for agent-user.py: `uid:gid:g1,g2`. */
export function agentIdsEnv(identity: AgentIdentity): string {
  return `LILYPAD_AGENT_IDS=${identity.uid}:${identity.gid}:${identity.groups.join(',')}`;
}

/** The toolbox's environment: the agent's HOME (a uid-0 exec would get root's), the repository, the ids. */
export function toolboxEnv(identity: AgentIdentity, workdir: string): string[] {
  return [`LILYPAD_REPO_DIR=${workdir}`, ...(identity.home !== null ? [`HOME=${identity.home}`] : []), agentIdsEnv(identity)];
}
