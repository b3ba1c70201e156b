import { Queue } from 'bullmq';
import { getPrivateKey } from '@probot/get-private-key';
import type { Server as HttpServer, ServerResponse } from 'node:http';
import { Probot, createNodeMiddleware } from 'probot';
import { envFilePath } from '../config/dotenv.ts';
import { loadEnv, type Env } from '../config/env.ts';
import { GitHubApp, githubEndpoints } from '../github/app-auth.ts';
import { answerRegisteredSetupPages, createRegistration, unreachableAddressAdvice, WEBHOOK_PATH } from '../github/registration.ts';
import { createLimitedServer, type GuardedRequest } from '../github/webhook-limits.ts';
import { createDeliveryGuard } from '../github/webhook-payloads.ts';
import { lilypadApp } from '../github/webhooks.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { EVENTS_QUEUE, type EventJob } from '../store/jobs.ts';
import { checkRedis, createRedis } from '../store/redis.ts';
import { startWorker } from './worker-process.ts';
import { createDockerClient } from '../sandbox/sandbox.ts';
import { mountWebExtras, startMetricsPort } from '../web/mount.ts';
import { checkSandboxRuntime } from '../sandbox/runtime.ts';
import { startPrivateRedis } from './private-redis.ts';
import { UsageError } from '../shared/usage-error.ts';
import { onStopSignal } from '../shared/stop-signals.ts';
import { urlSecretValues } from '../shared/url-secrets.ts';

type Role = 'start' | 'web' | 'worker';

const HELP: Record<Role, string> = {
  start: 'Usage: lilypad start\n\nRuns the webhook server and a worker in one process (see `lilypad web` and `lilypad worker`).',
  web: 'Usage: lilypad web\n\nRuns only the webhook server: it validates webhooks and queues them in Redis (REDIS_URL).',
  worker: 'Usage: lilypad worker\n\nRuns only a worker: it takes jobs from Redis (REDIS_URL) and runs them in sandboxes. Start as many as you like, on as many machines.',
};

const DEFAULT_REDIS = 'redis://127.0.0.1:6379';

interface AppCredentials {
  appId: number;
  privateKey: string;
  secret: string;
}

function credentials(env: Env): AppCredentials | null {
  const privateKey = getPrivateKey({ env: { PRIVATE_KEY: env.PRIVATE_KEY, PRIVATE_KEY_PATH: env.PRIVATE_KEY_PATH } });
  if (!env.APP_ID || !privateKey) return null;
  if (!env.WEBHOOK_SECRET) {
    throw new UsageError('WEBHOOK_SECRET is not set: set it to the webhook secret from the GitHub App settings (webhooks cannot be verified without it).');
  }
  return { appId: Number(env.APP_ID), privateKey, secret: env.WEBHOOK_SECRET };
}

/** `lilypad start | web | worker`. Resolves when the process has been asked to stop and has stopped. */
export async function serveCommand(role: Role, argv: string[]): Promise<number> {
  if (argv.includes('-h') || argv.includes('--help')) {
    process.stdout.write(`${HELP[role]}\n`);
    return 0;
  }
  if (argv.length > 0) throw new UsageError(`lilypad ${role} takes no arguments (configuration comes from the environment; see .env.example)`);
  let env = loadEnv();
  // A sandbox runtime the engine does not have stops a worker before anything starts.
  if (role !== 'web') await checkSandboxRuntime(createDockerClient(), env);
  let logger = processLogger(env);
  const uncontain = containProcessFailures(logger);
  let creds = credentials(env);
  if (!creds && role === 'worker') {
    throw new UsageError('APP_ID and PRIVATE_KEY (or PRIVATE_KEY_PATH) are required for a worker: register the app first with `lilypad start` or `lilypad web`.');
  }
  const stopRequested = stopSignal(() => logger);
  const stops: Array<() => Promise<void>> = [];
  try {
    // The web server takes its port first: it serves the registration pages until the app exists,
    // then the webhooks and run pages, without a restart in between.
    const web = role === 'worker' ? null : await openWebServer(env, () => logger);
    if (web) stops.push(web.close);
    if (!creds) {
      const registered = await register(env, web!, logger, stopRequested);
      if (!registered) return await stopAll(stops, logger);
      env = loadEnv();
      creds = credentials(env)!;
    }
    const redis = await redisFor(role, env, logger);
    if (redis.stop) stops.push(redis.stop);
    logger = processLogger(env, redis.url, ...(redis.password ? [redis.password] : []));
    uncontain();
    containProcessFailures(logger);
    await checkRedis(redis.url).catch((err: Error) => {
      throw new UsageError(err.message);
    });
    if (role !== 'web') {
      await createDockerClient()
        .ping()
        .catch((err: Error) => {
          throw new UsageError(`cannot reach the Docker engine (${err.message}). A worker starts sandboxes through it: start it, or point DOCKER_HOST at it.`);
        });
    }
    const github = new GitHubApp({ appId: creds.appId, privateKey: creds.privateKey, secret: creds.secret, endpoints: githubEndpoints(env), log: logger, writeSpacingMs: env.LILYPAD_GITHUB_WRITE_SPACING_MS });
    if (role === 'start' || role === 'worker') {
      const worker = await startWorker({ env, redisUrl: redis.url, github, docker: createDockerClient(), logger });
      stops.unshift(() => worker.close());
    }
    if (web) stops.unshift(await web.serveApp(env, creds, redis.url, logger));
    const metricsPort = await startMetricsPort(env, redis.url, logger);
    if (metricsPort) stops.unshift(metricsPort);
  } catch (err) {
    // Half a process (a worker without its webhook server) must not keep running.
    await stopAll(stops, logger, true);
    throw err;
  }
  await stopRequested;
  return stopAll(stops, logger);
}

