import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { after, before } from 'node:test';
import type Docker from 'dockerode';
import {
  discoverRegistryHosts,
  dockerHostAddresses,
  EgressProxy,
  formatCidr,
  parseCidr,
  LABEL_ROLE,
  parseEgressPolicy,
  parsePrivateAllow,
  removeEgressLeftovers,
  ROLE_EGRESS,
  ROLE_SETUP_NETWORK,
  type SetupNetwork,
} from '../../../src/sandbox/egress.ts';
import { SandboxError } from '../../../src/sandbox/errors.ts';
import { removeLabelled, Sandbox } from '../../../src/sandbox/sandbox.ts';
import {
  buildImage,
  EGRESS_TEST_IMAGE,
  execIn,
  HTTP_PORT,
  listenOnHost,
  networkGateway,
  removeImage,
  removeTestNetwork,
  requireImages,
  startHttpServer,
  type HostListener,
  type TestServer,
} from '../../support/egress-harness.ts';
import { faultTest } from '../../support/fault-table.ts';
import { TEST_IMAGE, TEST_RUNTIME, TEST_WORKDIR, testDocker } from '../../support/sandbox-harness.ts';

// Everything here stays on this machine: the proxy's outbound network is an internal network the
// test creates (its "internet" is two containers the test starts), Squid's DNS server is
// 127.0.0.1 inside its own container (so no name ever goes to the machine's resolver), and the
// only other target is a listener this process opens.

const TEST_LABEL = 'dev.lilypad.test';
const id = `${process.pid}-${Math.random().toString(16).slice(2, 8)}`;
const labels = { [TEST_LABEL]: `egress-${id}` };
const OUTBOUND = `lilypad-test-egress-out-${id}`;
const REGISTRY_BODY = `registry stand-in ${id}`;
const PRIVATE_BODY = `private service ${id}`;
const CONFIGURED_IMAGE = `lilypad-test-registries:${id}`;

const PROBE = String.raw`
import os, socket, sys, urllib.error, urllib.parse, urllib.request
kind, target = sys.argv[1], sys.argv[2]
def out(*a):
    print(*a, flush=True)
def connect_via_proxy():
    p = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    s = socket.create_connection((p.hostname, p.port), timeout=15)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    f = s.makefile("rb")
    status = f.readline().decode().strip()
    squid = "-"
    while True:
        line = f.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "x-squid-error":
            squid = value.strip()
    if status.split()[1:2] != ["200"]:
        out("TUNNEL", status, "SQUID", squid)
        return
    s.sendall(b"GET / HTTP/1.0\r\nHost: tunnel\r\n\r\n")
    out("TUNNEL", status, "BODY", f.read().decode(errors="replace").split("\r\n\r\n", 1)[-1][:200])
try:
    if kind == "get":
        try:
            r = urllib.request.urlopen(target, timeout=15)
            out("STATUS", r.status, "BODY", r.read().decode(errors="replace")[:200])
        except urllib.error.HTTPError as e:
            out("STATUS", e.code, "SQUID", e.headers.get("X-Squid-Error", "-"))
    elif kind == "connect":
        connect_via_proxy()
    elif kind == "direct":
        host, port = target.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=4).close()
        out("CONNECTED")
    elif kind == "interfaces":
        out("INTERFACES", " ".join(sorted(os.listdir("/sys/class/net"))))
except Exception as e:
    out("ERROR", type(e).__name__, e)
`;

let docker: Docker;
let proxy: EgressProxy | undefined;
let setup: SetupNetwork | undefined;
let sandbox: Sandbox | undefined;
let registry: TestServer | undefined;
let privateService: TestServer | undefined;
let host: HostListener | undefined;
let outboundGateway = '';
/** Requests the test sandbox sent to the proxy (each must leave one access-log line). */
let proxyRequests = 0;

