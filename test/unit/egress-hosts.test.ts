import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ConfigError, loadEnv } from '../../src/config/env.ts';
import { parsePrivateAllow, readEgressHostsFile } from '../../src/sandbox/egress.ts';

// LILYPAD_SETUP_EGRESS_HOSTS: the hosts file an administrator pins an internal registry with.

const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-egress-hosts-'));
let n = 0;
function hostsFile(text: string): string {
  const file = path.join(dir, `hosts-${++n}`);
  writeFileSync(file, text);
  return file;
}

function configError(pattern: RegExp): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    assert.match(err.message, pattern);
    return true;
  };
}

const noPrivate = parsePrivateAllow('');

test('unset or empty: no hosts file, the proxy resolves with DNS alone', () => {
  assert.equal(readEgressHostsFile(undefined, noPrivate), undefined);
  assert.equal(readEgressHostsFile('  ', noPrivate), undefined);
  assert.equal(loadEnv({}).LILYPAD_SETUP_EGRESS_HOSTS, undefined);
  assert.equal(loadEnv({ LILYPAD_SETUP_EGRESS_HOSTS: ' /etc/lilypad/hosts ' }).LILYPAD_SETUP_EGRESS_HOSTS, '/etc/lilypad/hosts');
});

test('a hosts file is read, comments and blank lines dropped, names in lower case, for Squid', () => {
  const file = hostsFile('# the internal npm mirror\n\n203.0.113.7   NPM.Internal.Example   npm-alt.internal.example. # both names\r\n2001:db8::5 pypi.internal.example\n');
  // 203.0.113.0/24 and 2001:db8::/32 are documentation ranges, refused unless exempted: exempt them here.
  const out = readEgressHostsFile(file, parsePrivateAllow('203.0.113.7,2001:db8::/32'));
  assert.equal(out, '203.0.113.7 npm.internal.example npm-alt.internal.example\n2001:db8::5 pypi.internal.example\n');
});

test('a public address needs no exemption; a relative path is read from the working directory', () => {
  const file = hostsFile('93.184.215.14 mirror.example.org\n');
  assert.equal(readEgressHostsFile(path.basename(file), noPrivate, dir), '93.184.215.14 mirror.example.org\n');
});

test('a missing file, a directory and an unreadable file name the setting, the path and the fix', () => {
  const missing = path.join(dir, 'nope');
  assert.throws(() => readEgressHostsFile(missing, noPrivate), configError(new RegExp(`^LILYPAD_SETUP_EGRESS_HOSTS=${missing}: ${missing} does not exist; give the path of a hosts-format file`)));
  const sub = path.join(dir, 'a-directory');
  mkdirSync(sub);
  assert.throws(() => readEgressHostsFile(sub, noPrivate), configError(/is not a file; give the path of a hosts-format file/));
  if (process.getuid?.() !== 0) {
    const locked = hostsFile('93.184.215.14 mirror.example.org\n');
    chmodSync(locked, 0o000);
    assert.throws(() => readEgressHostsFile(locked, noPrivate), configError(/cannot be read \(EACCES\); make it readable/));
  }
});

test('lines that are not hosts format say which line and what is wrong', () => {
  const cases: Array<[string, RegExp]> = [
    ['mirror.example.org 93.184.215.14\n', /line 1 \("mirror\.example\.org 93\.184\.215\.14"\): the address comes first/],
    ['93.184.215.14\n', /line 1 .*an address without a name/],
    ['# ok\nmirror.example.org\n', /line 2 .*"mirror\.example\.org" is not an IP address/],
    ['93.184.215.14 *.example.org\n', /"\*\.example\.org" is a wildcard: a hosts file maps exact names; list each name/],
    ['93.184.215.14 https://mirror.example.org/\n', /not a host name: give names only, without scheme, port or path/],
    ['93.184.215.14 mirror.example.org:8443\n', /without scheme, port or path/],
    ['93.184.215.14 under_score.example\n', /"under_score\.example" is not a host name/],
    ['93.184.215.14 10.1.2.3\n', /"10\.1\.2\.3" is not a host name/],
    ['999.1.1.1 mirror.example.org\n', /"999\.1\.1\.1" is not an IP address/],
  ];
  for (const [text, pattern] of cases) {
    assert.throws(() => readEgressHostsFile(hostsFile(text), noPrivate), configError(pattern), text);
    assert.throws(() => readEgressHostsFile(hostsFile(text), noPrivate), configError(/write one "<address> <name>\.\.\." per line/), text);
  }
});

test('a name pinned to a private address needs that address in LILYPAD_SETUP_EGRESS_PRIVATE, and says so', () => {
  const file = hostsFile('10.20.0.5 npm.internal.example\n');
  assert.throws(
    () => readEgressHostsFile(file, noPrivate),
    configError(/line 1 .*10\.20\.0\.5 is a private address, which the egress proxy refuses; add it \(or its range\) to LILYPAD_SETUP_EGRESS_PRIVATE, e\.g\. LILYPAD_SETUP_EGRESS_PRIVATE=10\.20\.0\.5\/32$/),
  );
  assert.equal(readEgressHostsFile(file, parsePrivateAllow('10.20.0.0/16')), '10.20.0.5 npm.internal.example\n');
  assert.throws(() => readEgressHostsFile(hostsFile('fd00::5 npm.internal.example\n'), noPrivate), configError(/LILYPAD_SETUP_EGRESS_PRIVATE=fd00::5\/128$/));
});

test('loopback, link-local and other never-reachable addresses are refused whatever is exempted', () => {
  for (const ip of ['127.0.0.1', '169.254.169.254', '::1', 'fe80::1', '0.0.0.0', '224.0.0.1']) {
    assert.throws(() => readEgressHostsFile(hostsFile(`${ip} mirror.internal.example\n`), noPrivate), configError(/which setup may never reach; map the name to the address of the mirror/), ip);
  }
});

test('a file larger than any hosts file for a few registries is refused', () => {
  const file = hostsFile(`${'# padding\n'.repeat(120_000)}93.184.215.14 mirror.example.org\n`);
  assert.throws(() => readEgressHostsFile(file, noPrivate), configError(/more than a hosts file for a few registries needs \(1 MiB\)/));
});

test('lilypad run reads the setting before the run starts: a bad file stops it at once, even with LILYPAD_SETUP_EGRESS=none', async () => {
  const { lazySetupProxy } = await import('../../src/cli/setup-proxy.ts');
  // No Docker call is made before the file is checked: a client that fails on use proves it.
  const docker = new Proxy({}, { get: () => assert.fail('Docker was used before the settings were checked') }) as never;
  const bad = hostsFile('93.184.215.14 *.example.org\n');
  for (const egress of ['registries', 'none']) {
    assert.throws(() => lazySetupProxy(loadEnv({ LILYPAD_SETUP_EGRESS: egress, LILYPAD_SETUP_EGRESS_HOSTS: bad }), docker, 'img', {}), configError(/LILYPAD_SETUP_EGRESS_HOSTS=.*wildcard/));
  }
  const good = hostsFile('10.20.0.5 npm.internal.example\n');
  assert.throws(() => lazySetupProxy(loadEnv({ LILYPAD_SETUP_EGRESS_HOSTS: good }), docker, 'img', {}), configError(/add it \(or its range\) to LILYPAD_SETUP_EGRESS_PRIVATE/));
  assert.notEqual(lazySetupProxy(loadEnv({ LILYPAD_SETUP_EGRESS_HOSTS: good, LILYPAD_SETUP_EGRESS_PRIVATE: '10.20.0.5' }), docker, 'img', {}), null);
});
