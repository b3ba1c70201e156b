import { readFileSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { z } from 'zod';
import { ConfigError } from '../config/env.ts';
import { SandboxError } from './errors.ts';
import { hostPidsLimit, isGvisor, sandboxRuntimeOf } from './runtime.ts';
import { LABEL_MANAGED, LABEL_RUN } from './sandbox.ts';

/**
 * The only way out for a repository's setup commands: an allowlisting Squid proxy (image
 * lilypad-egress, docker/egress.Dockerfile) that sits on an outbound network and on one
 * internal network per run. The sandbox joins only its run's network, which has no route
 * anywhere (internal, and inhibit_ipv4 so the host's bridge has no address on it): the proxy is
 * the one thing it can talk to, and the proxy decides by name, then by resolved address.
 */

export const LABEL_ROLE = 'dev.lilypad.role';
export const ROLE_EGRESS = 'egress';
export const ROLE_SETUP_NETWORK = 'setup-network';
const ROLE_DISCOVERY = 'egress-discovery';

const PROXY_PORT = 3128;
const DOCKER_CALL_MS = 30_000;
const PROXY_READY_MS = 20_000;
const DISCOVERY_MS = 90_000;
// Debian's fixed uid/gid of the `proxy` user (base-passwd), the user the image runs Squid as.
const PROXY_UID = 13;
const POLICY_DIR = '/run/lilypad-egress';
const READY_LINE = 'Accepting HTTP Socket connections';

// ---------------------------------------------------------------------------------------------
// Policy: LILYPAD_SETUP_EGRESS and LILYPAD_SETUP_EGRESS_PRIVATE
// ---------------------------------------------------------------------------------------------

type EgressPolicy =
  /** Setup commands get no network at all: the sandbox stays on network `none`. */
  | { readonly mode: 'none' }
  /** Any public name (never an IP literal, never a refused address). */
  | { readonly mode: 'any' }
  /**
   * These domains and their subdomains; `registries` adds the package registries that the
   * sandbox image's own tools are configured for, discovered when the proxy starts.
   */
  | { readonly mode: 'allowlist'; readonly domains: readonly string[]; readonly registries: boolean };

const POLICY_VAR = 'LILYPAD_SETUP_EGRESS';
const PRIVATE_VAR = 'LILYPAD_SETUP_EGRESS_PRIVATE';
const POLICY_USAGE =
  'use none, *, or a comma-separated list of domain names and the keyword registries (e.g. LILYPAD_SETUP_EGRESS=registries,example.org)';

const LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** A DNS host name (lower case, no trailing dot) that cannot be mistaken for an IP address. */
export function isHostName(name: string): boolean {
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  if (!labels.every((l) => LABEL_RE.test(l))) return false;
  // A last label of digits or 0x... is how IPv4 literals in odd notations look.
  const last = labels[labels.length - 1] ?? '';
  return !/^[0-9]+$/.test(last) && !/^0x[0-9a-f]*$/.test(last);
}

/** Parses LILYPAD_SETUP_EGRESS; `githubHost` joins the list when `registries` is given. */
export function parseEgressPolicy(value: string, opts: { githubHost: string }): EgressPolicy {
  const entries = value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length === 0) {
    throw policyError(value, 'is empty', POLICY_USAGE);
  }
  if (entries.includes('none') || entries.includes('*')) {
    if (entries.length > 1) {
      throw policyError(value, `mixes ${entries.includes('none') ? 'none' : '*'} with other entries`, `give it alone, or ${POLICY_USAGE}`);
    }
    return entries[0] === 'none' ? { mode: 'none' } : { mode: 'any' };
  }
  const registries = entries.includes('registries');
  const domains = entries.filter((e) => e !== 'registries').map((e) => parseDomainEntry(e, value));
  if (registries) {
    const github = githubHostName(opts.githubHost);
    if (github) domains.push(github);
  }
  return { mode: 'allowlist', domains: minimalDomains(domains), registries };
}

function parseDomainEntry(entry: string, whole: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(entry)) {
    throw policyError(whole, `has the URL ${JSON.stringify(entry)}`, 'give host names only, e.g. example.org');
  }
  if (entry.startsWith('*.')) {
    throw policyError(whole, `has the wildcard ${JSON.stringify(entry)}`, `write ${entry.slice(1)} or ${entry.slice(2)}: both already include every subdomain`);
  }
  const name = entry.toLowerCase().replace(/^\./, '').replace(/\.$/, '');
  if (net.isIP(name.replace(/^\[|\]$/g, '')) !== 0) {
    throw policyError(
      whole,
      `has the IP address ${JSON.stringify(entry)}`,
      `the proxy allows names only; give the host's name here and, for a private address, its range in ${PRIVATE_VAR}`,
    );
  }
  if (!isHostName(name)) {
    throw policyError(whole, `has ${JSON.stringify(entry)}, which is not a domain name`, POLICY_USAGE);
  }
  return name;
}

/** The GitHub host may be given with a port (a local stand-in); an IP-literal host is skipped because the proxy refuses IP literals anyway. */
function githubHostName(host: string): string | undefined {
  const name = host.trim().toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  return isHostName(name) ? name : undefined;
}

/** Drops duplicates and names already covered by a listed parent domain (Squid rejects such overlaps). */
function minimalDomains(domains: readonly string[]): string[] {
  const unique = [...new Set(domains)].sort((a, b) => a.split('.').length - b.split('.').length || a.localeCompare(b));
  const kept: string[] = [];
  for (const d of unique) {
    if (!kept.some((p) => d === p || d.endsWith(`.${p}`))) kept.push(d);
  }
  return kept.sort();
}

function policyError(value: string, problem: string, fix: string): ConfigError {
  return new ConfigError(`${POLICY_VAR}=${JSON.stringify(value)} ${problem}; ${fix}`);
}

/** An IPv4 or IPv6 address range (CIDR). */
export interface AddressRange {
  readonly family: 4 | 6;
  readonly base: bigint;
  readonly prefix: number;
}

