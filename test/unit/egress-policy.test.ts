import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/env.ts';
import {
  addressRefused,
  builtInRefused,
  formatCidr,
  isHostName,
  parseCidr,
  parseEgressPolicy,
  parseHostAddresses,
  parsePrivateAllow,
  refusedMinusExempt,
  renderSquidPolicy,
  type AddressRange,
} from '../../src/sandbox/egress.ts';
import { SandboxError } from '../../src/sandbox/errors.ts';

const github = { githubHost: 'git.test' };

function configError(pattern: RegExp): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    assert.match(err.message, pattern);
    return true;
  };
}

test('none and * stand alone', () => {
  assert.deepEqual(parseEgressPolicy('none', github), { mode: 'none' });
  assert.deepEqual(parseEgressPolicy(' * ', github), { mode: 'any' });
  assert.throws(() => parseEgressPolicy('none,allowed.test', github), configError(/^LILYPAD_SETUP_EGRESS="none,allowed.test" mixes none/));
  assert.throws(() => parseEgressPolicy('*,registries', github), configError(/mixes \*.*alone/));
});

test('registries adds the GitHub host and asks for discovery', () => {
  assert.deepEqual(parseEgressPolicy('registries', github), { mode: 'allowlist', domains: ['git.test'], registries: true });
  assert.deepEqual(parseEgressPolicy('registries,allowed.test', { githubHost: 'Git.Test:8443' }), {
    mode: 'allowlist',
    domains: ['allowed.test', 'git.test'],
    registries: true,
  });
});

test('an IP-literal GitHub host (a local stand-in) is left out: the proxy refuses IP literals anyway', () => {
  assert.deepEqual(parseEgressPolicy('registries', { githubHost: '127.0.0.1:3000' }), { mode: 'allowlist', domains: [], registries: true });
});

test('domain names: case, leading and trailing dots, duplicates and covered subdomains', () => {
  const policy = parseEgressPolicy('Allowed.TEST, .other.test,pkg.allowed.test,,other.test.,allowed.test', github);
  assert.deepEqual(policy, { mode: 'allowlist', domains: ['allowed.test', 'other.test'], registries: false });
});

test('bad entries name the variable, the entry and the fix', () => {
  assert.throws(() => parseEgressPolicy('', github), configError(/LILYPAD_SETUP_EGRESS="" is empty; use none, \*/));
  assert.throws(() => parseEgressPolicy(' , ', github), configError(/is empty/));
  assert.throws(() => parseEgressPolicy('https://allowed.test/simple', github), configError(/URL.*host names only/));
  assert.throws(() => parseEgressPolicy('*.allowed.test', github), configError(/wildcard.*write \.allowed\.test or allowed\.test/));
  assert.throws(() => parseEgressPolicy('10.1.2.3', github), configError(/IP address.*LILYPAD_SETUP_EGRESS_PRIVATE/));
  assert.throws(() => parseEgressPolicy('[::1]', github), configError(/IP address/));
  assert.throws(() => parseEgressPolicy('under_score.test', github), configError(/not a domain name/));
  assert.throws(() => parseEgressPolicy('allowed.test evil.test', github), configError(/not a domain name/));
  assert.throws(() => parseEgressPolicy('1.2.3', github), configError(/not a domain name/));
  assert.throws(() => parseEgressPolicy('0x7f.1', github), configError(/not a domain name/));
  assert.throws(() => parseEgressPolicy(`${'a'.repeat(64)}.test`, github), configError(/not a domain name/));
});

test('host names never look like IP addresses', () => {
  assert.equal(isHostName('allowed.test'), true);
  assert.equal(isHostName('localhost'), true);
  assert.equal(isHostName('1.2.3.4'), false);
  assert.equal(isHostName('2130706433'), false);
  assert.equal(isHostName('a.0x7f'), false);
  assert.equal(isHostName('-bad.test'), false);
  assert.equal(isHostName('a..test'), false);
});

test('LILYPAD_SETUP_EGRESS_PRIVATE: CIDRs and bare addresses', () => {
  assert.deepEqual(parsePrivateAllow(''), []);
  assert.deepEqual(parsePrivateAllow('10.20.0.0/16, 10.30.1.5 ,fd00:1::/32').map(formatCidr), ['10.20.0.0/16', '10.30.1.5/32', 'fd00:1:0:0:0:0:0:0/32']);
});