before(async () => {
  // Sandboxes (and the registry discovery) under LILYPAD_SANDBOX_RUNTIME when it is set.
  docker = await testDocker();
  await requireImages(docker, [TEST_IMAGE, EGRESS_TEST_IMAGE]);
  host = await listenOnHost();
  // With IPv6 (a unique-local /64 of its own), so that Squid resolves and would connect to IPv6
  // answers: the IPv4-embedding rows then test the policy, not a proxy without IPv6.
  const h = randomBytes(5).toString('hex');
  const v6 = `fd${h.slice(0, 2)}:${h.slice(2, 6)}:${h.slice(6, 10)}::/64`;
  await docker.createNetwork({ Name: OUTBOUND, Driver: 'bridge', Internal: true, EnableIPv6: true, IPAM: { Config: [{ Subnet: v6 }] }, Labels: labels });
  outboundGateway = (await networkGateway(docker, OUTBOUND)) ?? '';
  registry = await startHttpServer(docker, { name: `lilypad-test-registry-${id}`, network: OUTBOUND, body: REGISTRY_BODY, labels });
  privateService = await startHttpServer(docker, { name: `lilypad-test-private-${id}`, network: OUTBOUND, body: PRIVATE_BODY, labels });
  const hostsFile = [
    `${registry.ip} allowed.test`,
    `${privateService.ip} private.test`,
    `${outboundGateway} host-gateway.test`,
    ...hostAddresses().map((a, i) => `${a} host-${i}.test`),
    ...embeddedForms(privateService.ip).map(([name, ip]) => `${ip} ${name}`),
    `::ffff:${registry.ip} mapped-allowed.test`,
  ].join('\n');
  const allow = [
    'allowed.test',
    'private.test',
    'host-gateway.test',
    ...hostAddresses().map((_, i) => `host-${i}.test`),
    ...embeddedForms(privateService.ip).map(([name]) => name),
    'mapped-allowed.test',
  ];
  proxy = await EgressProxy.start(docker, {
    image: EGRESS_TEST_IMAGE,
    policy: parseEgressPolicy(allow.join(','), { githubHost: 'git.test' }),
    privateAllow: parsePrivateAllow(`${registry.ip}/32`),
    labels,
    hostsFile: `${hostsFile}\n`,
    outboundNetwork: OUTBOUND,
    dnsServers: ['127.0.0.1'],
    name: `lilypad-test-egress-${id}`,
  });
  setup = await proxy.openSetupNetwork(`egress-test-${id}`, labels);
  sandbox = await Sandbox.create(docker, {
    image: TEST_IMAGE,
    workdir: TEST_WORKDIR,
    memoryMb: 512,
    cpus: 1,
    pids: 128,
    network: setup.name,
    runId: `egress-test-${id}`,
    workerId: os.hostname(),
    labels,
  });
});

after(async () => {
  await sandbox?.destroy();
  await setup?.dispose();
  await proxy?.stop();
  await registry?.remove();
  await privateService?.remove();
  await removeTestNetwork(docker, OUTBOUND);
  await removeImage(docker, CONFIGURED_IMAGE);
  // A safety net for a run that died half-way through `before`.
  await removeEgressLeftovers(docker, TEST_LABEL, labels[TEST_LABEL]).catch(() => undefined);
  await removeLabelled(docker, TEST_LABEL, labels[TEST_LABEL]).catch(() => 0);
  await host?.close();
});

/** Names for IPv6 forms that carry `ipv4` inside (a translator or relay on the way would reach it). */
function embeddedForms(ipv4: string): Array<[string, string]> {
  const [a = 0, b = 0, c = 0, d = 0] = ipv4.split('.').map(Number);
  const hex = (x: number, y: number) => ((x << 8) | y).toString(16);
  return [
    ['mapped.test', `::ffff:${ipv4}`],
    ['nat64.test', `64:ff9b::${ipv4}`],
    ['nat64-local.test', `64:ff9b:1::${hex(a, b)}:${hex(c, d)}`],
    ['sixtofour.test', `2002:${hex(a, b)}:${hex(c, d)}::1`],
    ['teredo.test', `2001:0:4136:e378:8000:63bf:${(0xffff ^ ((a << 8) | b)).toString(16)}:${(0xffff ^ ((c << 8) | d)).toString(16)}`],
    ['compatible.test', `::${ipv4}`],
  ];
}