/** The secret values the process logger redacts: the app's keys and the Redis password (REDIS_URL's, or `redisUrl`'s). */
export function processSecrets(env: Env, redisUrl?: string): string[] {
  const values = [env.OPENAI_API_KEY, env.WEBHOOK_SECRET, env.PRIVATE_KEY, env.GITHUB_CLIENT_SECRET, ...urlSecretValues(env.REDIS_URL), ...urlSecretValues(redisUrl)];
  return values.filter((v): v is string => v !== undefined);
}

function processLogger(env: Env, redisUrl?: string, ...more: string[]): Logger {
  return createLogger({ level: env.LOG_LEVEL, secrets: [...processSecrets(env, redisUrl), ...more], destination: 1 });
}

/** Resolves on the first stop signal: Ctrl-C, `kill`, or the terminal closing (SIGHUP). */
function stopSignal(logger: () => Logger): Promise<void> {
  return new Promise<void>((resolve) => {
    const off = onStopSignal((signal) => {
      logger().info({ signal }, 'stopping');
      off();
      resolve();
    });
  });
}

async function stopAll(stops: Array<() => Promise<void>>, logger: Logger, quiet = false): Promise<number> {
  for (const s of stops) {
    await s().catch((err: unknown) => {
      if (!quiet) logger.error({ err: (err as Error).message }, 'error while stopping');
    });
  }
  logger.flush();
  return 0;
}

/**
 * No credentials yet: serve the manifest flow (src/github/registration.ts) until GitHub has created
 * the app and `.env` holds its credentials; they are put into this process's environment too.
 * Resolves false when the process was asked to stop first.
 */
async function register(env: Env, web: WebServer, logger: Logger, stopRequested: Promise<void>): Promise<boolean> {
  const { file } = envFilePath();
  const registration = createRegistration({ env, envFile: file, logger });
  web.setHandler(registration.handle);
  // The link carries the one-time setup token: only whoever reads this log can register the app.
  const line = `no GitHub App credentials: open ${registration.setupLink} to register Lilypad as a GitHub App (from app.yml; the link is new on every start and only it opens the setup page); the credentials are written to ${file}`;
  // Without the link nobody can register: it is printed even when LOG_LEVEL hides info lines.
  if (logger.isLevelEnabled('info')) logger.info(line);
  else process.stderr.write(`${line}\n`);
  const unreachable = unreachableAddressAdvice(env);
  if (unreachable) logger.warn(unreachable);
  const app = await Promise.race([registration.registered, stopRequested.then(() => null)]);
  if (!app) return false;
  const values: Record<string, string> = {
    APP_ID: String(app.appId),
    PRIVATE_KEY: app.privateKey,
    WEBHOOK_SECRET: app.webhookSecret,
    GITHUB_CLIENT_ID: app.clientId,
    GITHUB_CLIENT_SECRET: app.clientSecret,
  };
  for (const [k, v] of Object.entries(values)) process.env[k] = v;
  delete process.env['PRIVATE_KEY_PATH'];
  return true;
}

/**
 * The Redis this role uses: REDIS_URL when set; for `lilypad start` without it, a private Redis
 * of its own (src/cli/private-redis.ts); `web` and `worker` (the roles of a multi-machine
 * install) fall back to 127.0.0.1:6379 as before.
 */
async function redisFor(role: Role, env: Env, logger: Logger): Promise<{ url: string; password?: string; stop?: () => Promise<void> }> {
  if (env.REDIS_URL) return { url: env.REDIS_URL };
  if (role !== 'start') return { url: DEFAULT_REDIS };
  const own = await startPrivateRedis({ dataDir: env.LILYPAD_DATA_DIR, logger, docker: createDockerClient(), ...(env.LILYPAD_REDIS_IMAGE ? { image: env.LILYPAD_REDIS_IMAGE } : {}) }).catch((err: Error) => {
    throw new UsageError(err.message);
  });
  return { url: own.url, password: own.password, stop: own.stop };
}