// Addresses a setup command must never reach through the proxy, whatever a name resolves to.
const ALWAYS_REFUSED = [
  '0.0.0.0/8', // "this network", unspecified
  '10.0.0.0/8', // RFC 1918
  '100.64.0.0/10', // CGNAT
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local (cloud metadata lives here)
  '172.16.0.0/12', // RFC 1918
  '192.0.0.0/24', // IETF protocol assignments
  '192.168.0.0/16', // RFC 1918
  '198.18.0.0/15', // benchmarking
  '192.0.2.0/24', // documentation (TEST-NET-1)
  '192.88.99.0/24', // 6to4 relay anycast (deprecated)
  '198.51.100.0/24', // documentation (TEST-NET-2)
  '203.0.113.0/24', // documentation (TEST-NET-3)
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved and broadcast
  '::/128', // unspecified
  '::1/128', // loopback
  // IPv6 ranges that carry an IPv4 address inside: a translator or relay on the way would take a
  // name resolving there to that IPv4 address (10.0.0.1 as 64:ff9b::a00:1 or 2002:a00:1::), past
  // the IPv4 refusals. They are refused whole. IPv4-mapped ::ffff:0:0/96 is not listed: Squid
  // keeps every IPv4 address in that form, so the IPv4 ranges above already cover it (and listing
  // it would refuse all of IPv4).
  '::/96', // IPv4-compatible (deprecated)
  '::ffff:0:0:0/96', // IPv4-translated (SIIT)
  '64:ff9b::/96', // NAT64, well-known prefix
  '64:ff9b:1::/48', // NAT64, local use
  '100::/64', // discard-only
  '2001::/32', // Teredo (the client's IPv4 address, obfuscated, in the low bits)
  '2001:db8::/32', // documentation
  '2002::/16', // 6to4
  'fc00::/7', // unique local
  'fec0::/10', // site-local (deprecated, still routed by some stacks)
  'fe80::/10', // link-local
  'ff00::/8', // multicast
];

/** Squid stores IPv4 addresses as IPv4-mapped IPv6: a range inside it in an ACL means IPv4 addresses. */
const IPV4_MAPPED = '::ffff:0:0/96';

/** The ranges refused whatever LILYPAD_SETUP_EGRESS_PRIVATE says (before this machine's addresses are added). */
export function builtInRefused(): AddressRange[] {
  return ALWAYS_REFUSED.map(mustParseCidr);
}

/**
 * Whether `ip` falls in a refused range, read the way Squid reads it: an IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d) is the IPv4 address a.b.c.d.
 */
export function addressRefused(ip: string, refused: readonly AddressRange[]): boolean {
  const parsed = parseCidr(ip);
  if (!parsed) return false;
  const mapped = mustParseCidr(IPV4_MAPPED);
  const target = contains(mapped, parsed) ? { family: 4 as const, base: parsed.base & 0xffffffffn, prefix: 32 } : parsed;
  return refused.some((r) => contains(r, target));
}

// Ranges LILYPAD_SETUP_EGRESS_PRIVATE may not open: nothing legitimate lives there.
const NEVER_EXEMPT = ['0.0.0.0/8', '127.0.0.0/8', '169.254.0.0/16', '224.0.0.0/4', '240.0.0.0/4', '::/128', '::1/128', 'fe80::/10', 'ff00::/8'];

/** Parses LILYPAD_SETUP_EGRESS_PRIVATE: comma-separated CIDRs (a bare address means just that address). */
export function parsePrivateAllow(value: string): AddressRange[] {
  const entries = value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  return entries.map((entry) => {
    const range = parseCidr(entry);
    const fail = (problem: string, fix: string) => new ConfigError(`${PRIVATE_VAR}=${JSON.stringify(value)}: ${JSON.stringify(entry)} ${problem}; ${fix}`);
    if (!range) throw fail('is not an address range', 'give CIDRs separated by commas, e.g. LILYPAD_SETUP_EGRESS_PRIVATE=10.20.0.0/16,10.30.1.5');
    if (overlaps(mustParseCidr(IPV4_MAPPED), range)) {
      throw fail('is an IPv4-mapped IPv6 range', 'give the IPv4 range itself (e.g. 10.20.0.0/16 for ::ffff:10.20.0.0/112)');
    }
    if (formatCidr(range) !== normalCidrText(entry, range)) {
      throw fail('has bits set after its prefix', `did you mean ${formatCidr(range)}?`);
    }
    const clash = NEVER_EXEMPT.map((c) => mustParseCidr(c)).find((never) => overlaps(never, range));
    if (clash) {
      throw fail(`overlaps ${formatCidr(clash)}`, 'loopback, link-local, unspecified, multicast and reserved addresses cannot be opened; give the private range of your mirror only');
    }
    return range;
  });
}

function normalCidrText(entry: string, range: AddressRange): string {
  const [ip = ''] = entry.split('/');
  const value = ipToBigInt(ip);
  return value ? formatCidr({ family: value.family, base: value.value, prefix: range.prefix }) : entry;
}

// ---------------------------------------------------------------------------------------------
// Address arithmetic (IPv4 and IPv6 as bigints)
// ---------------------------------------------------------------------------------------------

const WIDTH = { 4: 32, 6: 128 } as const;

