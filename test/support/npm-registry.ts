/**
 * A minimal npm registry for tests, in a container the egress proxy can reach: setup's `npm ci`
 * installs from it through the proxy, the way it would from an organisation's internal registry,
 * and no test ever reaches a real one.
 *
 *   const pkg = packNpmPackage({ name: 'lp-pad', version: '1.0.0', files: { 'index.js': '...' } });
 *   const registry = await startNpmRegistry(docker, { name, labels, packages: [pkg] });
 *   // the repository's .npmrc: registry=<registry.url>; the proxy maps registry.host with
 *   // registry.hostsLine (LILYPAD_SETUP_EGRESS_HOSTS) and exempts registry.ip (…_PRIVATE)
 *
 * It serves what `npm ci` and `npm install` ask for: the package document `GET /<name>` (with
 * `versions`, `dist-tags`, and each version's `dist.tarball`, `dist.integrity` (sha512) and
 * `dist.shasum` (sha1)), and the tarballs at `/<name>/-/<name>-<version>.tgz`. Every request is
 * logged to the container's stdout, so a test can count what was fetched.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { TEST_IMAGE } from './sandbox-harness.ts';

export const REGISTRY_HOST = 'npm.lilypad.test';
export const REGISTRY_PORT = 8080;
const READY_MS = 20_000;

export interface NpmPackage {
  name: string;
  version: string;
  /** The .tgz as `npm pack` lays it out: `package/package.json` and the files. */
  tarball: Buffer;
  /** `sha512-<base64>`, as package-lock.json and the registry give it. */
  integrity: string;
  /** sha1, hex. */
  shasum: string;
}

