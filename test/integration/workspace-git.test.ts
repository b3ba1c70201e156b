import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { git, GitError } from '../../src/workspace/git.ts';
import { cloneLocalRepository } from '../../src/workspace/local-clone.ts';
import { checkoutFromMirror, mirrorPath, updateMirror } from '../../src/workspace/mirror.ts';
import { prepareChange, pushBranch } from '../../src/workspace/publish.ts';
import { waitFor } from '../support/app-harness.ts';

// Fixture git runs with a clean, explicit environment (never the hostile one some tests set up).
const CLEAN_ENV = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: os.tmpdir(), GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
const IDENTITY = ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@localhost', '-c', 'init.defaultBranch=main'];

const temps: string[] = [];
after(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});

function tempDir(prefix = 'lilypad-git-test-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

/** Fixture git: throws with stderr on failure. */
function fx(cwd: string, ...args: string[]): string {
  return execFileSync('git', [...IDENTITY, ...args], { cwd, env: CLEAN_ENV, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
}

function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
}

/** A working repository with one commit on main, and a bare "server" copy of it. */
function makeRemote(files: Record<string, string>): { work: string; remote: string } {
  const root = tempDir();
  const work = path.join(root, 'work');
  mkdirSync(work);
  writeFiles(work, files);
  fx(work, 'init', '-q');
  fx(work, 'add', '-A');
  fx(work, 'commit', '-qm', 'initial');
  const remote = path.join(root, 'remote.git');
  fx(root, 'clone', '-q', '--bare', work, remote);
  fx(work, 'remote', 'add', 'origin', remote);
  return { work, remote };
}

function commitAndPush(work: string, files: Record<string, string>, message: string, ref = 'HEAD:refs/heads/main'): string {
  writeFiles(work, files);
  fx(work, 'add', '-A');
  fx(work, 'commit', '-qm', message);
  fx(work, 'push', '-q', 'origin', ref);
  return fx(work, 'rev-parse', 'HEAD').trim();
}

function hasObject(repoDir: string, sha: string): boolean {
  return spawnSync('git', ['cat-file', '-e', `${sha}^{commit}`], { cwd: repoDir, env: CLEAN_ENV }).status === 0;
}

const AUTHOR = { name: 'lilypad[bot]', email: '1+lilypad[bot]@users.noreply.localhost' };

/** The agent's patch as the sandbox would produce it: a binary diff of the working tree against base. */
function patchFrom(work: string, edit: () => void, diffArgs: string[] = ['--no-renames']): Buffer {
  edit();
  fx(work, 'add', '-A');
  const diff = execFileSync('git', ['diff', '--cached', '--binary', ...diffArgs, 'HEAD'], { cwd: work, env: CLEAN_ENV });
  fx(work, 'reset', '-q', '--hard', 'HEAD');
  fx(work, 'clean', '-qfd');
  return diff;
}

function treeFiles(dir: string, rev = 'HEAD'): string[] {
  return fx(dir, 'ls-tree', '-r', '--name-only', rev).split('\n').filter(Boolean).sort();
}

/** Sets environment variables for the duration of `fn` (each test file runs in its own process). */
async function withEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const saved = new Map(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** A TCP server that accepts connections and never answers (a stalled git server). */
async function silentServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('data', () => undefined);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/acme/stalled.git`,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

function processesMentioning(text: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(text)) found.push(`${pid}: ${cmd}`);
    } catch {
      /* gone */
    }
  }
  return found;
}

describe('host git: isolation from the operator and the repository', () => {
  test('every host git command runs without the system and global config and without inherited GIT_* variables', async () => {
    const out = await withEnv({ GIT_DIR: '/nonexistent', GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'core.pager', GIT_CONFIG_VALUE_0: 'evil', GIT_CONFIG_SYSTEM: '/tmp/evil-system-config' }, () =>
      git(['-c', 'alias.penv=!env', 'penv'], { cwd: os.tmpdir() }),
    );
    const vars = new Map(
      out
        .split('\n')
        .filter((l) => l.startsWith('GIT_'))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    assert.equal(vars.get('GIT_CONFIG_NOSYSTEM'), '1');
    assert.equal(vars.get('GIT_CONFIG_GLOBAL'), '/dev/null');
    assert.equal(vars.get('GIT_DIR'), undefined, 'an inherited GIT_DIR must not redirect host git');
    assert.equal(vars.get('GIT_CONFIG_SYSTEM'), undefined);
    assert.equal(vars.get('GIT_CONFIG_COUNT'), undefined, 'inherited config variables must not reach host git');
  });

  test('a hostile .gitattributes cannot run a filter from the operator’s config or environment, on checkout or on apply', async () => {
    const { work, remote } = makeRemote({
      '.gitattributes': '*.txt filter=evil\n*.bin filter=lfs\n*.env filter=envfilter\n',
      'a.txt': 'plain text\n',
      'b.bin': 'binary-ish\n',
      'c.env': 'from env\n',
      'd.id': 'version $Id$\n',
    });
    const home = tempDir('lilypad-hostile-home-');
    const marks = path.join(home, 'marks');
    mkdirSync(marks);
    const run = (name: string) => `touch ${marks}/${name}; cat`;
    // The operator's own setup: global and XDG config with filters (git-lfs installs exactly such a
    // filter), a per-user attributes file, and a filter defined in the environment.
    writeFiles(home, {
      '.gitconfig': `[filter "evil"]\n\tclean = ${run('global-clean')}\n\tsmudge = ${run('global-smudge')}\n[filter "lfs"]\n\tclean = ${run('lfs-clean')}\n\tsmudge = ${run('lfs-smudge')}\n\tprocess = touch ${marks}/lfs-process\n\trequired = true\n`,
      'xdg/git/config': `[filter "evil"]\n\tclean = ${run('xdg-clean')}\n\tsmudge = ${run('xdg-smudge')}\n`,
      'xdg/git/attributes': '*.id ident\n',
    });
    const dataDir = tempDir();
    const patch = patchFrom(work, () => writeFiles(work, { 'a.txt': 'changed\n', 'b.bin': 'changed bin\n', 'c.env': 'changed env\n', 'e.txt': 'new\n', 'f.id': 'new $Id$\n' }));

    await withEnv(
      {
        HOME: home,
        XDG_CONFIG_HOME: path.join(home, 'xdg'),
        GIT_CONFIG_COUNT: '2',
        GIT_CONFIG_KEY_0: 'filter.envfilter.clean',
        GIT_CONFIG_VALUE_0: run('env-clean'),
        GIT_CONFIG_KEY_1: 'filter.envfilter.smudge',
        GIT_CONFIG_VALUE_1: run('env-smudge'),
      },
      async () => {
        const mirror = await updateMirror(dataDir, 7, remote, 'Authorization: basic eA==');
        const checkout = await checkoutFromMirror(mirror, 'main');
        try {
          assert.equal(readFileSync(path.join(checkout.dir, 'd.id'), 'utf8'), 'version $Id$\n', 'the per-user attributes file must not apply');
          assert.equal(readFileSync(path.join(checkout.dir, 'a.txt'), 'utf8'), 'plain text\n');
          const change = await prepareChange({ mirrorDir: mirror, baseCommit: checkout.baseCommit, patch, excludePaths: [], message: 'change', author: AUTHOR });
          try {
            assert.equal(change.hasChanges, true);
            assert.equal(fx(change.dir, 'show', 'HEAD:a.txt'), 'changed\n');
            assert.equal(fx(change.dir, 'show', 'HEAD:b.bin'), 'changed bin\n');
            assert.equal(fx(change.dir, 'show', 'HEAD:f.id'), 'new $Id$\n');
          } finally {
            await change.dispose();
          }
        } finally {
          await checkout.dispose();
        }
      },
    );
    assert.deepEqual(readdirSync(marks), [], 'no filter command may run on the host');
  });

  test('LFS stays off even where the repository itself configures it (lilypad run on a local checkout)', async () => {
    const { work } = makeRemote({ '.gitattributes': '*.bin filter=lfs\n', 'b.bin': 'payload\n' });
    const marks = tempDir('lilypad-lfs-marks-');
    fx(work, 'config', 'filter.lfs.clean', `touch ${marks}/lfs-clean; cat`);
    fx(work, 'config', 'filter.lfs.smudge', `touch ${marks}/lfs-smudge; cat`);
    fx(work, 'config', 'filter.lfs.process', `touch ${marks}/lfs-process`);
    fx(work, 'config', 'filter.lfs.required', 'true');
    // A file whose stat changed since it was staged makes `git status` re-read it through its filter.
    writeFileSync(path.join(work, 'b.bin'), 'payload\n');
    const checkout = await cloneLocalRepository(work);
    try {
      assert.equal(readFileSync(path.join(checkout.dir, 'b.bin'), 'utf8'), 'payload\n');
    } finally {
      await checkout.dispose();
    }
    assert.deepEqual(readdirSync(marks), []);
  });

  test('a git command that outlives its timeout is killed, with its helpers, and rejects saying it timed out', async () => {
    const server = await silentServer();
    try {
      const started = Date.now();
      await assert.rejects(
        git(['ls-remote', server.url], { timeoutMs: 700 }),
        (err: unknown) => err instanceof GitError && /timed out after/.test(err.message),
      );
      assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
      // A killed process disappears once it is reaped: give that a short deadline, not a fixed pause.
      await waitFor(() => processesMentioning(server.url).length === 0, 'git and its remote helper to be gone', 3000).catch(() => undefined);
      assert.deepEqual(processesMentioning(server.url), [], 'git and its remote helper must be gone');
    } finally {
      await server.close();
    }
  });

  test('a stalled transfer ends by the low-speed limit, long before the command timeout', async () => {
    const server = await silentServer();
    try {
      const started = Date.now();
      await assert.rejects(
        git(['ls-remote', server.url], { timeoutMs: 60_000, lowSpeed: { bytesPerSecond: 1000, seconds: 1 } }),
        (err: unknown) => err instanceof GitError && /too slow/i.test(err.message),
      );
      assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
    } finally {
      await server.close();
    }
  });
});

describe('mirror cache', () => {
  test('is keyed by repository id, fetches branches and tags only (never refs/pull/*), prunes, and packs', async () => {
    const { work, remote } = makeRemote({ 'a.txt': 'one\n' });
    fx(work, 'tag', 'v1');
    fx(work, 'push', '-q', 'origin', 'v1');
    const featureSha = commitAndPush(work, { 'b.txt': 'feature\n' }, 'feature', 'HEAD:refs/heads/feature');
    // A pull request from a fork: GitHub keeps its head under refs/pull/N/head in the base repository.
    const prSha = commitAndPush(work, { 'c.txt': 'from a fork\n' }, 'fork work', 'HEAD:refs/pull/1/head');
    const dataDir = tempDir();

    const dir = await updateMirror(dataDir, 42, remote, 'Authorization: basic eA==');
    assert.equal(dir, mirrorPath(dataDir, 42));
    assert.equal(dir, path.join(dataDir, 'mirrors', '42.git'));
    const refs = () => fx(dir, 'for-each-ref', '--format=%(refname)').split('\n').filter(Boolean).sort();
    assert.deepEqual(refs(), ['refs/heads/feature', 'refs/heads/main', 'refs/tags/v1']);
    assert.equal(hasObject(dir, prSha), false, 'pull request heads are not fetched');
    assert.equal(hasObject(dir, featureSha), true);
    assert.doesNotMatch(readFileSync(path.join(dir, 'config'), 'utf8'), /url\s*=/, 'the clone URL is not stored');

    // Every fetch keeps its pack, and more than one pack is "too many" for `gc --auto` (the mirror's
    // own settings, made small here): after two more fetches gc must have consolidated them.
    fx(dir, 'config', 'fetch.unpackLimit', '1');
    fx(dir, 'config', 'gc.autoPackLimit', '1');
    fx(work, 'checkout', '-q', 'main');
    commitAndPush(work, { 'd.txt': 'new\n' }, 'new on main');
    await updateMirror(dataDir, 42, remote, 'Authorization: basic eA==');

    // Upstream deletes a branch and a tag and adds commits; the mirror follows.
    fx(remote, 'update-ref', '-d', 'refs/heads/feature');
    fx(remote, 'update-ref', '-d', 'refs/tags/v1');
    const newSha = commitAndPush(work, { 'e.txt': 'newer\n' }, 'newer on main');
    // The same id under another URL (a renamed repository) is the same mirror.
    const renamed = path.join(path.dirname(remote), 'renamed.git');
    execFileSync('mv', [remote, renamed]);
    assert.equal(await updateMirror(dataDir, 42, renamed, 'Authorization: basic eA=='), dir);
    assert.deepEqual(refs(), ['refs/heads/main']);
    assert.equal(fx(dir, 'rev-parse', 'refs/heads/main').trim(), newSha);
    assert.match(fx(dir, 'count-objects', '-v'), /^packs: 1$/m, 'git gc --auto consolidated the packs');
  });

  test('a cross-process lock, when given, is held around every mirror update', async () => {
    const { remote } = makeRemote({ 'a.txt': 'one\n' });
    const dataDir = tempDir();
    const keys: string[] = [];
    let inside = 0;
    let maxInside = 0;
    const lock = async <T>(key: string, fn: () => Promise<T>): Promise<T> => {
      keys.push(key);
      inside++;
      maxInside = Math.max(maxInside, inside);
      try {
        return await fn();
      } finally {
        inside--;
      }
    };
    await Promise.all([updateMirror(dataDir, 9, remote, 'h: v', { lock }), updateMirror(dataDir, 9, remote, 'h: v', { lock })]);
    assert.deepEqual(keys, ['mirror:9', 'mirror:9']);
    assert.equal(maxInside, 1, 'in-process callers queue before taking the cross-process lock');

    const refusing = async <T>(): Promise<T> => {
      throw new Error('lock unavailable');
    };
    await assert.rejects(updateMirror(dataDir, 10, remote, 'h: v', { lock: refusing }), /lock unavailable/);
    assert.equal(existsSync(mirrorPath(dataDir, 10)), false, 'nothing is fetched without the lock');
  });

  test('the checkout is a fresh clone of the one branch: other branches’ objects are not in it', async () => {
    const { work, remote } = makeRemote({ 'a.txt': 'one\n' });
    const mainSha = fx(work, 'rev-parse', 'HEAD').trim();
    fx(work, 'checkout', '-qb', 'secret');
    const secretSha = commitAndPush(work, { 'secret.txt': 'only on another branch\n' }, 'secret', 'HEAD:refs/heads/secret');
    const dataDir = tempDir();
    const mirror = await updateMirror(dataDir, 5, remote, 'h: v');
    assert.equal(hasObject(mirror, secretSha), true);
    const checkout = await checkoutFromMirror(mirror, 'main');
    try {
      assert.equal(checkout.baseCommit, mainSha);
      assert.equal(hasObject(checkout.dir, secretSha), false, 'a commit only on another branch must not be in the checkout');
      assert.equal(existsSync(path.join(checkout.dir, '.git', 'objects', 'info', 'alternates')), false);
      assert.equal(fx(checkout.dir, 'remote').trim(), '');
      const objects = fx(checkout.dir, 'rev-list', '--objects', '--all').split('\n').filter(Boolean).length;
      assert.ok(objects <= 3, `only main's commit, tree and blob: ${objects}`);
    } finally {
      await checkout.dispose();
    }
  });
});

