import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startGitHubStandin, type GitHubStandin, type WebhookResult } from './github-standin/index.ts';
import { startModelServer, type ChatRequestBody, type ModelServer, type ScriptedReply } from './model-server.ts';
import { waitFor as poll } from './poll.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

export interface AppHarness {
  gh: GitHubStandin;
  model: ModelServer;
  webhookUrl: string;
  /** http://127.0.0.1:<PORT> of the app's web server (run pages, /metrics). */
  baseUrl: string;
  prefix: string;
  dataDir: string;
  proc: ChildProcess;
  logs(): string;
  send(event: string, payload: object, deliveryId?: string): Promise<WebhookResult>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** A script keyed by issue title: each issue's conversation gets its own list of replies. */
export type ScriptBook = Record<string, ScriptedReply[] | ((turn: number, body: ChatRequestBody) => ScriptedReply | Promise<ScriptedReply>)>;

export function titleOf(body: ChatRequestBody): string {
  const user = body.messages.find((m) => m.role === 'user');
  return String(user?.content ?? '').split('\n')[0] ?? '';
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export interface StartAppOptions {
  /** The model's script; ignored when `share.model` is given (that server keeps its own script). */
  book: ScriptBook;
  env?: Record<string, string>;
  role?: 'start' | 'web' | 'worker';
  /**
   * Run this process against another harness's GitHub stand-in, model server and/or queue prefix
   * (several `web` and `worker` processes on one Redis prefix). Shared servers are not closed by
   * this harness's stop(); the harness that created them closes them.
   */
  share?: { gh?: GitHubStandin; model?: ModelServer; prefix?: string };
}

/** Starts the GitHub stand-in, the scripted model server and the real app (`lilypad start`). */
export async function startApp(opts: StartAppOptions): Promise<AppHarness> {
  const ownsGh = !opts.share?.gh;
  const ownsModel = !opts.share?.model;
  const gh = opts.share?.gh ?? (await startGitHubStandin({ appSlug: 'lilypad' }));
  const model =
    opts.share?.model ??
    (await startModelServer({
      script: ({ body }) => {
        const entry = opts.book[titleOf(body)];
        const turn = body.messages.filter((m) => m.role === 'assistant').length;
        if (!entry) return { content: `no script for "${titleOf(body)}"` };
        if (typeof entry === 'function') return entry(turn, body);
        return entry[turn] ?? { content: 'done' };
      },
    }));
  const closeOwned = async () => {
    if (ownsModel) await model.close();
    if (ownsGh) await gh.close();
  };
  const port = await freePort();
  const prefix = opts.share?.prefix ?? `lilypad-test-${process.pid}-${Date.now().toString(36)}`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-app-'));
  let output = '';
  const proc = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), opts.role ?? 'start'], {
    cwd: ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      HOME: os.tmpdir(),
      NODE_ENV: 'production',
      APP_ID: String(gh.appId),
      PRIVATE_KEY: gh.privateKeyPem,
      WEBHOOK_SECRET: gh.webhookSecret,
      GHE_HOST: gh.host,
      GHE_PROTOCOL: 'http',
      HOST: '127.0.0.1',
      PORT: String(port),
      REDIS_URL: process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379',
      LILYPAD_QUEUE_PREFIX: prefix,
      LILYPAD_DATA_DIR: dataDir,
      OPENAI_BASE_URL: model.url,
      LILYPAD_STATUS_INTERVAL_MS: '0',
      LILYPAD_MODEL_RETRY_BASE_MS: '5',
      LILYPAD_JOB_RETRY_DELAY_MS: '300',
      LILYPAD_RECONCILE_SECONDS: '0',
      // The stand-in is not GitHub: no second between writes (three before a comment) to wait out.
      LILYPAD_GITHUB_WRITE_SPACING_MS: '20',
      LILYPAD_WORKER_ID: prefix,
      LOG_LEVEL: 'info',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logFile = process.env['LILYPAD_TEST_APP_LOG'];
  const collect = (d: Buffer) => {
    output += d.toString();
    if (logFile) appendFileSync(logFile, d);
  };
  proc.stdout!.on('data', collect);
  proc.stderr!.on('data', collect);
  const webhookUrl = `http://127.0.0.1:${port}/api/github/webhooks`;
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error(`the app exited early (${proc.exitCode}):\n${output}`);
    return output.includes('worker started') || (opts.role === 'web' && output.includes('webhook server listening'));
  }, 'the app to start', 30_000);
  if (opts.role !== 'worker') {
    await waitFor(() => output.includes('webhook server listening'), 'the webhook server', 30_000);
  }
  return {
    gh,
    model,
    webhookUrl,
    baseUrl: `http://127.0.0.1:${port}`,
    prefix,
    dataDir,
    proc,
    logs: () => output,
    send: (event, payload, deliveryId) => gh.sendWebhook(webhookUrl, event, payload, deliveryId ? { deliveryId } : {}),
    async stop(signal = 'SIGTERM') {
      // A process killed by a signal has a null exitCode and its signalCode set: it is not running,
      // and waiting for its 'exit' (already emitted) would sit out the whole 60 s below.
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
        proc.kill(signal);
        let timer: NodeJS.Timeout | undefined;
        const code = await Promise.race([exited, new Promise<null>((r) => (timer = setTimeout(() => r(null), 60_000)))]);
        clearTimeout(timer); // a pending 60 s timer would keep the test process alive after its last test
        if (proc.exitCode === null) proc.kill('SIGKILL');
        await closeOwned();
        return code;
      }
      await closeOwned();
      return proc.exitCode;
    },
  };
}

/** The harness's short form of support/poll.ts's waitFor: polls every 100 ms, 60 s by default. */
export function waitFor(pred: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  return poll(pred, { what, timeoutMs, intervalMs: 100 });
}
