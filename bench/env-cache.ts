// Kept environments: what keeping one costs and what a hit saves, on realistic setups.
//   node:   Lilypad's own package.json and package-lock.json (194 packages), `npm ci --offline`
//           from this machine's npm cache, copied into the sandbox's ~/.npm beforehand as a stand-in
//           for the registry (no registry is reached; a real download only makes setup longer);
//   python: a virtual environment with an editable install (setup.py develop) of a small package, from the
//           wheels Debian ships (/usr/share/python-wheels), no index.
// Per scenario: a fresh start (sandbox, copy in, setup), keeping it (docker commit, then the load
// that re-makes the image around the layer; a bare commit of the same container for comparison),
// the size of its own layer, and a start from it (claim, sandbox from the kept image, clearing the
// old checkout, copy in), checked by using what setup installed. Run: `npx tsx bench/env-cache.ts`.
// BENCH_NPM_CACHE (default ~/.npm) is the npm cache to use; without one the node scenario is skipped.
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runTestCommand } from '../src/pipeline/test-command.ts';
import { formatBytes } from '../src/sandbox/env-cache/index.ts';
import { clearKeptWorktree } from '../src/workspace/kept-worktree.ts';
import { dockerForSandboxes } from '../src/sandbox/runtime.ts';
import type { Sandbox } from '../src/sandbox/sandbox.ts';
import { keyFor, newCache, removeOwnerImages, sh, startSandbox, testOwner } from '../test/support/env-cache-harness.ts';
import { makeRepo } from '../test/support/fixture-repo.ts';
import { TEST_IMAGE } from '../test/support/sandbox-harness.ts';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const npmCache = process.env['BENCH_NPM_CACHE'] ?? path.join(os.homedir(), '.npm');

interface Scenario {
  name: string;
  files: Record<string, string>;
  /** Copied into the sandbox's worktree after the checkout and moved out of it by `prepare` (not timed: it stands in for downloads). */
  extra?: { from: string; to: string };
  prepare?: string;
  setup: string[];
  check: string;
}

const scenarios: Scenario[] = [
  {
    name: 'python venv + editable install',
    files: {
      'pyproject.toml': '[project]\nname = "demo"\nversion = "0.1.0"\n',
      'setup.py': 'from setuptools import setup\nsetup()\n',
      'src/demo/__init__.py': 'VALUE = 1\n',
      '.gitignore': '*.egg-info/\n',
    },
    setup: [
      'python3 -m venv "$HOME/.lilypad-venv"',
      '"$HOME/.lilypad-venv/bin/pip" install -q --no-index --find-links /usr/share/python-wheels --upgrade pip setuptools',
      '"$HOME/.lilypad-venv/bin/pip" install -q --no-index --find-links /usr/share/python-wheels --no-build-isolation --no-use-pep517 -e .',
    ],
    check: '"$HOME/.lilypad-venv/bin/python" -c "import demo; print(demo.VALUE)"',
  },
  ...(existsSync(path.join(npmCache, '_cacache'))
    ? [
        {
          name: 'npm ci (194 packages)',
          files: {
            'package.json': readText(path.join(root, 'package.json')),
            'package-lock.json': readText(path.join(root, 'package-lock.json')),
            '.gitignore': 'node_modules/\n',
          },
          extra: { from: path.join(npmCache, '_cacache'), to: '.bench-npm-cache/_cacache' },
          prepare: 'rm -rf "$HOME/.npm" && mv .bench-npm-cache "$HOME/.npm"',
          setup: ['npm ci --offline --ignore-scripts --no-audit --no-fund'],
          check: 'node -e "require(\'bullmq\'); require(\'zod\'); console.log(\'ok\')"',
        },
      ]
    : []),
];

function readText(file: string): string {
  return readFileSync(file, 'utf8');
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t = performance.now();
  const v = await fn();
  return [v, (performance.now() - t) / 1000];
}