function ipToBigInt(ip: string): { family: 4 | 6; value: bigint } | undefined {
  if (net.isIPv4(ip)) {
    return { family: 4, value: ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n) };
  }
  if (!net.isIPv6(ip)) return undefined;
  let text = ip;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const low = ipToBigInt(v4[1])?.value ?? 0n;
    text = `${text.slice(0, -v4[1].length)}${(low >> 16n).toString(16)}:${(low & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? 0 : 8 - headGroups.length - tailGroups.length;
  const groups = [...headGroups, ...Array<string>(zeros).fill('0'), ...tailGroups];
  return { family: 6, value: groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n) };
}

function bigIntToIp(family: 4 | 6, value: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => ((value >> s) & 0xffn).toString()).join('.');
  const groups: string[] = [];
  for (let s = 112n; s >= 0n; s -= 16n) groups.push(((value >> s) & 0xffffn).toString(16));
  return groups.join(':');
}

function mask(family: 4 | 6, prefix: number): bigint {
  const width = BigInt(WIDTH[family]);
  return ((1n << width) - 1n) ^ ((1n << (width - BigInt(prefix))) - 1n);
}

/** Parses `a.b.c.d/n`, `x::y/n` or a bare address; host bits are cleared. */
export function parseCidr(text: string): AddressRange | undefined {
  const [ip = '', prefixText, extra] = text.trim().split('/');
  const parsed = ipToBigInt(ip);
  if (!parsed || extra !== undefined) return undefined;
  const width = WIDTH[parsed.family];
  const prefix = prefixText === undefined ? width : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > width) return undefined;
  return { family: parsed.family, base: parsed.value & mask(parsed.family, prefix), prefix };
}

function mustParseCidr(text: string): AddressRange {
  const range = parseCidr(text);
  if (!range) throw new Error(`bad built-in address range ${text}`);
  return range;
}

export function formatCidr(range: AddressRange): string {
  return `${bigIntToIp(range.family, range.base)}/${range.prefix}`;
}

function contains(outer: AddressRange, inner: AddressRange): boolean {
  if (outer.family !== inner.family || outer.prefix > inner.prefix) return false;
  return (inner.base & mask(outer.family, outer.prefix)) === outer.base;
}

function overlaps(a: AddressRange, b: AddressRange): boolean {
  return contains(a, b) || contains(b, a);
}

/** `range` without `cut`, as the fewest CIDRs that bisection gives. */
function subtract(range: AddressRange, cut: AddressRange): AddressRange[] {
  if (!overlaps(range, cut)) return [range];
  if (contains(cut, range)) return [];
  const prefix = range.prefix + 1;
  const half = 1n << BigInt(WIDTH[range.family] - prefix);
  const low = { family: range.family, base: range.base, prefix };
  const high = { family: range.family, base: range.base | half, prefix };
  return [...subtract(low, cut), ...subtract(high, cut)];
}

/** Every address in `ranges` except those in `exempt`, without ranges nested in others. */
export function refusedMinusExempt(ranges: readonly AddressRange[], exempt: readonly AddressRange[]): AddressRange[] {
  let left = [...ranges];
  for (const cut of exempt) left = left.flatMap((r) => subtract(r, cut));
  const bySize = left.sort((a, b) => a.family - b.family || a.prefix - b.prefix || (a.base < b.base ? -1 : a.base > b.base ? 1 : 0));
  const kept: AddressRange[] = [];
  for (const r of bySize) if (!kept.some((k) => contains(k, r))) kept.push(r);
  return kept;
}

// ---------------------------------------------------------------------------------------------
// The Squid policy file
// ---------------------------------------------------------------------------------------------

interface SquidPolicy {
  /** '*' for any name, else domains (each includes its subdomains). */
  allow: '*' | readonly string[];
  /** Destinations refused whatever the name (already minus the exempt ranges). */
  refused: readonly AddressRange[];
  /** Client ranges refused: the proxy's outbound network, whose containers are not setup sandboxes. */
  refusedClients: readonly AddressRange[];
  /** Squid's DNS servers; unset keeps the container's resolv.conf. */
  dnsServers?: readonly string[] | undefined;
}

/** Renders the ACLs that docker/egress/squid.conf includes. Every value is validated first: nothing reaches Squid's syntax unchecked. */
export function renderSquidPolicy(policy: SquidPolicy): string {
  const lines: string[] = [];
  if (policy.allow === '*') {
    lines.push('acl lilypad_allowed dstdom_regex -n .');
  } else {
    for (const d of policy.allow) if (!isHostName(d)) throw new SandboxError(`refusing to put ${JSON.stringify(d)} on the egress allowlist: not a host name`);
    // `.invalid` never resolves (RFC 6761): an empty allowlist then allows nothing.
    const names = policy.allow.length > 0 ? policy.allow : ['invalid'];
    for (const d of names) lines.push(`acl lilypad_allowed dstdomain -n .${d}`);
  }
  const mapped = mustParseCidr(IPV4_MAPPED);
  for (const r of policy.refused) {
    // Squid would read such a range as IPv4 addresses (all of IPv4, for the whole ::ffff:0:0/96).
    if (overlaps(mapped, r)) throw new SandboxError(`refusing to put ${formatCidr(r)} in the egress policy: give IPv4-mapped addresses as IPv4`);
    lines.push(`acl lilypad_refused_dst dst ${formatCidr(r)}`);
  }
  // No client ever has the broadcast address: a value that keeps the ACL defined but inert.
  const clients = policy.refusedClients.length > 0 ? policy.refusedClients.map(formatCidr) : ['255.255.255.255/32'];
  for (const c of clients) lines.push(`acl lilypad_outbound_clients src ${c}`);
  if (policy.dnsServers && policy.dnsServers.length > 0) {
    for (const s of policy.dnsServers) if (net.isIP(s) === 0) throw new SandboxError(`egress DNS server ${JSON.stringify(s)} is not an IP address`);
    lines.push(`dns_nameservers ${policy.dnsServers.join(' ')}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Validates a hosts file (`address name...` lines) for Squid's hosts_file. */
function checkHostsFile(text: string): string {
  for (const raw of text.split('\n')) {
    const problem = hostsLineProblem(raw);
    if (problem) throw new SandboxError(`bad line in the egress proxy's hosts file: ${JSON.stringify(raw)}: ${problem}`);
  }
  return text;
}

