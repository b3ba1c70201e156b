import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tarArchive } from '../../src/sandbox/tar-entries.ts';

test('GNU tar reads the archive: folders, files, modes, owners and contents as given', () => {
  const long = `${'deep/'.repeat(30)}file.txt`;
  const archive = tarArchive([
    { kind: 'dir', path: 'etc/lilypad-ca', mode: 0o755 },
    { kind: 'file', path: 'etc/lilypad-ca/a.pem', mode: 0o644, content: 'A'.repeat(513) },
    { kind: 'file', path: 'etc/lilypad-ca/empty', mode: 0o600, content: '', uid: 1000, gid: 1000 },
    { kind: 'file', path: long, mode: 0o644, content: 'long name' },
  ]);
  assert.equal(archive.length % 512, 0);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-tar-'));
  try {
    writeFileSync(path.join(dir, 'x.tar'), archive);
    const listing = execFileSync('tar', ['--numeric-owner', '-tvf', path.join(dir, 'x.tar')], { encoding: 'utf8' });
    assert.match(listing, /^drwxr-xr-x 0\/0 +0 .* etc\/lilypad-ca\/$/m);
    assert.match(listing, /^-rw-r--r-- 0\/0 +513 .* etc\/lilypad-ca\/a\.pem$/m);
    assert.match(listing, /^-rw------- 1000\/1000 +0 .* etc\/lilypad-ca\/empty$/m);
    execFileSync('tar', ['-xf', path.join(dir, 'x.tar'), '-C', dir]);
    assert.equal(readFileSync(path.join(dir, 'etc/lilypad-ca/a.pem'), 'utf8'), 'A'.repeat(513));
    assert.equal(readFileSync(path.join(dir, long), 'utf8'), 'long name');
    assert.equal(statSync(path.join(dir, 'etc/lilypad-ca/a.pem')).mode & 0o777, 0o644);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('absolute paths and .. are refused', () => {
  assert.throws(() => tarArchive([{ kind: 'file', path: '/etc/passwd', mode: 0o644, content: '' }]), /relative path/);
  assert.throws(() => tarArchive([{ kind: 'file', path: 'a/../../b', mode: 0o644, content: '' }]), /relative path/);
});
