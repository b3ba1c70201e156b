import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type Docker from 'dockerode';
import { Redis } from 'ioredis';
import { z } from 'zod';
import type { Logger } from '../observability/logger.ts';

/**
 * A Redis of Lilypad's own for a one-machine install (`lilypad start` with REDIS_URL unset):
 * loopback only, a password, the append-only file under LILYPAD_DATA_DIR/redis, `noeviction`, so
 * queued jobs survive a restart. A `redis-server` on PATH runs as a child process; without one,
 * a container from the `lilypad-redis` image (`npm run images`). It stops when Lilypad stops. If
 * Lilypad was killed and its Redis lives on, the next start adopts it (same password, same port).
 */
export interface PrivateRedis {
  url: string;
  password: string;
  how: 'process' | 'container' | 'adopted';
  dir: string;
  stop(): Promise<void>;
}

const stateSchema = z.object({ port: z.number().int().min(1).max(65535), how: z.enum(['process', 'container']), container: z.string().optional() });
type ServerState = z.infer<typeof stateSchema>;

export const DEFAULT_REDIS_IMAGE = 'lilypad-redis:latest';
const START_TIMEOUT_MS = 20_000;

export function privateRedisDir(dataDir: string): string {
  return path.join(dataDir, 'redis');
}

function ensureDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