interface WebServer {
  setHandler(handler: (req: GuardedRequest, res: ServerResponse) => Promise<void>): void;
  /** Switches the server to the registered app: webhooks, run pages, /metrics. Resolves to its stopper. */
  serveApp(env: Env, creds: AppCredentials, redisUrl: string, logger: Logger): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/**
 * The web role's one http server (bounded bodies, request time and connections: webhook-limits.ts),
 * whose handler is swapped from the registration pages to the app once it has credentials.
 * GET /ping answers PONG for health checks in both.
 */
async function openWebServer(env: Env, logger: () => Logger): Promise<WebServer> {
  let handler: (req: GuardedRequest, res: ServerResponse) => Promise<void> = async (_req, res) => {
    res.writeHead(503, { 'retry-after': '5' }).end('starting\n');
  };
  const server = createLimitedServer(async (req: GuardedRequest, res: ServerResponse) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/ping') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('PONG');
      return;
    }
    await handler(req, res);
  });
  const host = env.HOST ?? 'localhost';
  await listen(server, env.PORT, host);
  let closeApp: (() => Promise<void>) | null = null;
  return {
    setHandler(h) {
      handler = h;
    },
    async serveApp(appEnv, creds, redisUrl, appLogger) {
      const app = await appHandler(appEnv, creds, redisUrl, appLogger);
      handler = app.handle;
      closeApp = app.close;
      appLogger.info({ host, port: appEnv.PORT }, `webhook server listening on ${WEBHOOK_PATH}`);
      return async () => {
        await closeServer(server);
        await closeApp?.();
      };
    },
    async close() {
      if (server.listening) await closeServer(server);
      logger().debug('web server closed');
    },
  };
}

/**
 * The registered app's requests: Probot's webhook middleware (it verifies X-Hub-Signature-256 on
 * the raw body) behind the payload guard (src/github/webhook-payloads.ts), and the run pages and
 * /metrics (src/web/).
 */
async function appHandler(env: Env, creds: AppCredentials, redisUrl: string, logger: Logger): Promise<{ handle: (req: GuardedRequest, res: ServerResponse) => Promise<void>; close: () => Promise<void> }> {
  const events = new Queue<EventJob>(EVENTS_QUEUE, {
    connection: createRedis(redisUrl),
    prefix: env.LILYPAD_QUEUE_PREFIX,
    defaultJobOptions: { attempts: 3, backoff: { type: 'exponential', delay: 2000 }, removeOnComplete: { age: 24 * 3600 }, removeOnFail: { age: 7 * 24 * 3600 } },
  });
  const probot = new Probot({ appId: creds.appId, privateKey: creds.privateKey, secret: creds.secret, baseUrl: githubEndpoints(env).apiUrl, log: logger });
  const webhooks = await createNodeMiddleware(lilypadApp(events), { probot, webhooksPath: WEBHOOK_PATH });
  const extras = mountWebExtras(env, redisUrl, logger);
  // Deliveries no handler may see (not acted on, or not the shape a handler reads) stop here.
  const guard = createDeliveryGuard({ path: WEBHOOK_PATH, secret: creds.secret, logger });
  return {
    async handle(req, res) {
      if (answerRegisteredSetupPages(req, res, creds.appId)) return;
      if (guard(req, res)) return;
      if (await extras.handle(req, res)) return;
      await webhooks(req, res, () => {
        if (!res.headersSent) res.writeHead(404).end();
      });
    },
    async close() {
      await extras.close();
      await events.close();
    },
  };
}

function listen(server: HttpServer, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      reject(err.code === 'EADDRINUSE' ? new UsageError(`port ${port} is already in use: set PORT to a free port`) : err);
    });
    server.listen(port, host, () => resolve());
  });
}

/** Stops accepting, lets requests in flight finish (they take milliseconds), then drops the rest. */
async function closeServer(server: HttpServer): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const force = setTimeout(() => server.closeAllConnections(), 5000);
  await closed;
  clearTimeout(force);
}

/**
 * A bug that throws outside any job (a stray callback, a promise nobody awaited) is logged with its
 * error and the process goes on: the default (exit) would kill every job this process is running
 * and leave their sandboxes behind, for a failure that concerned at most one of them.
 */
export function containProcessFailures(logger: Logger, proc: NodeJS.EventEmitter = process): () => void {
  const onRejection = (reason: unknown) => {
    logger.error(reason instanceof Error ? { err: reason } : { reason: String(reason) }, 'unhandled promise rejection; the process keeps running');
  };
  const onException = (err: Error, origin: string) => {
    logger.error({ err, origin }, 'uncaught exception; the process keeps running');
  };
  proc.on('unhandledRejection', onRejection);
  proc.on('uncaughtException', onException);
  return () => {
    proc.off('unhandledRejection', onRejection);
    proc.off('uncaughtException', onException);
  };
}