async function must(sandbox: Sandbox, command: string, what: string): Promise<void> {
  const res = await runTestCommand(sandbox, command, 1800, { what });
  if (res.outcome !== 'passed') throw new Error(`${what} failed: ${res.outputTail.slice(-2000)}`);
}

async function bench(s: Scenario): Promise<string> {
  const docker = await dockerForSandboxes(process.env);
  const owner = testOwner('bench');
  const { cache, dataDir } = newCache(docker, owner, 50e9);
  const repo = makeRepo(s.files);
  const extraDir = s.extra ? mkdtempSync(path.join(os.tmpdir(), 'lilypad-bench-extra-')) : null;
  if (s.extra && extraDir) {
    mkdirSync(path.dirname(path.join(extraDir, s.extra.to)), { recursive: true });
    cpSync(s.extra.from, path.join(extraDir, s.extra.to), { recursive: true });
  }
  const baseImageId = (await docker.getImage(TEST_IMAGE).inspect()).Id;
  const sandboxes: Sandbox[] = [];
  try {
    const key = await keyFor(repo, s.setup, 'bench:1', baseImageId);
    const claim = await cache.claim(key, 'bench:1');
    if (!claim || claim.hit) throw new Error('expected a miss');
    // Fresh: sandbox, copy in, setup.
    const [fresh, freshStart] = await timed(async () => {
      const sb = await startSandbox(docker, TEST_IMAGE);
      sandboxes.push(sb);
      await sb.copyIn(repo);
      return sb;
    });
    if (extraDir) await fresh.copyIn(extraDir);
    if (s.prepare) await sh(fresh, s.prepare);
    const [, setupSeconds] = await timed(async () => {
      await fresh.takeOver();
      for (const c of s.setup) await must(fresh, c, `setup \`${c}\``);
      await fresh.takeOver();
    });
    await must(fresh, s.check, 'the check on the fresh environment');
    const [bareId, bareCommit] = await timed(async () => ((await fresh.container.commit({ pause: true })) as { Id: string }).Id);
    await docker.getImage(bareId).remove().catch(() => undefined);
    const [outcome, keepSeconds] = await timed(() => claim.builder.keep(fresh.container, { baseImageId, setupSeconds }));
    claim.builder.release();
    await fresh.destroy();
    if (!outcome.kept) throw new Error(`not kept: ${outcome.note}`);
    // Hit: claim, sandbox from the kept image, clear the old checkout, copy in.
    const [hitSb, hitStart] = await timed(async () => {
      const c = await cache.claim(key, 'bench:1');
      if (!c?.hit) throw new Error('expected a hit');
      const sb = await startSandbox(docker, c.hit.image);
      sandboxes.push(sb);
      await clearKeptWorktree(sb);
      await sb.copyIn(repo);
      return sb;
    });
    await must(hitSb, s.check, 'the check on the kept environment');
    await hitSb.destroy();
    const freshTotal = freshStart + setupSeconds;
    return `| ${s.name} | ${setupSeconds.toFixed(1)} | ${freshTotal.toFixed(1)} | ${bareCommit.toFixed(2)} | ${keepSeconds.toFixed(2)} (${outcome.seconds?.commit.toFixed(2)} + ${outcome.seconds?.load.toFixed(2)}) | ${formatBytes(outcome.kept.bytes)} | ${hitStart.toFixed(2)} | ${(freshTotal - hitStart).toFixed(1)} |`;
  } finally {
    for (const sb of sandboxes) await sb.destroy();
    await removeOwnerImages(docker, owner);
    rmSync(repo, { recursive: true, force: true });
    if (extraDir) rmSync(extraDir, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const rows: string[] = [];
for (const s of scenarios) rows.push(await bench(s));
const table = [
  '| setup | setup s | fresh start + setup s | bare docker commit s | keep s (commit + load) | kept layer | start from kept s | saved s |',
  '|---|---|---|---|---|---|---|---|',
  ...rows,
].join('\n');
console.log(table);
if (process.env['BENCH_OUT']) writeFileSync(process.env['BENCH_OUT'], `${table}\n`);