/** What is wrong with one hosts-format line (`<address> <name>...`, `#` comments), or null. */
function hostsLineProblem(raw: string): string | null {
  const line = raw.replace(/#.*/, '').trim();
  if (line === '') return null;
  const [ip = '', ...names] = line.split(/\s+/);
  if (net.isIP(ip) === 0) {
    return names.some((n) => net.isIP(n) !== 0) ? 'the address comes first, then the names ("10.20.0.5 npm.internal.example")' : `${JSON.stringify(ip)} is not an IP address (expected "<address> <name>...")`;
  }
  if (names.length === 0) return 'an address without a name (expected "<address> <name>...")';
  for (const name of names) {
    if (name.includes('*')) return `${JSON.stringify(name)} is a wildcard: a hosts file maps exact names; list each name`;
    if (/[:/]/.test(name)) return `${JSON.stringify(name)} is not a host name: give names only, without scheme, port or path`;
    if (!isHostName(name.toLowerCase().replace(/\.$/, ''))) return `${JSON.stringify(name)} is not a host name`;
  }
  return null;
}

const HOSTS_VAR = 'LILYPAD_SETUP_EGRESS_HOSTS';
const MAX_HOSTS_BYTES = 1024 * 1024;

/**
 * Reads LILYPAD_SETUP_EGRESS_HOSTS once, at start: a hosts-format file the egress proxy resolves
 * names with before DNS (an internal registry or mirror the workers' DNS does not know). Returns
 * its lines normalised for Squid's hosts_file (comments dropped, names in lower case), undefined
 * when the setting is unset. A ConfigError names the setting, the line and the fix when the file
 * is missing, unreadable or not hosts format, or maps a name to an address setup may not reach:
 * the proxy refuses private addresses whatever resolved them, so such an address must be in
 * LILYPAD_SETUP_EGRESS_PRIVATE too, and loopback, link-local and the like never can be.
 */
export function readEgressHostsFile(value: string | undefined, privateAllow: readonly AddressRange[], cwd = process.cwd()): string | undefined {
  const given = value?.trim();
  if (!given) return undefined;
  const file = path.resolve(cwd, given);
  const fail = (problem: string, fix: string) => new ConfigError(`${HOSTS_VAR}=${given}: ${file} ${problem}; ${fix}`);
  let text: string;
  try {
    const info = statSync(file);
    if (!info.isFile()) throw fail('is not a file', 'give the path of a hosts-format file ("<address> <name>..." per line)');
    if (info.size > MAX_HOSTS_BYTES) throw fail(`is ${info.size} bytes, more than a hosts file for a few registries needs (1 MiB)`, 'list only the names setup must reach');
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw fail('does not exist', 'give the path of a hosts-format file on the worker machine, or unset the setting');
    throw fail(`cannot be read (${code ?? (err as Error).message})`, 'make it readable by the user Lilypad runs as');
  }
  const reachable = refusedMinusExempt(builtInRefused(), privateAllow);
  const never = NEVER_EXEMPT.map(mustParseCidr);
  const out: string[] = [];
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const where = `line ${i + 1} (${JSON.stringify(raw.trim())})`;
    const problem = hostsLineProblem(raw);
    if (problem) throw fail(`${where}: ${problem}`, 'write one "<address> <name>..." per line, e.g. "10.20.0.5 npm.internal.example"');
    const [ip, ...names] = raw.replace(/#.*/, '').trim().split(/\s+/);
    if (!ip) continue;
    if (never.some((r) => addressRefused(ip, [r]))) {
      throw fail(`${where}: ${ip} is a loopback, link-local, multicast or reserved address, which setup may never reach`, 'map the name to the address of the mirror on your network');
    }
    if (addressRefused(ip, reachable)) {
      throw fail(`${where}: ${ip} is a private address, which the egress proxy refuses`, `add it (or its range) to ${PRIVATE_VAR}, e.g. ${PRIVATE_VAR}=${ip}${net.isIPv4(ip) ? '/32' : '/128'}`);
    }
    out.push(`${ip} ${names.map((n) => n.toLowerCase().replace(/\.$/, '')).join(' ')}`);
  }
  return out.length > 0 ? `${out.join('\n')}\n` : '';
}

// ---------------------------------------------------------------------------------------------
// Addresses of this machine
// ---------------------------------------------------------------------------------------------

/**
 * This machine's own addresses: the worker's interfaces, the Docker host's (read in the host's
 * network namespace: under Compose the worker's own namespace is a container's, and the host's
 * addresses would be missed), `host.docker.internal` and the like from /etc/hosts, and every
 * Docker network's subnet and gateway. IPv4-mapped forms are given as IPv4.
 */
async function localAddressRanges(docker: Docker, probeImage: string, labels: Record<string, string>): Promise<{ host: AddressRange[]; subnets: AddressRange[] }> {
  const host: AddressRange[] = [];
  const subnets: AddressRange[] = [];
  const add = (to: AddressRange[], r: AddressRange | undefined) => {
    if (!r) return;
    const mapped = mustParseCidr(IPV4_MAPPED);
    to.push(contains(mapped, r) ? { family: 4, base: r.base & 0xffffffffn, prefix: Math.max(0, r.prefix - 96) } : r);
  };
  for (const list of Object.values(os.networkInterfaces())) {
    for (const addr of list ?? []) add(host, parseCidr(addr.address));
  }
  for (const r of await dockerHostAddresses(docker, probeImage, labels)) add(host, r);
  for (const ip of await hostsFileGatewayAddresses()) add(host, parseCidr(ip));
  const networks = await bounded('listing Docker networks', docker.listNetworks()).catch((err: unknown) => {
    throw dockerFailure('listing Docker networks', err);
  });
  for (const n of networks) {
    for (const c of n.IPAM?.Config ?? []) {
      add(subnets, c.Subnet ? parseCidr(c.Subnet) : undefined);
      // A gateway is the host's end of the bridge: the host itself.
      add(host, c.Gateway ? parseCidr(c.Gateway) : undefined);
    }
  }
  return { host, subnets };
}

/** Names Docker and Compose give the host (extra_hosts: host-gateway); read from /etc/hosts, never looked up. */
const HOST_GATEWAY_NAMES = new Set(['host.docker.internal', 'gateway.docker.internal', 'host-gateway']);

async function hostsFileGatewayAddresses(file = '/etc/hosts'): Promise<string[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const out: string[] = [];
  for (const raw of text.split('\n')) {
    const [ip = '', ...names] = raw.replace(/#.*/, '').trim().split(/\s+/);
    if (net.isIP(ip) !== 0 && names.some((n) => HOST_GATEWAY_NAMES.has(n.toLowerCase()))) out.push(ip);
  }
  return out;
}

/**
 * The Docker host's own addresses, read by a short-lived container in the host's network
 * namespace (/proc/net/fib_trie's local routes and /proc/net/if_inet6), under the engine's default
 * runtime (gVisor would show its own /proc/net). It runs `cat` from `image` (the egress image),
 * without capabilities, on a read-only root. Fails closed: a policy that cannot know the host's
 * addresses is not started.
 */
export async function dockerHostAddresses(docker: Docker, image: string, labels: Record<string, string> = {}): Promise<AddressRange[]> {
  const what = "reading the Docker host's own addresses";
  let container: Docker.Container;
  try {
    container = await bounded(
      what,
      docker.createContainer({
        Image: image,
        Entrypoint: ['cat', '/proc/net/fib_trie', '/proc/net/if_inet6'],
        Cmd: [],
        Env: [],
        Labels: { ...labels, [LABEL_MANAGED]: 'true', [LABEL_ROLE]: ROLE_DISCOVERY },
        HostConfig: {
          NetworkMode: 'host',
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges'],
          ReadonlyRootfs: true,
          Memory: 64 * 1024 * 1024,
          MemorySwap: 64 * 1024 * 1024,
          PidsLimit: 16,
          Privileged: false,
        },
      }),
    );
  } catch (err) {
    throw dockerFailure(what, err, { image, imageVar: 'LILYPAD_EGRESS_IMAGE' });
  }
  try {
    await bounded(what, container.start());
    const exit = await bounded(what, container.wait() as Promise<{ StatusCode?: number }>);
    const { stdout, stderr } = demux(await bounded(what, container.logs({ stdout: true, stderr: true, follow: false })));
    // if_inet6 is missing where the host has IPv6 off: cat still prints fib_trie and exits 1.
    const ranges = parseHostAddresses(stdout);
    if (ranges.filter((r) => r.family === 4).length === 0) {
      throw new SandboxError(`${what} failed (exit ${exit.StatusCode}): ${stderr.trim().slice(-300) || 'no IPv4 address in /proc/net/fib_trie'}`);
    }
    return ranges;
  } catch (err) {
    throw dockerFailure(what, err);
  } finally {
    await bounded('removing the address probe', container.remove({ force: true, v: true })).catch(() => undefined);
  }
}

/** The local addresses in /proc/net/fib_trie (`|-- a.b.c.d` then `/n host LOCAL`) and /proc/net/if_inet6 lines. */
export function parseHostAddresses(text: string): AddressRange[] {
  const out: AddressRange[] = [];
  let last: string | undefined;
  for (const line of text.split('\n')) {
    const leaf = /^\s*\|--\s+(\d+\.\d+\.\d+\.\d+)\s*$/.exec(line);
    if (leaf) {
      last = leaf[1];
      continue;
    }
    const local = /^\s*\/(\d+)\s+host\s+LOCAL\s*$/.exec(line);
    if (local && last) {
      const r = parseCidr(`${last}/${local[1]}`);
      if (r) out.push(r);
      continue;
    }
    const v6 = /^([0-9a-f]{32})\s/.exec(line);
    if (v6?.[1]) {
      const r = parseCidr(v6[1].match(/.{4}/g)!.join(':'));
      if (r) out.push(r);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Registry discovery: what the sandbox image's own tools are configured to use
// ---------------------------------------------------------------------------------------------

// Runs inside the sandbox image with no network. Reads apt's sources (one-line and deb822),
// npm's effective configuration (default and scoped registries), pip's built-in index and file
// host and pip's configuration (files and PIP_* variables). Prints one JSON line.
const DISCOVERY_SCRIPT = String.raw`
import glob, json, os, re, subprocess
urls, hosts, notes = [], [], []

def apt():
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*")):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        if path.endswith(".sources"):
            field = None
            for raw in text.splitlines():
                line = raw.split("#", 1)[0]
                if not line.strip():
                    field = None
                elif line[0] in " \t":
                    if field == "uris":
                        urls.extend(line.split())
                else:
                    key, _, val = line.partition(":")
                    field = key.strip().lower()
                    if field == "uris":
                        urls.extend(val.split())
        elif path.endswith(".list"):
            for raw in text.splitlines():
                m = re.match(r"\s*deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(\S+)", raw)
                if m:
                    urls.append(m.group(1))

def npm():
    env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false")
    try:
        out = subprocess.run(["npm", "config", "list", "--json"], capture_output=True, text=True, timeout=60, env=env).stdout
        config = json.loads(out)
    except FileNotFoundError:
        return
    except Exception as e:
        notes.append("npm: %s" % e)
        return
    for key, val in config.items():
        if (key == "registry" or key.endswith(":registry")) and isinstance(val, str):
            urls.append(val)

def pip():
    try:
        from pip._internal.models.index import PyPI
        urls.append(PyPI.simple_url)
        hosts.append(PyPI.file_storage_domain)
    except ImportError:
        return
    except Exception as e:
        notes.append("pip: %s" % e)
    try:
        from pip._internal.configuration import Configuration
        conf = Configuration(isolated=False)
        conf.load()
        for key, val in conf.items():
            name = key.split(".", 1)[-1]
            if name in ("index-url", "extra-index-url", "find-links"):
                urls.extend(str(val).split())
            elif name == "trusted-host":
                hosts.extend(str(val).split())
    except Exception as e:
        notes.append("pip configuration: %s" % e)

for step in (apt, npm, pip):
    try:
        step()
    except Exception as e:
        notes.append("%s: %s" % (step.__name__, e))
print(json.dumps({"urls": urls, "hosts": hosts, "notes": notes}))
`;

const discoveryOutput = z.object({ urls: z.array(z.string()), hosts: z.array(z.string()), notes: z.array(z.string()) });

interface RegistryDiscovery {
  /** Host names to allow. */
  hosts: string[];
  /** What was found but cannot be allowed (IP literals, odd URLs) and what the tools complained about. */
  notes: string[];
}

/** Runs the sandbox image once, hardened and without network, and reads which registries its tools use. */
export async function discoverRegistryHosts(docker: Docker, sandboxImage: string, labels: Record<string, string> = {}): Promise<RegistryDiscovery> {
  const what = `reading the package registries configured in ${sandboxImage}`;
  const discoveryRuntime = sandboxRuntimeOf(docker);
  // Under gVisor the host's pids limit counts the sentry's threads: the process cap goes to
  // RLIMIT_NPROC, which the sentry enforces (see createHardenedContainer).
  const gvisor = isGvisor(docker, discoveryRuntime);
  let container: Docker.Container;
  try {
    container = await bounded(
      what,
      docker.createContainer({
        Image: sandboxImage,
        Entrypoint: ['python3', '-c', DISCOVERY_SCRIPT],
        Cmd: [],
        Env: [],
        WorkingDir: '/',
        Labels: { ...labels, [LABEL_MANAGED]: 'true', [LABEL_ROLE]: ROLE_DISCOVERY },
        HostConfig: {
          // It runs the sandbox image's own tools: under the sandboxes' runtime (LILYPAD_SANDBOX_RUNTIME).
          ...(discoveryRuntime ? { Runtime: discoveryRuntime } : {}),
          NetworkMode: 'none',
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges'],
          Memory: 512 * 1024 * 1024,
          MemorySwap: 512 * 1024 * 1024,
          PidsLimit: hostPidsLimit(64, gvisor),
          ...(gvisor ? { Ulimits: [{ Name: 'nproc', Soft: 64, Hard: 64 }] } : {}),
          Privileged: false,
        },
      }),
    );
  } catch (err) {
    throw dockerFailure(what, err, { image: sandboxImage, imageVar: 'LILYPAD_SANDBOX_IMAGE' });
  }
  try {
    await bounded(what, container.start());
    const exit = await bounded(what, container.wait() as Promise<{ StatusCode?: number }>, DISCOVERY_MS);
    const { stdout, stderr } = demux(await bounded(what, container.logs({ stdout: true, stderr: true, follow: false })));
    if (exit.StatusCode !== 0) {
      throw new SandboxError(`${what} failed (exit ${exit.StatusCode}): ${stderr.trim().slice(-500)}. The image needs python3; or list the registries yourself in ${POLICY_VAR}.`);
    }
    return hostsFromDiscovery(stdout);
  } catch (err) {
    throw dockerFailure(what, err);
  } finally {
    await bounded('removing the discovery container', container.remove({ force: true, v: true })).catch(() => undefined);
  }
}

function hostsFromDiscovery(stdout: string): RegistryDiscovery {
  const lastLine = stdout.trim().split('\n').pop() ?? '';
  let parsed: z.infer<typeof discoveryOutput>;
  try {
    parsed = discoveryOutput.parse(JSON.parse(lastLine));
  } catch (err) {
    throw new SandboxError(`could not read the registry discovery output (${(err as Error).message}): ${lastLine.slice(0, 200)}`);
  }
  const hosts = new Set<string>();
  const notes = [...parsed.notes];
  const add = (raw: string, from: string) => {
    const name = raw.toLowerCase().replace(/\.$/, '');
    if (isHostName(name)) hosts.add(name);
    else notes.push(`${from} ${JSON.stringify(raw)} is not a host name the proxy can allow`);
  };
  for (const u of parsed.urls) {
    let url: URL;
    try {
      url = new URL(u);
    } catch {
      notes.push(`skipped ${JSON.stringify(u)}: not a URL`);
      continue;
    }
    if (url.protocol === 'http:' || url.protocol === 'https:') add(url.hostname, 'the host of');
    else if (url.protocol !== 'file:') notes.push(`skipped ${JSON.stringify(u)}: only http and https go through the proxy`);
  }
  for (const h of parsed.hosts) add(h.replace(/:\d+$/, ''), 'the host');
  return { hosts: [...hosts].sort(), notes };
}

/** Splits Docker's multiplexed log stream (8-byte frame headers) into stdout and stderr. */
function demux(buf: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let at = 0;
  while (at + 8 <= buf.length) {
    const size = buf.readUInt32BE(at + 4);
    const chunk = buf.subarray(at + 8, at + 8 + size);
    (buf[at] === 2 ? err : out).push(chunk);
    at += 8 + size;
  }
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

// ---------------------------------------------------------------------------------------------
// The proxy and the per-run setup networks
// ---------------------------------------------------------------------------------------------

interface EgressProxyOptions {
  /** The proxy image (LILYPAD_EGRESS_IMAGE). */
  image: string;
  /** Anything but `none`: with `none` setup runs on network `none` and no proxy is needed. */
  policy: EgressPolicy;
  /** Ranges exempt from the private-address refusal (LILYPAD_SETUP_EGRESS_PRIVATE). */
  privateAllow: readonly AddressRange[];
  labels: Record<string, string>;
  /** Needed when the policy has `registries`: the image whose tools' registries are allowed. */
  sandboxImage?: string | undefined;
  /** Squid hosts_file content (tests map allowlisted names to local containers with it). */
  hostsFile?: string | undefined;
  /** The network the proxy reaches the outside through (default: Docker's default bridge). */
  outboundNetwork?: string | undefined;
  /** Squid's DNS servers; default: the container's resolv.conf. */
  dnsServers?: readonly string[] | undefined;
  /** Container name; default lilypad-egress-<random>. */
  name?: string | undefined;
}

export interface SetupNetwork {
  /** Docker network to create the sandbox on (`Sandbox.create(..., { network: name })`). */
  name: string;
  /** http://<proxy address on this network>:3128 (an address: the sandbox has no DNS). */
  proxyUrl: string;
  /** Environment for setup commands: proxy variables for curl, pip, npm, git and the rest. */
  env: Record<string, string>;
  /** Disconnects everything from the network and removes it (idempotent, never throws). */
  dispose(): Promise<void>;
}

/** One Squid container per worker; each run gets its own internal network to it. */
export class EgressProxy {
  private stopped: Promise<void> | undefined;
  private readonly networks = new Map<string, SetupNetwork>();

  private constructor(
    private readonly docker: Docker,
    /** The current container; replaced when the engine stopped the last one (see ensureRunning). */
    public container: Docker.Container,
    /** Creates a new proxy container with the same policy. */
    private readonly create: () => Promise<Docker.Container>,
    /** The names the proxy allows ('*' for any public name), for logs and status. */
    readonly allowed: '*' | readonly string[],
    /** What registry discovery could not turn into allowed names. */
    readonly notes: readonly string[],
  ) {}

  get id(): string {
    return this.container.id;
  }

  static async start(docker: Docker, opts: EgressProxyOptions): Promise<EgressProxy> {
    const { allow, notes } = await allowedNames(docker, opts);
    const outbound = opts.outboundNetwork ?? 'bridge';
    const local = await localAddressRanges(docker, opts.image, opts.labels);
    // A private mirror may be exempted (LILYPAD_SETUP_EGRESS_PRIVATE); the host's own addresses never are.
    const refused = refusedMinusExempt([...refusedMinusExempt([...ALWAYS_REFUSED.map(mustParseCidr), ...local.subnets], opts.privateAllow), ...local.host], []);
    const squid = renderSquidPolicy({ allow, refused, refusedClients: await networkSubnets(docker, outbound), dnsServers: opts.dnsServers });
    const hosts = opts.hostsFile === undefined ? '' : checkHostsFile(opts.hostsFile);
    const create = () => createProxyContainer(docker, opts, outbound, squid, hosts);
    const container = await create();
    const proxy = new EgressProxy(docker, container, create, allow, notes);
    try {
      await bounded('starting the egress proxy', container.start());
      await waitUntilListening(container);
      return proxy;
    } catch (err) {
      await proxy.stop();
      throw dockerFailure('starting the egress proxy', err);
    }
  }

  /** Creates the run's internal network, attaches the proxy and returns what setup commands need. */
  async openSetupNetwork(runId: string, labels: Record<string, string> = {}): Promise<SetupNetwork> {
    if (this.stopped) throw new SandboxError('the egress proxy has been stopped');
    const name = `lilypad-setup-${runId.replace(/[^A-Za-z0-9_.-]/g, '-')}`.slice(0, 200);
    const network = await createSetupNetwork(this.docker, name, {
      ...labels,
      [LABEL_MANAGED]: 'true',
      [LABEL_ROLE]: ROLE_SETUP_NETWORK,
      [LABEL_RUN]: runId,
    });
    try {
      await this.ensureRunning();
      await bounded('attaching the egress proxy to the setup network', network.connect({ Container: this.container.id }));
      const info = await bounded('inspecting the egress proxy', this.container.inspect());
      if (!info.State.Running) {
        throw new SandboxError(`the egress proxy is not running (exit code ${info.State.ExitCode}); see \`docker logs ${info.Name.replace(/^\//, '')}\` and restart the worker`);
      }
      const ip = info.NetworkSettings.Networks[name]?.IPAddress;
      if (!ip) throw new SandboxError(`the egress proxy got no address on ${name}`);
      const proxyUrl = `http://${ip}:${PROXY_PORT}`;
      const setup: SetupNetwork = {
        name,
        proxyUrl,
        env: proxyEnvironment(proxyUrl),
        dispose: once(async () => {
          this.networks.delete(name);
          await removeNetwork(this.docker, name);
        }),
      };
      this.networks.set(name, setup);
      return setup;
    } catch (err) {
      await removeNetwork(this.docker, name);
      throw dockerFailure(`connecting the egress proxy to ${name}`, err);
    }
  }

  /**
   * A restart of the Docker engine stops the proxy with every other container, still attached to
   * setup networks that are gone by now: it cannot simply be started again. A new one takes its place.
   */
  private async ensureRunning(): Promise<void> {
    const info = await bounded('inspecting the egress proxy', this.container.inspect()).catch(() => undefined);
    if (info?.State.Running) return;
    await bounded('removing the stopped egress proxy', this.container.remove({ force: true, v: true })).catch(() => undefined);
    this.container = await this.create();
    await bounded('starting the egress proxy', this.container.start());
    await waitUntilListening(this.container);
  }

  /** The same as openSetupNetwork: lets the proxy serve as the session's setup-network provider. */
  open(runId: string, labels: Record<string, string> = {}): Promise<SetupNetwork> {
    return this.openSetupNetwork(runId, labels);
  }

  /** Squid's log (one line per decision) as `docker logs` shows it. */
  async logs(): Promise<string> {
    const raw = await bounded('reading the egress proxy log', this.container.logs({ stdout: true, stderr: false, follow: false }));
    return demux(raw).stdout;
  }

  /** Removes every setup network still open and the container (idempotent, never throws). */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      await Promise.all([...this.networks.values()].map((n) => n.dispose()));
      await bounded('removing the egress proxy', this.container.remove({ force: true, v: true })).catch(() => undefined);
    })();
    return this.stopped;
  }
}

async function allowedNames(docker: Docker, opts: EgressProxyOptions): Promise<{ allow: '*' | string[]; notes: string[] }> {
  const { policy } = opts;
  if (policy.mode === 'none') {
    throw new SandboxError(`${POLICY_VAR}=none gives setup no network at all: create the sandbox on network none instead of starting a proxy`);
  }
  if (policy.mode === 'any') return { allow: '*', notes: [] };
  if (!policy.registries) return { allow: [...policy.domains], notes: [] };
  if (!opts.sandboxImage) throw new SandboxError(`${POLICY_VAR} has registries: EgressProxy.start needs the sandbox image to read them from`);
  const found = await discoverRegistryHosts(docker, opts.sandboxImage, opts.labels);
  return { allow: minimalDomains([...policy.domains, ...found.hosts]), notes: found.notes };
}

async function networkSubnets(docker: Docker, name: string): Promise<AddressRange[]> {
  const info = await bounded(`inspecting network ${name}`, docker.getNetwork(name).inspect() as Promise<Docker.NetworkInspectInfo>).catch((err: unknown) => {
    throw dockerFailure(`inspecting the egress proxy's outbound network ${name}`, err);
  });
  return (info.IPAM?.Config ?? []).flatMap((c) => {
    const r = c.Subnet ? parseCidr(c.Subnet) : undefined;
    return r ? [r] : [];
  });
}

async function createProxyContainer(docker: Docker, opts: EgressProxyOptions, outbound: string, squid: string, hosts: string): Promise<Docker.Container> {
  // Squid parses every request the sandboxes' setup sends: it runs under their runtime
  // (LILYPAD_SANDBOX_RUNTIME, gVisor with runsc), so a parser bug exploited from a sandbox meets
  // the same kernel boundary as the sandbox itself. The address probe above stays on the engine's
  // default: it reads the host's own /proc/net, which gVisor would replace with its own.
  const runtime = sandboxRuntimeOf(docker);
  const gvisor = isGvisor(docker, runtime);
  try {
    return await bounded(
      'creating the egress proxy',
      docker.createContainer({
        name: opts.name ?? `lilypad-egress-${Math.random().toString(16).slice(2, 10)}`,
        Image: opts.image,
        Env: [`LILYPAD_EGRESS_POLICY=${Buffer.from(squid).toString('base64')}`, `LILYPAD_EGRESS_HOSTS=${Buffer.from(hosts).toString('base64')}`],
        Labels: { ...opts.labels, [LABEL_MANAGED]: 'true', [LABEL_ROLE]: ROLE_EGRESS },
        HostConfig: {
          ...(runtime ? { Runtime: runtime } : {}),
          NetworkMode: outbound,
          // Squid runs as `proxy` from the start: it needs no capability at all.
          CapDrop: ['ALL'],
          SecurityOpt: ['no-new-privileges'],
          ReadonlyRootfs: true,
          Tmpfs: { [POLICY_DIR]: `rw,noexec,nosuid,nodev,size=4m,uid=${PROXY_UID},gid=${PROXY_UID},mode=0700` },
          Memory: 256 * 1024 * 1024,
          MemorySwap: 256 * 1024 * 1024,
          NanoCpus: 1e9,
          // Under gVisor the host's pids limit counts the sentry's threads: the cap goes to RLIMIT_NPROC.
          PidsLimit: hostPidsLimit(64, gvisor),
          ...(gvisor ? { Ulimits: [{ Name: 'nproc', Soft: 64, Hard: 64 }] } : {}),
          // The proxy sits on every run's network: it must never route between them.
          Sysctls: { 'net.ipv4.ip_forward': '0' },
          Privileged: false,
          // It lives as long as the worker: a crash should not end setup for every later run.
          RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 5 },
        },
      }),
    );
  } catch (err) {
    throw dockerFailure('creating the egress proxy', err, { image: opts.image, imageVar: 'LILYPAD_EGRESS_IMAGE' });
  }
}

async function waitUntilListening(container: Docker.Container): Promise<void> {
  const deadline = Date.now() + PROXY_READY_MS;
  for (;;) {
    const info = await bounded('inspecting the egress proxy', container.inspect());
    const { stderr } = demux(await bounded('reading the egress proxy log', container.logs({ stdout: false, stderr: true, follow: false })));
    if (stderr.includes(READY_LINE)) return;
    if (!info.State.Running) {
      throw new SandboxError(`the egress proxy exited (code ${info.State.ExitCode}) before accepting connections: ${stderr.trim().split('\n').slice(-8).join(' | ')}`);
    }
    if (Date.now() > deadline) throw new SandboxError(`the egress proxy did not accept connections within ${PROXY_READY_MS / 1000} s: ${stderr.trim().slice(-500)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function createSetupNetwork(docker: Docker, name: string, labels: Record<string, string>): Promise<Docker.Network> {
  const create = () =>
    bounded(
      `creating network ${name}`,
      docker.createNetwork({
        Name: name,
        Driver: 'bridge',
        CheckDuplicate: true,
        // Internal: no route out. inhibit_ipv4: the host's end of the bridge gets no address,
        // so the host is not reachable through the gateway address (nor 172.17.0.1) either.
        Internal: true,
        EnableIPv6: false,
        Options: { 'com.docker.network.bridge.inhibit_ipv4': 'true' },
        Labels: labels,
      }),
    );
  try {
    return await create();
  } catch (err) {
    if (statusOf(err) !== 409) throw dockerFailure(`creating network ${name}`, err);
    // A retried job meets its earlier attempt's network: start from a clean one.
    await removeNetwork(docker, name);
    return create().catch((again: unknown) => {
      throw dockerFailure(`creating network ${name}`, again);
    });
  }
}

function proxyEnvironment(proxyUrl: string): Record<string, string> {
  const noProxy = 'localhost,127.0.0.1,::1';
  return {
    HTTP_PROXY: proxyUrl,
    HTTPS_PROXY: proxyUrl,
    NO_PROXY: noProxy,
    http_proxy: proxyUrl,
    https_proxy: proxyUrl,
    no_proxy: noProxy,
    npm_config_proxy: proxyUrl,
    npm_config_https_proxy: proxyUrl,
    PIP_PROXY: proxyUrl,
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.proxy',
    GIT_CONFIG_VALUE_0: proxyUrl,
  };
}

/** Disconnects every container (forcibly) and removes the network; never throws. */
async function removeNetwork(docker: Docker, idOrName: string): Promise<void> {
  const network = docker.getNetwork(idOrName);
  const info = await bounded(`inspecting network ${idOrName}`, network.inspect() as Promise<Docker.NetworkInspectInfo>).catch(() => undefined);
  if (!info) return;
  await Promise.all(
    Object.keys(info.Containers ?? {}).map((id) =>
      bounded(`disconnecting ${id} from ${idOrName}`, network.disconnect({ Container: id, Force: true })).catch(() => undefined),
    ),
  );
  await bounded(`removing network ${idOrName}`, network.remove()).catch(() => undefined);
}

/**
 * Removes egress proxies, setup networks and discovery containers carrying `label=value` and every
 * label of `also` (orphan sweeps give their installation there: nothing of another one goes).
 */
export async function removeEgressLeftovers(docker: Docker, label: string, value: string, also: Record<string, string> = {}): Promise<{ containers: number; networks: number }> {
  const filter = [`${label}=${value}`, ...Object.entries(also).map(([k, v]) => `${k}=${v}`)];
  const containers = await bounded('listing egress containers', docker.listContainers({ all: true, filters: { label: [...filter, LABEL_ROLE] } }));
  const ours = containers.filter((c) => c.Labels[LABEL_ROLE] === ROLE_EGRESS || c.Labels[LABEL_ROLE] === ROLE_DISCOVERY);
  await Promise.all(ours.map((c) => bounded('removing an egress container', docker.getContainer(c.Id).remove({ force: true, v: true })).catch(() => undefined)));
  const networks = await bounded('listing setup networks', docker.listNetworks({ filters: { label: [...filter, `${LABEL_ROLE}=${ROLE_SETUP_NETWORK}`] } }));
  await Promise.all(networks.map((n) => removeNetwork(docker, n.Id)));
  return { containers: ours.length, networks: networks.length };
}

// ---------------------------------------------------------------------------------------------
// Docker plumbing
// ---------------------------------------------------------------------------------------------

/** Bounds one Docker API call: a hung engine becomes a SandboxError instead of a hung job. */
async function bounded<T>(what: string, work: Promise<T>, ms = DOCKER_CALL_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new SandboxError(`${what}: the Docker engine did not answer within ${ms / 1000} s; check it with \`docker info\``)),
      ms,
    );
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function statusOf(err: unknown): number | undefined {
  return (err as { statusCode?: number } | undefined)?.statusCode;
}

function dockerFailure(what: string, err: unknown, image?: { image: string; imageVar: string }): SandboxError {
  if (err instanceof SandboxError) return err;
  const e = err as { statusCode?: number; message?: string; code?: string };
  const message = e.message ?? String(err);
  if (image && e.statusCode === 404 && /image/i.test(message)) {
    const build = image.imageVar === 'LILYPAD_EGRESS_IMAGE' ? 'build it with `npm run images`' : 'build the default one with `npm run images`';
    return new SandboxError(`${what}: the image ${image.image} is not present on the Docker engine; ${build}, or set ${image.imageVar} to an image you have`, { cause: err });
  }
  if (e.code === 'ENOENT' || e.code === 'ECONNREFUSED' || e.code === 'EACCES') {
    return new SandboxError(`${what}: cannot reach the Docker engine (${e.code}); start it (e.g. \`dockerd &\`) or point DOCKER_HOST at it`, { cause: err });
  }
  if (/address pools? (have been fully subnetted|.*available)|non-overlapping/i.test(message)) {
    return new SandboxError(
      `${what}: Docker has no free address range for another network (${message}); remove unused networks (\`docker network prune\`, or Lilypad's leftovers labelled ${LABEL_ROLE}=${ROLE_SETUP_NETWORK}) or widen the engine's default-address-pools`,
      { cause: err },
    );
  }
  return new SandboxError(`${what} failed: ${message}`, { cause: err });
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn().catch(() => undefined));
}
