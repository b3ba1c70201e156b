import { SANDBOX_GIT } from './patch.ts';
import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';

// Runs in the sandbox as the agent's user: every file the old checkout's index tracks is removed
// (a directory that held only such files too), then its .git; what setup made (node_modules/,
// target/, *.egg-info, an in-tree .venv) is all that stays. A path under a symbolic link that
// setup left is not followed. Prints {"removed": n, "failed": [...]}.
const CLEAR_SCRIPT = String.raw`
import json, os, shutil, subprocess, sys
root = os.fsencode(sys.argv[1]); git = json.loads(sys.argv[2])
os.chdir(root)
real_root = os.path.realpath(root)
paths, failed, dirs = [], [], set()
if os.path.lexists(b".git"):
    out = subprocess.run(git + ["ls-files", "-z"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if out.returncode != 0:
        print(json.dumps({"removed": 0, "failed": ["git ls-files: " + out.stderr.decode("utf-8", "replace").strip()[-300:]]})); sys.exit(0)
    paths = [p for p in out.stdout.split(b"\0") if p]
removed = 0
for p in paths:
    full = os.path.join(root, p)
    if os.path.realpath(os.path.dirname(full)) != os.path.normpath(os.path.join(real_root, os.path.dirname(p))):
        continue
    try:
        if os.path.isdir(full) and not os.path.islink(full): shutil.rmtree(full)
        else: os.unlink(full)
        removed += 1
    except FileNotFoundError:
        pass
    except OSError as e:
        failed.append(p.decode("utf-8", "replace") + ": " + (e.strerror or str(e)))
    d = os.path.dirname(p)
    while d:
        dirs.add(d); d = os.path.dirname(d)
for d in sorted(dirs, key=lambda d: -d.count(b"/")):
    try: os.rmdir(d)
    except OSError: pass
try:
    if os.path.isdir(b".git") and not os.path.islink(b".git"): shutil.rmtree(b".git")
    elif os.path.lexists(b".git"): os.unlink(b".git")
except OSError as e:
    failed.append(".git: " + (e.strerror or str(e)))
print(json.dumps({"removed": removed, "failed": failed[:20]}))
`;

/**
 * On a hit, before copyIn: the kept image's worktree still holds the checkout it was made from.
 * This removes that checkout (its tracked files and .git) and keeps what setup wrote inside the
 * worktree, so that copyIn then lays the new base commit over setup's output: the sources and
 * .git are the new commit's, node_modules/ and the like are setup's. A tracked file setup had
 * changed (a rewritten lockfile) is the new commit's again; commitSetupState, run as after a
 * setup, then records what setup left untracked, so the patch still holds only the agent's work.
 * Returns how many paths were removed.
 */
export async function clearKeptWorktree(sandbox: Sandbox): Promise<number> {
  const res = await sandbox.exec(['python3', '-c', CLEAR_SCRIPT, sandbox.options.workdir, JSON.stringify(SANDBOX_GIT)], {
    cwd: '/',
    timeoutSeconds: 300,
    what: "clearing the kept environment's old checkout",
  });
  const out = res.stdout.toString('utf8').trim().split('\n').at(-1) ?? '';
  let parsed: { removed?: unknown; failed?: unknown } | undefined;
  try {
    parsed = JSON.parse(out) as { removed?: unknown; failed?: unknown };
  } catch {
    parsed = undefined;
  }
  if (res.exitCode !== 0 || !parsed || typeof parsed.removed !== 'number' || !Array.isArray(parsed.failed)) {
    throw new SandboxError(`clearing the kept environment's old checkout failed in the sandbox (exit ${res.exitCode}): ${res.stderr.toString('utf8').trim().slice(-300)}`);
  }
  if (parsed.failed.length > 0) {
    throw new SandboxError(`could not clear the kept environment's old checkout: ${parsed.failed.slice(0, 5).map(String).join('; ')}`);
  }
  return parsed.removed;
}

/** Where a kept environment holds the changes setup made to tracked files: outside the worktree. */
const SETUP_TRACKED_PATCH = '"${HOME:-/tmp}/.lilypad-setup-tracked.patch"';

/**
 * Before keeping an environment: the changes setup made to files the repository tracks (a rewritten
 * lockfile, a generated file, an appended line) are saved as a patch outside the worktree, so that a
 * hit can lay them over the new checkout (replaySetupChanges) and look the same as a setup that ran.
 */
export async function saveSetupChanges(sandbox: Sandbox): Promise<void> {
  const script = `git -c core.hooksPath=/dev/null -c core.fsmonitor=false diff --binary --no-renames HEAD > ${SETUP_TRACKED_PATCH}`;
  const res = await sandbox.exec(['/bin/sh', '-c', script], { cwd: sandbox.options.workdir, timeoutSeconds: 300 });
  if (res.exitCode !== 0) throw new SandboxError(`saving the changes setup made to tracked files failed in the sandbox: ${res.stderr.toString().trim()}`);
}

/**
 * On a hit, after copyIn: the changes setup made to tracked files, laid over the new checkout.
 * `stale`: they no longer apply (the files changed since), so the environment must be set up afresh.
 */
export async function replaySetupChanges(sandbox: Sandbox): Promise<'none' | 'applied' | 'stale'> {
  const script = `[ -s ${SETUP_TRACKED_PATCH} ] || exit 3; git -c core.hooksPath=/dev/null apply --whitespace=nowarn --binary -- ${SETUP_TRACKED_PATCH}`;
  const res = await sandbox.exec(['/bin/sh', '-c', script], { cwd: sandbox.options.workdir, timeoutSeconds: 300 });
  if (res.exitCode === 3) return 'none';
  return res.exitCode === 0 ? 'applied' : 'stale';
}
