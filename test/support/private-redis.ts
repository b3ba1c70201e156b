import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { redisAnswers } from '../../src/cli/private-redis.ts';
import { freePort, waitFor } from './app-harness.ts';

/**
 * A redis-server of the test's own, on a free loopback port, for faults that would disturb every
 * other user of the shared Redis: pausing the server (SIGSTOP) or shutting it down without saving.
 */
export interface PrivateRedis {
  url: string;
  port: number;
  /** A client for the test itself (reconnects by itself across a restart). */
  client: Redis;
  /** Stops the server's process (SIGSTOP): connections stay open and every command waits. */
  pause(): void;
  resume(): void;
  /** `SHUTDOWN NOSAVE`: the process exits and every key is gone. */
  shutdownNoSave(): Promise<void>;
  /** Starts the server again on the same port, empty. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/** `password`: the server requires it (`--requirepass`), and `url` carries it (`redis://:password@…`). */
export async function startPrivateRedis(opts: { password?: string } = {}): Promise<PrivateRedis> {
  const which = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (which.status !== 0) throw new Error('redis-server is not installed: the CI script installs it (apt-get install redis-server)');
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-redis-'));
  let proc: ChildProcess | null = null;
  const url = opts.password ? `redis://:${encodeURIComponent(opts.password)}@127.0.0.1:${port}` : `redis://127.0.0.1:${port}`;
  const auth = opts.password ? ['--requirepass', opts.password] : [];
  const ping = () => redisAnswers(url, 1000);
  const launch = async () => {
    proc = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir, ...auth], { stdio: 'ignore' });
    await waitFor(ping, `redis-server on port ${port}`, 15_000);
  };
  await launch();
  const client = new Redis(url, { maxRetriesPerRequest: null });
  client.on('error', () => undefined);
  const exited = (p: ChildProcess) => (p.exitCode !== null || p.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => p.once('exit', () => r())));
  return {
    url,
    port,
    client,
    pause: () => void proc?.kill('SIGSTOP'),
    resume: () => void proc?.kill('SIGCONT'),
    async shutdownNoSave() {
      const p = proc!;
      const admin = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      admin.on('error', () => undefined);
      await admin.connect();
      await admin.call('SHUTDOWN', 'NOSAVE').catch(() => undefined); // the server closes the connection instead of answering
      admin.disconnect();
      await exited(p);
    },
    async restart() {
      await launch();
    },
    async close() {
      client.disconnect();
      const p = proc;
      if (p && p.exitCode === null && p.signalCode === null) {
        p.kill('SIGCONT');
        p.kill('SIGKILL');
        await exited(p);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