test('LILYPAD_SETUP_EGRESS_PRIVATE: mistakes and ranges that may never be opened', () => {
  const v = 'LILYPAD_SETUP_EGRESS_PRIVATE';
  assert.throws(() => parsePrivateAllow('mirror.test'), configError(new RegExp(`^${v}="mirror.test": "mirror.test" is not an address range; give CIDRs`)));
  assert.throws(() => parsePrivateAllow('10.0.0.0/33'), configError(/not an address range/));
  assert.throws(() => parsePrivateAllow('10.0.0.0/8/1'), configError(/not an address range/));
  assert.throws(() => parsePrivateAllow('10.20.0.1/16'), configError(/bits set after its prefix; did you mean 10\.20\.0\.0\/16\?/));
  assert.throws(() => parsePrivateAllow('127.0.0.1'), configError(/overlaps 127\.0\.0\.0\/8; loopback, link-local/));
  assert.throws(() => parsePrivateAllow('169.254.169.254'), configError(/overlaps 169\.254\.0\.0\/16/));
  assert.throws(() => parsePrivateAllow('0.0.0.0/0'), configError(/overlaps/));
  assert.throws(() => parsePrivateAllow('::1'), configError(/overlaps/));
  assert.throws(() => parsePrivateAllow('fe80::1'), configError(/overlaps/));
});

test('address parsing: IPv4, IPv6, embedded IPv4, bad input', () => {
  assert.equal(formatCidr(parseCidr('192.168.1.77/24')!), '192.168.1.0/24');
  assert.equal(formatCidr(parseCidr('::1')!), '0:0:0:0:0:0:0:1/128');
  assert.equal(formatCidr(parseCidr('::ffff:10.0.0.1')!), '0:0:0:0:0:ffff:a00:1/128');
  assert.equal(formatCidr(parseCidr('2001:db8::/32')!), '2001:db8:0:0:0:0:0:0/32');
  assert.equal(parseCidr('10.0.0.256'), undefined);
  assert.equal(parseCidr('10.0.0.0/x'), undefined);
  assert.equal(parseCidr(''), undefined);
});

function total(ranges: readonly AddressRange[]): bigint {
  return ranges.reduce((n, r) => n + (1n << BigInt((r.family === 4 ? 32 : 128) - r.prefix)), 0n);
}

test('an exempt /32 is cut out of a refused range, and nothing else is', () => {
  const refused = [parseCidr('172.16.0.0/12')!, parseCidr('10.0.0.0/8')!];
  const left = refusedMinusExempt(refused, [parseCidr('172.20.0.5')!]);
  const inside = (ip: string) => total(refusedMinusExempt(left, [parseCidr(ip)!])) < total(left);
  assert.equal(inside('172.20.0.5'), false);
  assert.equal(inside('172.20.0.4'), true);
  assert.equal(inside('172.20.0.6'), true);
  assert.equal(inside('10.9.9.9'), true);
  assert.equal(total(left), (1n << 20n) - 1n + (1n << 24n));
});

test('nested refused ranges are collapsed; exempting a whole range removes it', () => {
  const left = refusedMinusExempt([parseCidr('10.0.0.0/8')!, parseCidr('10.1.0.0/16')!, parseCidr('10.1.2.3')!, parseCidr('fc00::/7')!], []);
  assert.deepEqual(left.map(formatCidr), ['10.0.0.0/8', 'fc00:0:0:0:0:0:0:0/7']);
  assert.deepEqual(refusedMinusExempt([parseCidr('10.1.0.0/16')!], [parseCidr('10.0.0.0/8')!]), []);
});

test('the Squid policy: allowlist, refused ranges, clients, DNS servers', () => {
  const text = renderSquidPolicy({
    allow: ['allowed.test', 'other.test'],
    refused: [parseCidr('10.0.0.0/8')!, parseCidr('fc00::/7')!],
    refusedClients: [parseCidr('172.18.0.0/16')!],
    dnsServers: ['127.0.0.1'],
  });
  assert.equal(
    text,
    [
      'acl lilypad_allowed dstdomain -n .allowed.test',
      'acl lilypad_allowed dstdomain -n .other.test',
      'acl lilypad_refused_dst dst 10.0.0.0/8',
      'acl lilypad_refused_dst dst fc00:0:0:0:0:0:0:0/7',
      'acl lilypad_outbound_clients src 172.18.0.0/16',
      'dns_nameservers 127.0.0.1',
      '',
    ].join('\n'),
  );
});

test('the Squid policy: any name, an empty allowlist, no outbound subnet', () => {
  const any = renderSquidPolicy({ allow: '*', refused: [parseCidr('10.0.0.0/8')!], refusedClients: [] });
  assert.match(any, /^acl lilypad_allowed dstdom_regex -n \.$/m);
  assert.match(any, /^acl lilypad_outbound_clients src 255\.255\.255\.255\/32$/m);
  assert.doesNotMatch(any, /dns_nameservers/);
  const empty = renderSquidPolicy({ allow: [], refused: [parseCidr('10.0.0.0/8')!], refusedClients: [] });
  assert.match(empty, /^acl lilypad_allowed dstdomain -n \.invalid$/m);
});