/** This machine's IPv4 addresses (loopback and docker0 included). */
function hostAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flatMap((list) => list ?? [])
    .filter((a) => a.family === 'IPv4')
    .map((a) => a.address);
}

async function probe(kind: 'get' | 'connect' | 'direct' | 'interfaces', target: string, on: Sandbox | undefined = sandbox, env = setup?.env): Promise<string> {
  if (!on || !env) throw new Error('the test sandbox did not start');
  if (on === sandbox && (kind === 'get' || kind === 'connect')) proxyRequests++;
  const res = await on.exec(['/bin/bash', '-c', 'exec python3 -c "$0" "$@"', PROBE, kind, target], { env, timeoutSeconds: 60 });
  return `${res.stdout.toString('utf8').trim()}${res.stderr.length > 0 ? ` (stderr: ${res.stderr.toString('utf8').trim().slice(0, 200)})` : ''}`;
}

const refused = (out: string) => /^(STATUS 403|TUNNEL HTTP\/1\.1 403)/.test(out) && out.includes('ERR_ACCESS_DENIED');
const notConnected = (out: string) => out.startsWith('ERROR') && !out.includes('CONNECTED');

faultTest(
  'setup command connects straight to a listener on the host through the setup network gateway and 172.17.0.1',
  'no connection: the setup network has no route out and the host has no address on it',
  async () => {
    const gateway = (await networkGateway(docker, setup!.name)) ?? '';
    const results: string[] = [];
    for (const ip of [gateway, '172.17.0.1'].filter((a) => a !== '')) results.push(`${ip}: ${await probe('direct', `${ip}:${host!.port}`)}`);
    const seen = host!.connections();
    return {
      observed: `${results.join('; ')}; host listener accepted ${seen} connection(s)${gateway ? '' : '; (network reports no gateway address)'}`,
      pass: results.length === (gateway ? 2 : 1) && results.every((r) => notConnected(r.slice(r.indexOf(':') + 2))) && seen === 0,
    };
  },
);

faultTest(
  'setup command reaches a private service (a container on another Docker network that the proxy itself can reach) directly, by IP through the proxy, and by an allowlisted name that resolves to it',
  'direct: no route; through the proxy: 403 (ip-literal, resolves-to-refused-address)',
  async () => {
    const target = `${privateService!.ip}:${HTTP_PORT}`;
    const direct = await probe('direct', target);
    const byIp = await probe('get', `http://${target}/`);
    const byName = await probe('get', `http://private.test:${HTTP_PORT}/`);
    const tunnel = await probe('connect', `private.test:${HTTP_PORT}`);
    const all = [direct, byIp, byName, tunnel].join(' | ');
    return {
      observed: `direct: ${direct}; GET by IP: ${byIp}; GET private.test: ${byName}; CONNECT private.test: ${tunnel}`,
      pass: notConnected(direct) && refused(byIp) && refused(byName) && refused(tunnel) && !all.includes(PRIVATE_BODY),
    };
  },
);

