import { spawnSync } from 'node:child_process';
import net from 'node:net';
import type Docker from 'dockerode';
import { TEST_IMAGE } from './sandbox-harness.ts';

export const EGRESS_TEST_IMAGE = process.env['LILYPAD_EGRESS_IMAGE'] ?? 'lilypad-egress:latest';
export const HTTP_PORT = 8080;
const CALL_MS = 30_000;

/** Fails with the command that fixes it when a test image is missing. */
export async function requireImages(docker: Docker, images: string[]): Promise<void> {
  for (const image of images) {
    await within(`docker image inspect ${image}`, docker.getImage(image).inspect()).catch(() => {
      throw new Error(`the image ${image} is missing: build it with \`npm run images\``);
    });
  }
}

/** Builds a context-free image (a Dockerfile with no COPY) with the docker CLI. */
export function buildImage(tag: string, dockerfile: string): void {
  const res = spawnSync('docker', ['build', '--quiet', '--tag', tag, '-'], { input: dockerfile, encoding: 'utf8', timeout: 120_000 });
  if (res.status !== 0) throw new Error(`docker build of ${tag} failed: ${res.stderr || res.error?.message}`);
}

export async function removeImage(docker: Docker, tag: string): Promise<void> {
  await within(`remove image ${tag}`, docker.getImage(tag).remove({ force: true })).catch(() => undefined);
}

/** A plain bridge network for the test; `internal` keeps everything on it from leaving this machine. */
export async function createTestNetwork(docker: Docker, name: string, labels: Record<string, string>, internal: boolean): Promise<Docker.Network> {
  return within(`create network ${name}`, docker.createNetwork({ Name: name, Driver: 'bridge', Internal: internal, Labels: labels }));
}

export async function removeTestNetwork(docker: Docker, name: string): Promise<void> {
  const network = docker.getNetwork(name);
  const info = await within('inspect network', network.inspect() as Promise<Docker.NetworkInspectInfo>).catch(() => undefined);
  if (!info) return;
  for (const id of Object.keys(info.Containers ?? {})) {
    await within('disconnect', network.disconnect({ Container: id, Force: true })).catch(() => undefined);
  }
  await within('remove network', network.remove()).catch(() => undefined);
}

export async function networkGateway(docker: Docker, name: string): Promise<string | undefined> {
  const info = (await within('inspect network', docker.getNetwork(name).inspect())) as Docker.NetworkInspectInfo;
  return info.IPAM?.Config?.find((c) => c.Gateway)?.Gateway;
}

export interface TestServer {
  container: Docker.Container;
  ip: string;
  remove(): Promise<void>;
}

const SERVER_SCRIPT = String.raw`
import http.server, sys
body = sys.argv[1].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("0.0.0.0", int(sys.argv[2])), H)
print("listening", flush=True)
s.serve_forever()
`;

/** A hardened container serving `body` on HTTP_PORT, standing in for a registry or a private service. */
export async function startHttpServer(docker: Docker, opts: { name: string; network: string; body: string; labels: Record<string, string> }): Promise<TestServer> {
  const container = await within(
    'create test server',
    docker.createContainer({
      name: opts.name,
      Image: TEST_IMAGE,
      Entrypoint: ['python3', '-u', '-c', SERVER_SCRIPT, opts.body, String(HTTP_PORT)],
      Cmd: [],
      Env: [],
      Labels: { ...opts.labels, 'dev.lilypad.managed': 'true' },
      HostConfig: { NetworkMode: opts.network, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], Memory: 128 * 1024 * 1024, PidsLimit: 32 },
    }),
  );
  const remove = () => within('remove test server', container.remove({ force: true, v: true })).then(() => undefined, () => undefined);
  try {
    await within('start test server', container.start());
    await waitForLog(container, 'listening');
    const info = await within('inspect test server', container.inspect());
    const ip = info.NetworkSettings.Networks[opts.network]?.IPAddress;
    if (!ip) throw new Error(`test server ${opts.name} has no address on ${opts.network}`);
    return { container, ip, remove };
  } catch (err) {
    await remove();
    throw err;
  }
}

async function waitForLog(container: Docker.Container, text: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const log = await within('container logs', container.logs({ stdout: true, stderr: true, follow: false }));
    if (log.toString('utf8').includes(text)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no "${text}" in the container's log within 20 s`);
}

/** Runs a command in a container and returns its combined output. */
export async function execIn(container: Docker.Container, argv: string[], env: string[] = []): Promise<string> {
  const exec = await within('exec create', container.exec({ Cmd: argv, Env: env, AttachStdout: true, AttachStderr: true }));
  const stream = await within('exec start', exec.start({ hijack: true, stdin: false }));
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  await within(
    'exec output',
    new Promise<void>((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
    }),
  );
  return demuxText(Buffer.concat(chunks));
}

function demuxText(buf: Buffer): string {
  const parts: Buffer[] = [];
  let at = 0;
  while (at + 8 <= buf.length) {
    const size = buf.readUInt32BE(at + 4);
    parts.push(buf.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return Buffer.concat(parts).toString('utf8');
}

export interface HostListener {
  port: number;
  /** Connections accepted so far: any at all means the boundary leaked. */
  connections(): number;
  close(): Promise<void>;
}

/** A TCP listener on every address of this machine (0.0.0.0, a free port). */
export async function listenOnHost(): Promise<HostListener> {
  let count = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    count++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.end('host listener\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '0.0.0.0', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('host listener has no port');
  return {
    port: address.port,
    connections: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function within<T>(what: string, work: Promise<T>, ms = CALL_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms / 1000} s`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