/** Packs a tiny package: `files` (paths under the package) plus a package.json naming it. */
export function packNpmPackage(spec: { name: string; version: string; files: Record<string, string>; main?: string }): NpmPackage {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-npm-pack-'));
  try {
    const root = path.join(dir, 'package');
    const manifest = { name: spec.name, version: spec.version, main: spec.main ?? 'index.js', license: 'MIT' };
    const files = { 'package.json': `${JSON.stringify(manifest, null, 2)}\n`, ...spec.files };
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      writeFileSync(path.join(root, rel), text);
    }
    // Fixed owner, order and times, and gzip without a name or time: the same bytes every time.
    const tar = execFileSync('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '-cf', '-', '-C', dir, 'package'], { maxBuffer: 16 << 20 });
    const tarball = execFileSync('gzip', ['-n', '-9'], { input: tar, maxBuffer: 16 << 20 });
    return {
      name: spec.name,
      version: spec.version,
      tarball,
      integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
      shasum: createHash('sha1').update(tarball).digest('hex'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The URL a package's tarball is served at (and package-lock.json's `resolved`). */
export function tarballUrl(pkg: Pick<NpmPackage, 'name' | 'version'>, base = `http://${REGISTRY_HOST}:${REGISTRY_PORT}/`): string {
  return `${base}${pkg.name}/-/${pkg.name}-${pkg.version}.tgz`;
}

/**
 * package.json and a lockfileVersion 3 package-lock.json for a project depending on `deps`
 * (exact versions, no dependencies of their own), as `npm install` against the registry writes them.
 */
export function npmProject(project: { name: string; version: string; scripts?: Record<string, string> }, deps: NpmPackage[]): { 'package.json': string; 'package-lock.json': string } {
  const dependencies = Object.fromEntries(deps.map((d) => [d.name, d.version]));
  const pkg = { name: project.name, version: project.version, private: true, ...(project.scripts ? { scripts: project.scripts } : {}), dependencies };
  const lock = {
    name: project.name,
    version: project.version,
    lockfileVersion: 3,
    requires: true,
    packages: {
      '': { name: project.name, version: project.version, dependencies },
      ...Object.fromEntries(deps.map((d) => [`node_modules/${d.name}`, { version: d.version, resolved: tarballUrl(d), integrity: d.integrity, license: 'MIT' }])),
    },
  };
  return { 'package.json': `${JSON.stringify(pkg, null, 2)}\n`, 'package-lock.json': `${JSON.stringify(lock, null, 2)}\n` };
}

export interface NpmRegistry {
  /** The name the repository's .npmrc uses (npm.lilypad.test). */
  host: string;
  /** The container's address on its network (for LILYPAD_SETUP_EGRESS_PRIVATE). */
  ip: string;
  /** http://npm.lilypad.test:8080/ */
  url: string;
  /** The line for the egress proxy's hosts file (LILYPAD_SETUP_EGRESS_HOSTS). */
  hostsLine: string;
  /** Every request so far, as `GET /path`, in order. */
  requests(): Promise<string[]>;
  /** Tarball downloads of one package so far. */
  tarballRequests(name: string): Promise<number>;
  remove(): Promise<void>;
}

// Python's http.server, in the sandbox image, run as its non-root user. The routes come in as
// JSON (path -> [content type, base64 body]); every request is one line on stdout.
const SERVER = String.raw`
import base64, http.server, json, os, sys
routes = {p: (t, base64.b64decode(b)) for p, (t, b) in json.loads(os.environ["LILYPAD_TEST_ROUTES"]).items()}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("GET", self.path, flush=True)
        found = routes.get(self.path.split("?", 1)[0])
        if found is None:
            body, status, ctype = b'{"error":"Not found"}', 404, "application/json"
        else:
            (ctype, body), status = found, 200
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H)
print("listening", flush=True)
s.serve_forever()
`;

function routesFor(packages: NpmPackage[], base: string): Record<string, [string, string]> {
  const routes: Record<string, [string, string]> = {};
  const byName = new Map<string, NpmPackage[]>();
  for (const p of packages) byName.set(p.name, [...(byName.get(p.name) ?? []), p]);
  for (const [name, versions] of byName) {
    const latest = versions[versions.length - 1]!;
    const doc = {
      name,
      'dist-tags': { latest: latest.version },
      versions: Object.fromEntries(
        versions.map((v) => [v.version, { name, version: v.version, main: 'index.js', dist: { tarball: tarballUrl(v, base), integrity: v.integrity, shasum: v.shasum } }]),
      ),
    };
    routes[`/${name}`] = ['application/json', Buffer.from(JSON.stringify(doc)).toString('base64')];
    for (const v of versions) routes[new URL(tarballUrl(v, base)).pathname] = ['application/octet-stream', v.tarball.toString('base64')];
  }
  return routes;
}

/**
 * Starts the registry in a hardened container on `network` (default: Docker's default bridge,
 * which is where the egress proxy `lilypad run` starts looks for the outside world).
 */
export async function startNpmRegistry(docker: Docker, opts: { name: string; packages: NpmPackage[]; labels: Record<string, string>; network?: string }): Promise<NpmRegistry> {
  const network = opts.network ?? 'bridge';
  const url = `http://${REGISTRY_HOST}:${REGISTRY_PORT}/`;
  const container = await docker.createContainer({
    name: opts.name,
    Image: TEST_IMAGE,
    Entrypoint: ['python3', '-u', '-c', SERVER, String(REGISTRY_PORT)],
    Cmd: [],
    Env: [`LILYPAD_TEST_ROUTES=${JSON.stringify(routesFor(opts.packages, url))}`],
    Labels: { ...opts.labels, 'dev.lilypad.managed': 'true' },
    HostConfig: { NetworkMode: network, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], ReadonlyRootfs: true, Memory: 128 * 1024 * 1024, PidsLimit: 64 },
  });
  const remove = () => container.remove({ force: true, v: true }).then(() => undefined, () => undefined);
  const logLines = async () => {
    const raw = await container.logs({ stdout: true, stderr: false, follow: false });
    return demuxStdout(raw).split('\n').filter((l) => l !== '');
  };
  try {
    await container.start();
    const deadline = Date.now() + READY_MS;
    while (!(await logLines()).includes('listening')) {
      if (Date.now() > deadline) throw new Error(`the npm registry stand-in did not start within ${READY_MS / 1000} s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const ip = (await container.inspect()).NetworkSettings.Networks[network]?.IPAddress;
    if (!ip) throw new Error(`the npm registry stand-in has no address on ${network}`);
    const requests = async () => (await logLines()).filter((l) => l.startsWith('GET '));
    return {
      host: REGISTRY_HOST,
      ip,
      url,
      hostsLine: `${ip} ${REGISTRY_HOST}`,
      requests,
      tarballRequests: async (name) => (await requests()).filter((l) => l.startsWith(`GET /${name}/-/`)).length,
      remove,
    };
  } catch (err) {
    await remove();
    throw err;
  }
}

function demuxStdout(buf: Buffer): string {
  const parts: Buffer[] = [];
  let at = 0;
  while (at + 8 <= buf.length) {
    const size = buf.readUInt32BE(at + 4);
    if (buf[at] === 1) parts.push(buf.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return Buffer.concat(parts).toString('utf8');
}