test('nothing unchecked reaches Squid syntax', () => {
  const base = { refused: [parseCidr('10.0.0.0/8')!], refusedClients: [] };
  assert.throws(() => renderSquidPolicy({ ...base, allow: ['allowed.test\nhttp_access allow all'] }), SandboxError);
  assert.throws(() => renderSquidPolicy({ ...base, allow: ['allowed.test'], dnsServers: ['127.0.0.1\nhttp_access allow all'] }), SandboxError);
});

// Addresses a name could resolve to that lead to a private or loopback IPv4 address through a
// translator or relay on the way (NAT64, 6to4, Teredo, IPv4-mapped and -compatible forms).
const EMBEDDING_ATTACKS = [
  '64:ff9b::10.0.0.1', // NAT64 well-known prefix with a private IPv4
  '64:ff9b::a9fe:a9fe', // NAT64 to 169.254.169.254 (cloud metadata)
  '64:ff9b:1::a00:1', // NAT64 local-use prefix
  '64:ff9b:1:ffff::7f00:1',
  '2002:a00:1::1', // 6to4 of 10.0.0.1
  '2002:7f00:1::', // 6to4 of 127.0.0.1
  '2001:0:4136:e378:8000:63bf:f5ff:fffe', // Teredo (client 10.0.0.1, obfuscated)
  '::ffff:10.0.0.1', // IPv4-mapped, as Squid reads it
  '::ffff:127.0.0.1',
  '::ffff:169.254.169.254',
  '::ffff:0:10.0.0.1', // IPv4-translated (SIIT)
  '::10.0.0.1', // IPv4-compatible
  '::127.0.0.1',
];

test('IPv6 forms that carry a private or loopback IPv4 address are refused', () => {
  const refused = builtInRefused();
  for (const ip of EMBEDDING_ATTACKS) assert.ok(addressRefused(ip, refused), `${ip} must be refused`);
});

test('public addresses stay allowed, in IPv4, IPv6 and IPv4-mapped form', () => {
  const refused = builtInRefused();
  for (const ip of ['93.184.216.34', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:93.184.216.34', '8.8.8.8']) {
    assert.equal(addressRefused(ip, refused), false, `${ip} must stay allowed`);
  }
});

test('documentation and relay ranges are refused too', () => {
  const refused = builtInRefused();
  for (const ip of ['192.0.2.10', '198.51.100.1', '203.0.113.7', '192.88.99.1', '2001:db8::1', '100::1', 'fec0::1']) assert.ok(addressRefused(ip, refused), ip);
});

test('the Squid policy never carries an IPv4-mapped range (Squid would read it as IPv4 addresses; ::ffff:0:0/96 as all of them)', () => {
  const refused = refusedMinusExempt(builtInRefused(), []);
  const text = renderSquidPolicy({ allow: ['allowed.test'], refused, refusedClients: [] });
  assert.doesNotMatch(text, /::ffff:/);
  const listed = text.split('\n').flatMap((l) => (l.startsWith('acl lilypad_refused_dst dst ') ? [l.split(' ').at(-1)!] : []));
  for (const r of ['64:ff9b:1::/48', '2002::/16', '2001::/32', '64:ff9b::/96', '::/96']) assert.ok(listed.includes(formatCidr(parseCidr(r)!)), `${r} is in the policy`);
  assert.throws(() => renderSquidPolicy({ allow: ['a.test'], refused: [parseCidr('::ffff:0:0/96')!], refusedClients: [] }), SandboxError);
  assert.throws(() => renderSquidPolicy({ allow: ['a.test'], refused: [parseCidr('::ffff:10.0.0.0/104')!], refusedClients: [] }), SandboxError);
});

test('LILYPAD_SETUP_EGRESS_PRIVATE refuses IPv4-mapped ranges and says to give the IPv4 range', () => {
  assert.throws(() => parsePrivateAllow('::ffff:10.20.0.0/112'), configError(/IPv4-mapped.*10\.20\.0\.0\/16/));
});

test("the Docker host's addresses are read from /proc/net/fib_trie and /proc/net/if_inet6", () => {
  const text = [
    'Main:',
    '  +-- 0.0.0.0/0 3 0 4',
    '     |-- 0.0.0.0',
    '        /0 universe UNICAST',
    '           |-- 127.0.0.1',
    '              /32 host LOCAL',
    '           |-- 172.17.0.0',
    '              /16 link UNICAST',
    '           |-- 172.17.0.1',
    '              /32 host LOCAL',
    '           |-- 203.0.113.9',
    '              /32 host LOCAL',
    '        |-- 172.17.255.255',
    '           /32 link BROADCAST',
    '00000000000000000000000000000001 01 80 10 80       lo',
    '2a0100000000000000000000000000aa 02 40 00 80     eth0',
  ].join('\n');
  assert.deepEqual(parseHostAddresses(text).map(formatCidr).sort(), ['0:0:0:0:0:0:0:1/128', '127.0.0.1/32', '172.17.0.1/32', '203.0.113.9/32', '2a01:0:0:0:0:0:0:aa/128'].sort());
});
