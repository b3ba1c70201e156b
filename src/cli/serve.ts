import { Queue } from 'bullmq';
import { getPrivateKey } from '@probot/get-private-key';
import type { Server as HttpServer, ServerResponse } from 'node:http';
import { Probot, createNodeMiddleware, run as probotRun } from 'probot';
import { loadEnv, type Env } from '../config/env.ts';
import { GitHubApp, githubEndpoints } from '../github/app-auth.ts';
import { createLimitedServer, type GuardedRequest } from '../github/webhook-limits.ts';
import { lilypadApp } from '../github/webhooks.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { EVENTS_QUEUE, type EventJob } from '../queue/jobs.ts';
import { checkRedis, createRedis } from '../queue/redis.ts';
import { startWorker, type WorkerRuntime } from '../queue/worker.ts';
import { createDockerClient } from '../sandbox/sandbox.ts';
import { mountWebExtras, startMetricsPort } from '../web/mount.ts';
import { UsageError } from './usage-error.ts';

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
  const env = loadEnv();
  const logger = createLogger({
    level: env.LOG_LEVEL,
    secrets: [env.OPENAI_API_KEY, env.WEBHOOK_SECRET, env.PRIVATE_KEY],
    destination: 1,
  });
  containProcessFailures(logger);
  const creds = credentials(env);
  const redisUrl = env.REDIS_URL ?? DEFAULT_REDIS;
  if (creds) {
    await checkRedis(redisUrl).catch((err: Error) => {
      throw new UsageError(err.message);
    });
    if (role !== 'web') {
      await createDockerClient()
        .ping()
        .catch((err: Error) => {
          throw new UsageError(`cannot reach the Docker engine (${err.message}). A worker starts sandboxes through it: start it, or point DOCKER_HOST at it.`);
        });
    }
  }

  if (!creds) {
    if (role === 'worker') {
      throw new UsageError('APP_ID and PRIVATE_KEY (or PRIVATE_KEY_PATH) are required for a worker: register the app first with `lilypad start` or `lilypad web`.');
    }
    // No credentials yet: Probot's registration flow creates the app from app.yml and writes .env.
    logger.info(`no GitHub App credentials: open http://${env.HOST ?? 'localhost'}:${env.PORT} to register Lilypad from app.yml, then restart`);
    await probotRun(() => {}, { env: process.env as Record<string, string>, log: logger });
    await new Promise<never>(() => {});
  }

  const github = new GitHubApp({ appId: creds!.appId, privateKey: creds!.privateKey, secret: creds!.secret, endpoints: githubEndpoints(env), log: logger });
  const stops: Array<() => Promise<void>> = [];
  let worker: WorkerRuntime | undefined;
  try {
    if (role === 'start' || role === 'worker') {
      worker = await startWorker({ env, redisUrl, github, docker: createDockerClient(), logger });
      stops.push(() => worker!.close());
    }
    if (role === 'start' || role === 'web') stops.unshift(await startWeb(env, creds!, redisUrl, logger));
    const metricsPort = await startMetricsPort(env, redisUrl, logger);
    if (metricsPort) stops.push(metricsPort);
  } catch (err) {
    // Half a process (a worker without its webhook server) must not keep running.
    for (const s of stops) await s().catch(() => undefined);
    throw err;
  }

  await new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      logger.info({ signal }, 'stopping');
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  for (const s of stops) await s().catch((err: unknown) => logger.error({ err: (err as Error).message }, 'error while stopping'));
  logger.flush();
  return 0;
}

const WEBHOOK_PATH = '/api/github/webhooks';

/**
 * The webhook server: Probot's webhook middleware (it verifies X-Hub-Signature-256 on the raw body)
 * behind Lilypad's own http server, which bounds bodies, request time and connections before Probot
 * sees a request (see webhook-limits.ts). GET /ping answers PONG for health checks.
 */
async function startWeb(env: Env, creds: AppCredentials, redisUrl: string, logger: Logger): Promise<() => Promise<void>> {
  const events = new Queue<EventJob>(EVENTS_QUEUE, {
    connection: createRedis(redisUrl),
    prefix: env.LILYPAD_QUEUE_PREFIX,
    defaultJobOptions: { attempts: 3, backoff: { type: 'exponential', delay: 2000 }, removeOnComplete: { age: 24 * 3600 }, removeOnFail: { age: 7 * 24 * 3600 } },
  });
  const probot = new Probot({ appId: creds.appId, privateKey: creds.privateKey, secret: creds.secret, baseUrl: githubEndpoints(env).apiUrl, log: logger });
  const webhooks = await createNodeMiddleware(lilypadApp(events), { probot, webhooksPath: WEBHOOK_PATH });
  // GET /metrics and the run pages (/runs, /auth/*, /assets/*): see src/web/.
  const extras = mountWebExtras(env, redisUrl, logger);
  const server = createLimitedServer(async (req: GuardedRequest, res: ServerResponse) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/ping') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('PONG');
      return;
    }
    if (await extras.handle(req, res)) return;
    await webhooks(req, res, () => {
      if (!res.headersSent) res.writeHead(404).end();
    });
  });
  const host = env.HOST ?? 'localhost';
  await listen(server, env.PORT, host);
  logger.info({ host, port: env.PORT }, `webhook server listening on ${WEBHOOK_PATH}`);
  return async () => {
    await extras.close();
    await closeServer(server);
    await events.close();
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