describe('preparing the change to publish', () => {
  const BASE = { 'src/app.py': 'print(1)\n', '.github/workflows/ci.yml': 'on: push\n', 'vendor/x.js': 'x\n', 'README.md': '# r\n' };

  async function prepared(patchArgs: string[], edit: (work: string) => void, excludePaths: string[] = []) {
    const { work, remote } = makeRemote(BASE);
    const mirror = await updateMirror(tempDir(), 11, remote, 'h: v');
    const base = fx(work, 'rev-parse', 'HEAD').trim();
    const patch = patchFrom(work, () => edit(work), patchArgs);
    const change = await prepareChange({ mirrorDir: mirror, baseCommit: base, patch, excludePaths, message: 'change', author: AUTHOR });
    return { change, base };
  }

  test('a rename out of .github/ is published as an addition only: the workflow stays, the drop is reported', async () => {
    // The patch carries git's rename headers, as a patch made with rename detection would.
    const { change } = await prepared(['-M'], (work) => {
      fx(work, 'mv', '.github/workflows/ci.yml', 'ci.yml');
    });
    try {
      assert.equal(change.hasChanges, true);
      assert.deepEqual(treeFiles(change.dir), ['.github/workflows/ci.yml', 'README.md', 'ci.yml', 'src/app.py', 'vendor/x.js']);
      assert.deepEqual(
        change.dropped.map((d) => d.path),
        ['.github/workflows/ci.yml'],
      );
      assert.deepEqual(
        change.files.map((f) => f.path),
        ['ci.yml'],
      );
    } finally {
      await change.dispose();
    }
  });

  test('deleting or changing excluded paths is dropped and reported; the rest is committed with counts', async () => {
    const { change, base } = await prepared(['--no-renames'], (work) => {
      rmSync(path.join(work, 'vendor/x.js'));
      writeFiles(work, { 'src/app.py': 'print(2)\nprint(3)\n', '.github/CODEOWNERS': '* @mallory\n', 'docs/Guide.md': 'g\n' });
    }, ['vendor/**', '[Dd]ocs/**']);
    try {
      assert.equal(change.hasChanges, true);
      assert.deepEqual(treeFiles(change.dir), ['.github/workflows/ci.yml', 'README.md', 'src/app.py', 'vendor/x.js']);
      assert.deepEqual(change.dropped.map((d) => d.path).sort(), ['.github/CODEOWNERS', 'docs/Guide.md', 'vendor/x.js']);
      assert.deepEqual(change.files, [{ path: 'src/app.py', added: 2, removed: 1 }]);
      assert.equal(fx(change.dir, 'rev-parse', 'HEAD^').trim(), base);
      assert.equal(change.headSha, fx(change.dir, 'rev-parse', 'HEAD').trim());
    } finally {
      await change.dispose();
    }
  });

  test('nothing to publish when only excluded paths changed', async () => {
    const { change } = await prepared(['--no-renames'], (work) => writeFiles(work, { '.github/dependabot.yml': 'version: 2\n' }));
    try {
      assert.equal(change.hasChanges, false);
      assert.equal(change.headSha, null);
      assert.deepEqual(change.files, []);
      assert.deepEqual(
        change.dropped.map((d) => d.path),
        ['.github/dependabot.yml'],
      );
    } finally {
      await change.dispose();
    }
  });
});