/** The password, made once and kept (0600) beside the data: restarts reach the same queue. */
function passwordFor(dir: string): string {
  const file = path.join(dir, 'password');
  try {
    const pw = readFileSync(file, 'utf8').trim();
    if (/^[0-9a-f]{32,}$/.test(pw)) return pw;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const pw = randomBytes(24).toString('hex');
  writeFileSync(file, `${pw}\n`, { mode: 0o600 });
  return pw;
}

function readState(dir: string): ServerState | null {
  try {
    const parsed = stateSchema.safeParse(JSON.parse(readFileSync(path.join(dir, 'server.json'), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

function writeState(dir: string, state: ServerState): void {
  writeFileSync(path.join(dir, 'server.json'), `${JSON.stringify(state)}\n`, { mode: 0o600 });
}

export function redisUrlFor(port: number, password: string): string {
  return `redis://:${password}@127.0.0.1:${port}`;
}

/** True when a Redis answers at the URL (with its password) within a short time. */
export async function redisAnswers(url: string, timeoutMs = 1500): Promise<boolean> {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: timeoutMs, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

export function hasRedisServerBinary(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

function configText(opts: { port: number; password: string; dataDir: string; bind: string }): string {
  return [
    `bind ${opts.bind}`,
    `port ${opts.port}`,
    'protected-mode yes',
    `requirepass ${opts.password}`,
    `dir ${opts.dataDir}`,
    'appendonly yes',
    'appendfsync everysec',
    'save ""',
    'maxmemory-policy noeviction',
    'daemonize no',
    'loglevel warning',
    '',
  ].join('\n');
}

async function waitUntilAnswering(url: string, alive: () => string | null, what: string): Promise<void> {
  const until = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (await redisAnswers(url, 500)) return;
    const died = alive();
    if (died) throw new Error(`${what} did not start: ${died}`);
    if (Date.now() > until) throw new Error(`${what} did not answer within ${START_TIMEOUT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface StartPrivateRedisOptions {
  dataDir: string;
  logger: Logger;
  docker: Docker;
  image?: string;
  /** For tests: pretend no redis-server binary is installed. */
  preferContainer?: boolean;
}

export async function startPrivateRedis(opts: StartPrivateRedisOptions): Promise<PrivateRedis> {
  const dir = privateRedisDir(opts.dataDir);
  ensureDir(dir);
  const password = passwordFor(dir);
  const previous = readState(dir);

  // A Redis left running by a Lilypad that was killed: take it over, so nothing queued is lost.
  if (previous && (await redisAnswers(redisUrlFor(previous.port, password)))) {
    opts.logger.info({ port: previous.port, dir }, 'using the private Redis an earlier Lilypad left running');
    return {
      url: redisUrlFor(previous.port, password),
      password,
      how: 'adopted',
      dir,
      stop: () => (previous.how === 'container' && previous.container ? stopContainer(opts.docker, previous.container) : shutdownRedis(redisUrlFor(previous.port, password))),
    };
  }
  const port = previous && (await portIsFree(previous.port)) ? previous.port : await anyFreePort();
  const useProcess = !opts.preferContainer && hasRedisServerBinary();
  const started = useProcess ? await startProcess(dir, port, password) : await startContainer(opts.docker, opts.image ?? DEFAULT_REDIS_IMAGE, dir, port, password);
  writeState(dir, { port, how: useProcess ? 'process' : 'container', ...(started.container ? { container: started.container } : {}) });
  opts.logger.info({ port, dir, how: useProcess ? 'redis-server' : 'container' }, 'started a private Redis (REDIS_URL is unset): loopback only, append-only file in the data directory');
  return { url: redisUrlFor(port, password), password, how: useProcess ? 'process' : 'container', dir, stop: started.stop };
}

async function startProcess(dir: string, port: number, password: string): Promise<{ stop: () => Promise<void>; container?: string }> {
  const conf = path.join(dir, 'redis.conf');
  writeFileSync(conf, configText({ port, password, dataDir: dir, bind: '127.0.0.1' }), { mode: 0o600 });
  // Its own process group: Ctrl-C in a terminal signals the whole foreground group, and redis-server
  // would exit at once, under the worker still shutting down (a burst of "Redis is unreachable"
  // lines, and jobs in flight not handed back). Lilypad stops it last, itself; one that outlives a
  // killed Lilypad is adopted by the next start.
  const child: ChildProcess = spawn('redis-server', [conf], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  let exit: string | null = null;
  // What redis-server prints may quote its configuration (requirepass): the password never goes on.
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).split(password).join('[REDACTED]').slice(-2000)));
  child.once('exit', (code, signal) => (exit = `redis-server exited (${signal ?? code}) ${stderr.trim()}`.trim()));
  child.once('error', (err) => (exit = `could not run redis-server (${err.message})`));
  try {
    await waitUntilAnswering(redisUrlFor(port, password), () => exit, 'the private Redis');
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM'); // redis-server flushes the append-only file and exits
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function startContainer(docker: Docker, image: string, dir: string, port: number, password: string): Promise<{ stop: () => Promise<void>; container: string }> {
  try {
    await docker.getImage(image).inspect();
  } catch {
    throw new Error(
      `REDIS_URL is unset and there is neither a redis-server on PATH nor the ${image} image to run a private Redis from: install Redis (apt-get install redis-server), build the image (npm run images), or set REDIS_URL to your Redis`,
    );
  }
  writeFileSync(path.join(dir, 'redis.conf'), configText({ port: 6379, password, dataDir: '/data', bind: '0.0.0.0' }), { mode: 0o600 });
  const name = `lilypad-redis-${port}`;
  await docker
    .getContainer(name)
    .remove({ force: true })
    .catch(() => undefined);
  const uid = process.getuid?.() ?? 1000;
  const gid = process.getgid?.() ?? 1000;
  const container = await docker.createContainer({
    name,
    Image: image,
    Cmd: ['redis-server', '/data/redis.conf'],
    User: `${uid}:${gid}`,
    Labels: { 'dev.lilypad.private-redis': dir },
    ExposedPorts: { '6379/tcp': {} },
    HostConfig: {
      Binds: [`${dir}:/data`],
      PortBindings: { '6379/tcp': [{ HostIp: '127.0.0.1', HostPort: String(port) }] },
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true,
    },
  });
  await container.start();
  let exit: string | null = null;
  const check = setInterval(() => {
    void container
      .inspect()
      .then((i) => {
        if (!i.State.Running) exit = `the container exited (${i.State.ExitCode})`;
      })
      .catch(() => (exit = 'the container is gone'));
  }, 500);
  try {
    await waitUntilAnswering(redisUrlFor(port, password), () => exit, 'the private Redis container');
  } catch (err) {
    await container.remove({ force: true }).catch(() => undefined);
    throw err;
  } finally {
    clearInterval(check);
  }
  return { container: name, stop: () => stopContainer(docker, name) };
}

async function stopContainer(docker: Docker, name: string): Promise<void> {
  const c = docker.getContainer(name);
  await c.stop({ t: 10 }).catch(() => undefined);
  await c.remove({ force: true }).catch(() => undefined);
}

async function shutdownRedis(url: string): Promise<void> {
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
    await r.call('SHUTDOWN');
  } catch {
    // SHUTDOWN closes the connection instead of answering.
  } finally {
    r.disconnect();
  }
}

/** What `lilypad start` would do for Redis with REDIS_URL unset, for `lilypad doctor`. */
export async function describePrivateRedis(dataDir: string, docker: Docker, image = DEFAULT_REDIS_IMAGE): Promise<{ ok: boolean; detail: string }> {
  const dir = privateRedisDir(dataDir);
  const state = readState(dir);
  let password: string | null = null;
  try {
    password = readFileSync(path.join(dir, 'password'), 'utf8').trim();
  } catch {
    // not started yet
  }
  if (state && password && (await redisAnswers(redisUrlFor(state.port, password)))) {
    return { ok: true, detail: `REDIS_URL is unset: lilypad start's private Redis is running on 127.0.0.1:${state.port} (data in ${dir})` };
  }
  if (hasRedisServerBinary()) return { ok: true, detail: `REDIS_URL is unset: lilypad start will run a private redis-server (data in ${dir})` };
  const hasImage = await docker
    .getImage(image)
    .inspect()
    .then(() => true)
    .catch(() => false);
  if (hasImage) return { ok: true, detail: `REDIS_URL is unset: lilypad start will run a private Redis from ${image} (data in ${dir})` };
  return { ok: false, detail: `REDIS_URL is unset, and there is neither a redis-server on PATH nor the ${image} image for lilypad start's private Redis` };
}
