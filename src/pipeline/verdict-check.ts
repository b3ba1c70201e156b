import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { selectTestsCommand } from '../evidence/select-tests.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { Environment } from './environment.ts';
import type { SandboxDisagreement } from './evidence-runs.ts';
import type { PublishedPatch } from './published-patch.ts';
import type { SandboxSessionInput } from './sandbox-session.ts';
import { runTests, type TestRun } from './test-command.ts';

/** Paths named in a disagreement; the rest are counted. */
const MAX_OUTSIDE = 12;
const MAX_LISTING_BYTES = 1024 * 1024;

/**
 * Whether the agent's own sandbox disagrees with the fresh one the verdict came from. The tests
 * that failed on the published change are run once more where the agent worked, its files and
 * everything it left around them as they are; those that pass there were passed by something that
 * is not in the change (a plugin in its home, a planted bytecode file, an edited installed package,
 * a login-shell line). The result never changes the verdict: it says why the verdict is not the
 * one the agent saw, and what it left outside its patch. Null: no failing test, or they fail there
 * too.
 */
export async function checkAgentSandbox(input: SandboxSessionInput, env: Environment, published: PublishedPatch, after: TestRun): Promise<SandboxDisagreement | null> {
  const command = input.testCommand;
  if (!command) return null;
  const failing = after.parsed.parsed ? after.parsed.results.filter((r) => r.outcome === 'failed' || r.outcome === 'error').map((r) => r.id) : [];
  const failedWhole = !after.parsed.parsed && after.outcome.outcome !== 'passed';
  if (failing.length === 0 && !failedWhole) return null;
  const box = env.sandbox;
  await box.takeOver();
  // Listed before the tests run there, so that nothing they write is taken for the agent's.
  const outside = await changedOutside(box, env.agentStartedAt, published.files);
  const selected = failing.length > 0 ? (selectTestsCommand(input.testRunner ?? null, command, { files: [], ids: failing }) ?? command) : command;
  const own = await runTests(box, selected, input.testRunner ?? null, input.testTimeoutSeconds);
  await box.takeOver();
  let tests: string[] = [];
  if (failing.length > 0 && own.parsed.parsed) {
    const passed = new Set(own.parsed.results.filter((r) => r.outcome === 'passed').map((r) => r.id));
    tests = failing.filter((id) => passed.has(id));
  } else if (own.outcome.outcome === 'passed') {
    tests = failing.length > 0 ? failing : ['the test command as a whole'];
  }
  if (tests.length === 0) return null;
  return { tests, command: selected, outside: outside.paths, outsideMore: outside.more };
}

/** The sentence the evidence notes carry for a disagreement. */
export function disagreementNote(d: SandboxDisagreement): string {
  const named = d.tests.slice(0, 5).join(', ') + (d.tests.length > 5 ? ` and ${d.tests.length - 5} more` : '');
  const where = d.outside.length > 0 ? ` Outside its change the agent wrote ${d.outside.join(', ')}${d.outsideMore > 0 ? ` and ${d.outsideMore} more` : ''}.` : '';
  return (
    `the agent's own sandbox disagrees: ${named} ${d.tests.length === 1 ? 'passes' : 'pass'} there but ${d.tests.length === 1 ? 'fails' : 'fail'} on the published change in a fresh sandbox, ` +
    `so something the agent left outside its change made ${d.tests.length === 1 ? 'it' : 'them'} pass there.${where} None of that is published, and the verdict is the fresh sandbox's.`
  );
}

/** Reads paths (NUL-separated) on stdin; writes back those of files and links whose status changed after argv[1]. */
const CHANGED_SINCE = [
  'import os, stat, sys',
  'since = float(sys.argv[1])',
  'out = sys.stdout.buffer',
  "for p in sys.stdin.buffer.read().split(b'\\0'):",
  '    try:',
  '        st = os.lstat(p)',
  '    except (OSError, ValueError):',
  '        continue',
  '    if (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and st.st_ctime > since:',
  "        out.write(p + b'\\0')",
].join('\n');

/**
 * Files and links whose status changed after the agent started (ctime, which no process can set
 * back), listed after the agent's processes are gone, in every place the agent's user can write in
 * Lilypad's image: its home (user site-packages, profiles, caches), the repository but its .git and
 * the published files (ignored files, bytecode), and the shared temporary folders. Only those are
 * walked: a walk of the whole filesystem took 18 s under gVisor, and the engine's own list of the
 * container's changes 4.4 s. Home is shown as `~`.
 */
async function changedOutside(box: Sandbox, since: string | null, published: string[]): Promise<{ paths: string[]; more: number }> {
  if (!since) return { paths: [], more: 0 };
  const workdir = box.options.workdir;
  const script =
    'cd / && for r in "$HOME" "$1" /tmp /var/tmp /run/lock /dev/shm; do [ -d "$r" ] && [ "$r" != / ] && printf "%s\\n" "$r"; done | sort -u | ' +
    'while IFS= read -r r; do find "$r" -xdev \\( -path "$1/.git" -o -path "/tmp/lilypad-*" \\) -prune ' +
    '-o \\( -type f -o -type l \\) ! -name .lilypad-toolbox -newerct "@$2" -print0 2>/dev/null; done; exit 0';
  const res = await box.exec(['/bin/sh', '-c', script, 'find', workdir, since], { cwd: '/', timeoutSeconds: 120, keepBytes: MAX_LISTING_BYTES });
  const mine = new Set(published.map((f) => `${workdir}/${f}`));
  const home = (await box.exec(['/bin/sh', '-c', 'printf %s "$HOME"'], { cwd: '/', timeoutSeconds: 30 })).stdout.toString();
  const paths = [...new Set(res.stdout.toString('utf8').split('\0'))]
    .filter((p) => p && !mine.has(p))
    .map((p) => (home && home !== '/' && p.startsWith(`${home}/`) ? `~${p.slice(home.length)}` : p))
    // Names the agent chose: no control character, nothing longer than a line, before they reach a pull request.
    .map((p) => p.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '?').slice(0, 200))
    // Bytecode caches Python wrote on the way say least: they go last.
    .sort((a, b) => Number(a.includes('/__pycache__/')) - Number(b.includes('/__pycache__/')) || (a < b ? -1 : a > b ? 1 : 0));
  return { paths: paths.slice(0, MAX_OUTSIDE), more: Math.max(0, paths.length - MAX_OUTSIDE) };
}