describe('pushing with a lease', () => {
  async function preparedClone() {
    const { work, remote } = makeRemote({ 'a.txt': 'one\n' });
    const mirror = await updateMirror(tempDir(), 12, remote, 'h: v');
    const base = fx(work, 'rev-parse', 'HEAD').trim();
    const patch = patchFrom(work, () => writeFiles(work, { 'a.txt': 'two\n' }));
    const change = await prepareChange({ mirrorDir: mirror, baseCommit: base, patch, excludePaths: [], message: 'change', author: AUTHOR });
    return { work, remote, change, base };
  }
  const tip = (remote: string, branch: string) => spawnSync('git', ['rev-parse', '--verify', '-q', `refs/heads/${branch}`], { cwd: remote, env: CLEAN_ENV, encoding: 'utf8' }).stdout.trim() || null;

  test('expected null creates the branch only if it does not exist; a lost lease resolves to lease-failed and leaves the branch alone', async () => {
    const { remote, change, base } = await preparedClone();
    try {
      assert.equal(await pushBranch(change.dir, remote, 'lilypad/issue-1', 'h: v', { expected: null }), 'pushed');
      assert.equal(tip(remote, 'lilypad/issue-1'), change.headSha);

      // Someone else pushes to the branch; our lease (what we last pushed) no longer holds.
      fx(remote, 'update-ref', 'refs/heads/lilypad/issue-1', base);
      assert.equal(await pushBranch(change.dir, remote, 'lilypad/issue-1', 'h: v', { expected: change.headSha }), 'lease-failed');
      assert.equal(tip(remote, 'lilypad/issue-1'), base, 'their push stands');
      assert.equal(await pushBranch(change.dir, remote, 'lilypad/issue-1', 'h: v', { expected: null }), 'lease-failed', 'the branch exists');

      // With the right expectation the push replaces it.
      assert.equal(await pushBranch(change.dir, remote, 'lilypad/issue-1', 'h: v', { expected: base }), 'pushed');
      assert.equal(tip(remote, 'lilypad/issue-1'), change.headSha);
    } finally {
      await change.dispose();
    }
  });

  test('a refusal by the server is an error, not a lost lease', async () => {
    const { work, change } = await preparedClone();
    try {
      // A non-bare repository refuses pushes to its checked-out branch: "[remote rejected]".
      const current = fx(work, 'branch', '--show-current').trim();
      await assert.rejects(
        pushBranch(change.dir, work, current, 'h: v', { expected: fx(work, 'rev-parse', 'HEAD').trim() }),
        (err: unknown) => err instanceof GitError && /remote rejected/.test(err.message),
      );
    } finally {
      await change.dispose();
    }
  });
});