faultTest(
  'setup command asks the proxy for allowlisted names that resolve to this machine (its outbound gateway and every host interface address)',
  '403 for each; the host listener sees no connection',
  async () => {
    const names = ['host-gateway.test', ...hostAddresses().map((_, i) => `host-${i}.test`)];
    const results: string[] = [];
    for (const n of names) results.push(`${n}: ${await probe('get', `http://${n}:${host!.port}/`)}`);
    const seen = host!.connections();
    return {
      observed: `${results.map((r) => r.replace(/ SQUID ERR_ACCESS_DENIED 0/, '')).join('; ')}; host listener accepted ${seen} connection(s)`,
      pass: results.every((r) => refused(r.slice(r.indexOf(':') + 2))) && seen === 0,
    };
  },
);

faultTest(
  'setup command asks for allowlisted names that resolve to IPv6 forms carrying the private service address (IPv4-mapped, NAT64 well-known and local-use, 6to4, Teredo, IPv4-compatible)',
  '403 (resolves-to-refused-address) for each: the IPv4-embedding ranges are refused whole',
  async () => {
    const results: string[] = [];
    for (const [name, ip] of embeddedForms(privateService!.ip)) results.push(`${name} (${ip}): ${await probe('get', `http://${name}:${HTTP_PORT}/`)}`);
    // Not part of the verdict: how Squid treats an IPv4-mapped answer for the exempted registry.
    const mappedAllowed = await probe('get', `http://mapped-allowed.test:${HTTP_PORT}/`);
    return {
      observed: `${results.join('; ')}; (exempted registry as ::ffff: ${mappedAllowed.slice(0, 60)})`,
      pass: results.every((r) => refused(r.slice(r.indexOf('): ') + 3))) && !results.join().includes(PRIVATE_BODY),
    };
  },
);

faultTest(
  "the Docker host's own addresses, read from a container in the host's network namespace (the worker may itself run in a container under Compose)",
  "every address of this machine's interfaces is among them, so the proxy refuses it whatever namespace the worker reads its own interfaces in",
  async () => {
    const found = (await dockerHostAddresses(docker, EGRESS_TEST_IMAGE, labels)).map(formatCidr);
    const mine = Object.values(os.networkInterfaces())
      .flatMap((list) => list ?? [])
      .filter((a) => !a.address.startsWith('fe80'))
      .map((a) => formatCidr(parseCidr(a.address)!));
    const missing = mine.filter((m) => !found.includes(m));
    return { observed: `${found.length} host address(es) read; this machine's ${mine.length} interface address(es) missing from them: ${missing.length ? missing.join(', ') : 'none'}`, pass: mine.length > 0 && missing.length === 0 };
  },
);

faultTest('setup command uses IP literals through the proxy (HTTP and CONNECT, IPv4 and IPv6, odd IPv4 notations)', '403 from the proxy for each', async () => {
  const targets: Array<['get' | 'connect', string]> = [
    ['get', `http://${registry!.ip}:${HTTP_PORT}/`],
    ['connect', `${registry!.ip}:${HTTP_PORT}`],
    ['get', `http://[::1]:${HTTP_PORT}/`],
    ['connect', `[::1]:${HTTP_PORT}`],
    ['get', `http://2130706433:${HTTP_PORT}/`],
    ['get', `http://0x7f.1:${HTTP_PORT}/`],
  ];
  const results: string[] = [];
  for (const [kind, t] of targets) results.push(`${kind} ${t}: ${await probe(kind, t)}`);
  return {
    observed: results.join('; '),
    pass: results.every((r) => refused(r.slice(r.indexOf(': ') + 2))) && !results.join().includes(REGISTRY_BODY),
  };
});

faultTest('setup command asks for a name that is not on the allowlist (HTTP and CONNECT)', '403 from the proxy, decided before any DNS lookup', async () => {
  const get = await probe('get', `http://denied.test:${HTTP_PORT}/`);
  const tunnel = await probe('connect', 'denied.test:443');
  const log = await proxy!.logs();
  const logged = log.split('\n').filter((l) => l.includes('denied.test'));
  return {
    observed: `GET: ${get}; CONNECT: ${tunnel}; proxy log: ${logged.map((l) => l.replace(/^\S+ /, '')).join(' / ')}`,
    pass: refused(get) && refused(tunnel) && logged.length === 2 && logged.every((l) => l.includes('decision=refused:name-not-allowed')),
  };
});

faultTest(
  'setup command fetches from an allowlisted name (mapped by the hosts file to a test server whose /32 is exempted)',
  'the server body comes back over HTTP and through a CONNECT tunnel',
  async () => {
    const get = await probe('get', `http://allowed.test:${HTTP_PORT}/`);
    const tunnel = await probe('connect', `allowed.test:${HTTP_PORT}`);
    return {
      observed: `GET: ${get}; CONNECT: ${tunnel}`,
      pass: get === `STATUS 200 BODY ${REGISTRY_BODY}` && tunnel.startsWith('TUNNEL HTTP/1.1 200') && tunnel.endsWith(`BODY ${REGISTRY_BODY}`),
    };
  },
);

faultTest(
  "a container on the proxy's outbound network uses the proxy",
  '403: only clients on setup networks are served',
  async () => {
    const info = await proxy!.container.inspect();
    const proxyIp = info.NetworkSettings.Networks[OUTBOUND]?.IPAddress ?? '';
    const script = 'import urllib.request,urllib.error,sys\ntry:\n  print(urllib.request.urlopen(sys.argv[1], timeout=10).status)\nexcept urllib.error.HTTPError as e:\n  print(e.code, e.headers.get("X-Squid-Error"))';
    proxyRequests++;
    const out = (await execIn(privateService!.container, ['python3', '-c', script, `http://allowed.test:${HTTP_PORT}/`], [`http_proxy=http://${proxyIp}:3128`])).trim();
    const log = (await proxy!.logs()).split('\n').filter((l) => l.includes('client-not-on-a-setup-network'));
    return { observed: `${out}; proxy log: ${log.length} line(s) with decision=refused:client-not-on-a-setup-network`, pass: out.startsWith('403') && log.length >= 1 };
  },
);

faultTest('every proxy decision is logged to the container stdout (docker logs)', 'one access-log line per request above, with its decision', async () => {
  const lines = (await proxy!.logs()).split('\n').filter((l) => l.includes(' decision='));
  const kinds = [...new Set(lines.map((l) => /decision=(\S+)/.exec(l)?.[1] ?? '?'))].sort();
  return {
    observed: `${lines.length} lines for ${proxyRequests} requests; decisions: ${kinds.join(', ')}; e.g. "${lines[0]?.replace(/^\S+ /, '') ?? ''}"`,
    pass: lines.length === proxyRequests && ['allowed', 'refused:ip-literal', 'refused:name-not-allowed', 'refused:resolves-to-refused-address'].every((k) => kinds.includes(k)),
  };
});

faultTest('the proxy container itself', "no capabilities, no-new-privileges, read-only root, non-root, limits, labels; the sandboxes' runtime (it parses their traffic)", async () => {
  const info = await proxy!.container.inspect();
  const hc = info.HostConfig;
  // Under LILYPAD_SANDBOX_RUNTIME=runsc the proxy runs under gVisor too; else the engine's default.
  const runtime = TEST_RUNTIME ?? ((await docker.info()) as { DefaultRuntime?: string }).DefaultRuntime ?? 'runc';
  const facts = {
    runtime: hc.Runtime,
    capDrop: (hc.CapDrop ?? []).join(','),
    capAdd: (hc.CapAdd ?? []).join(',') || 'none',
    securityOpt: (hc.SecurityOpt ?? []).join(','),
    readOnlyRoot: hc.ReadonlyRootfs,
    user: info.Config.User,
    memoryMb: (hc.Memory ?? 0) / 1048576,
    pids: hc.PidsLimit,
    role: info.Config.Labels[LABEL_ROLE],
    managed: info.Config.Labels['dev.lilypad.managed'],
  };
  return {
    observed: JSON.stringify(facts),
    pass:
      facts.capDrop === 'ALL' &&
      facts.capAdd === 'none' &&
      facts.securityOpt.includes('no-new-privileges') &&
      facts.readOnlyRoot === true &&
      facts.user === 'proxy' &&
      facts.memoryMb > 0 &&
      (facts.pids ?? 0) > 0 &&
      facts.role === ROLE_EGRESS &&
      facts.managed === 'true' &&
      facts.runtime === runtime,
  };
});

faultTest('setup with LILYPAD_SETUP_EGRESS=none', 'no proxy is started; the sandbox stays on network none: only lo, nothing reachable', async () => {
  const policy = parseEgressPolicy('none', { githubHost: 'git.test' });
  const startError = await EgressProxy.start(docker, { image: EGRESS_TEST_IMAGE, policy, privateAllow: [], labels }).then(
    (p) => p.stop().then(() => 'started'),
    (err: unknown) => (err instanceof SandboxError ? 'refused' : `threw ${(err as Error).message}`),
  );
  const isolated = await Sandbox.create(docker, {
    image: TEST_IMAGE,
    workdir: TEST_WORKDIR,
    memoryMb: 512,
    cpus: 1,
    pids: 128,
    network: policy.mode === 'none' ? 'none' : setup!.name,
    runId: `egress-none-${id}`,
    workerId: os.hostname(),
    labels,
  });
  try {
    const interfaces = await probe('interfaces', '-', isolated);
    const direct = await probe('direct', `172.17.0.1:${host!.port}`, isolated);
    const viaProxy = await probe('get', `http://allowed.test:${HTTP_PORT}/`, isolated);
    return {
      observed: `EgressProxy.start: ${startError}; ${interfaces}; direct to host: ${direct}; via proxy env: ${viaProxy}; host listener ${host!.connections()} connection(s)`,
      pass: startError === 'refused' && interfaces === 'INTERFACES lo' && notConnected(direct) && notConnected(viaProxy) && host!.connections() === 0,
    };
  } finally {
    await isolated.destroy();
  }
});

faultTest(
  'LILYPAD_SETUP_EGRESS=* (any public name) with names that resolve to a private service and to this machine, and an IP literal',
  'an unlisted name is allowed; the private service, the host and the IP literal are still refused',
  async () => {
    const anyProxy = await EgressProxy.start(docker, {
      image: EGRESS_TEST_IMAGE,
      policy: parseEgressPolicy('*', { githubHost: 'git.test' }),
      privateAllow: parsePrivateAllow(`${registry!.ip}/32`),
      labels,
      hostsFile: `${registry!.ip} anything.test\n${privateService!.ip} private.test\n${outboundGateway} host-gateway.test\n`,
      outboundNetwork: OUTBOUND,
      dnsServers: ['127.0.0.1'],
    });
    let anySandbox: Sandbox | undefined;
    try {
      const anySetup = await anyProxy.openSetupNetwork(`egress-any-${id}`, labels);
      anySandbox = await Sandbox.create(docker, {
        image: TEST_IMAGE,
        workdir: TEST_WORKDIR,
        memoryMb: 512,
        cpus: 1,
        pids: 128,
        network: anySetup.name,
        runId: `egress-any-${id}`,
        workerId: os.hostname(),
        labels,
      });
      const run = (target: string) => probe('get', target, anySandbox, anySetup.env);
      const unlisted = await run(`http://anything.test:${HTTP_PORT}/`);
      const priv = await run(`http://private.test:${HTTP_PORT}/`);
      const hostGw = await run(`http://host-gateway.test:${host!.port}/`);
      const literal = await run(`http://${registry!.ip}:${HTTP_PORT}/`);
      return {
        observed: `anything.test: ${unlisted}; private.test: ${priv}; host-gateway.test: ${hostGw}; IP literal: ${literal}; host listener ${host!.connections()} connection(s)`,
        pass: unlisted === `STATUS 200 BODY ${REGISTRY_BODY}` && refused(priv) && refused(hostGw) && refused(literal) && host!.connections() === 0,
      };
    } finally {
      await anySandbox?.destroy();
      await anyProxy.stop();
    }
  },
);

// The sandbox image configured for made-up registries: apt (deb822 with a continuation line, and
// one-line), npm (default and scoped, user config), pip (config file and environment).
const CONFIGURED_DOCKERFILE = `FROM ${TEST_IMAGE}
USER root
RUN printf 'Types: deb\\nURIs: http://apt.allowed.test/debian\\n  http://apt-more.allowed.test/debian\\nSuites: bookworm\\nComponents: main\\n' > /etc/apt/sources.list.d/extra.sources \\
 && echo 'deb [arch=amd64] http://apt-list.allowed.test/debian bookworm main' > /etc/apt/sources.list.d/extra.list \\
 && printf 'registry=https://npm.allowed.test/\\n@team:registry=https://npm-team.allowed.test/\\n' > /home/lilypad/.npmrc \\
 && chown lilypad /home/lilypad/.npmrc \\
 && printf '[global]\\nindex-url = https://pypi.allowed.test/simple\\n' > /etc/pip.conf
ENV PIP_EXTRA_INDEX_URL=https://pypi-extra.allowed.test/simple PIP_TRUSTED_HOST=pip-trusted.allowed.test
USER lilypad
`;

faultTest(
  'LILYPAD_SETUP_EGRESS=registries on a sandbox image whose apt, npm and pip point at other registries',
  'the proxy allows exactly what the image is configured for (read from the image at start), plus the GitHub host',
  async () => {
    buildImage(CONFIGURED_IMAGE, CONFIGURED_DOCKERFILE);
    const expected = ['apt-list', 'apt-more', 'apt', 'npm-team', 'npm', 'pip-trusted', 'pypi-extra', 'pypi'].map((n) => `${n}.allowed.test`).sort();
    const found = await discoverRegistryHosts(docker, CONFIGURED_IMAGE, labels);
    const ours = found.hosts.filter((h) => h.endsWith('.allowed.test'));
    const registriesProxy = await EgressProxy.start(docker, {
      image: EGRESS_TEST_IMAGE,
      policy: parseEgressPolicy('registries', { githubHost: 'git.test' }),
      sandboxImage: CONFIGURED_IMAGE,
      privateAllow: [],
      labels,
      outboundNetwork: OUTBOUND,
      dnsServers: ['127.0.0.1'],
    });
    const allowed = registriesProxy.allowed === '*' ? ['*'] : [...registriesProxy.allowed];
    await registriesProxy.stop();
    // The image's other (stock) registries are counted, not named: no registry host goes into a report.
    const others = found.hosts.length - ours.length;
    const coversAll = found.hosts.every((h) => allowed.some((a) => h === a || h.endsWith(`.${a}`)));
    const nothingElse = allowed.every((a) => a === 'git.test' || found.hosts.includes(a));
    return {
      observed: `found ${ours.join(', ')} (+${others} configured by the stock image); notes: ${found.notes.length}; proxy allows git.test: ${allowed.includes('git.test')}, every found name: ${coversAll}, nothing else: ${nothingElse}`,
      pass: JSON.stringify(ours) === JSON.stringify(expected) && found.notes.length === 0 && allowed.includes('git.test') && coversAll && nothingElse,
    };
  },
);

faultTest('a run ends: cut the sandbox, dispose the setup network, stop the proxy', 'no container or network of the test left behind', async () => {
  await sandbox!.cutNetwork();
  await setup!.dispose();
  await setup!.dispose();
  const networkGone = await docker.getNetwork(setup!.name).inspect().then(() => false, () => true);
  await proxy!.stop();
  await proxy!.stop();
  const proxies = await docker.listContainers({ all: true, filters: { label: [`${TEST_LABEL}=${labels[TEST_LABEL]}`, `${LABEL_ROLE}=${ROLE_EGRESS}`] } });
  const networks = await docker.listNetworks({ filters: { label: [`${TEST_LABEL}=${labels[TEST_LABEL]}`, `${LABEL_ROLE}=${ROLE_SETUP_NETWORK}`] } });
  return {
    observed: `setup network removed: ${networkGone}; proxy containers left: ${proxies.length}; setup networks left: ${networks.length}`,
    pass: networkGone && proxies.length === 0 && networks.length === 0,
  };
});
