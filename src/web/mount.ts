import { publicUrlOf } from '../config/public-urls.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Queue } from 'bullmq';
import type { Env } from '../config/env.ts';
import { githubEndpoints } from '../github/app-auth.ts';
import type { Logger } from '../observability/logger.ts';
import { handleMetricsRequest, startMetricsServer, watchQueue } from '../observability/metrics.ts';
import { runStoreFromEnv } from '../observability/run-store.ts';
import { RUNS_QUEUE } from '../store/jobs.ts';
import { createRedis } from '../store/redis.ts';
import { createRunPages } from './routes.ts';

export interface WebExtras {
  /** Answers /metrics and the run pages; false for every other request. */
  handle(req: IncomingMessage & { rawBody?: Buffer | undefined }, res: ServerResponse): Promise<boolean>;
  close(): Promise<void>;
}

/** Where people reach the web role: LILYPAD_PUBLIC_URL, else http://<HOST or localhost>:<PORT>. */

/** The web role's additions to the webhook server: GET /metrics (bearer token) and the run pages. */
export function mountWebExtras(env: Env, redisUrl: string, logger: Logger): WebExtras {
  const redis = createRedis(redisUrl);
  const queue = new Queue(RUNS_QUEUE, { connection: createRedis(redisUrl), prefix: env.LILYPAD_QUEUE_PREFIX });
  watchQueue(queue);
  const endpoints = githubEndpoints(env);
  const oauth =
    env.GITHUB_CLIENT_ID && env.GITHUB_CLIENT_SECRET
      ? { clientId: env.GITHUB_CLIENT_ID, clientSecret: env.GITHUB_CLIENT_SECRET, webOrigin: env.GHE_HOST ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}` : 'https://github.com', apiUrl: endpoints.apiUrl }
      : null;
  if (!oauth) logger.warn('run pages are off: set GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET (the GitHub App\'s OAuth client) to turn them on');
  const publicUrl = publicUrlOf(env);
  // Session cookies are `__Host-` prefixed and Secure only over https (browsers refuse Secure cookies
  // from most plain-http origins); plain http is for development on this machine.
  if (oauth && !publicUrl.startsWith('https:') && !/^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?(\/|$)/.test(publicUrl)) {
    logger.warn({ publicUrl }, 'LILYPAD_PUBLIC_URL is plain http: run-page session cookies are not Secure; put the web role behind https (LILYPAD_PUBLIC_URL=https://...) outside development');
  }
  const pages = createRunPages({ store: runStoreFromEnv(redis, env), queue, oauth, publicUrl, logger });
  return {
    async handle(req, res) {
      if (req.url?.split('?')[0] === '/metrics' && req.method === 'GET') {
        await handleMetricsRequest(req, res, env.LILYPAD_METRICS_TOKEN);
        return true;
      }
      return pages.handle(req, res);
    },
    async close() {
      pages.close();
      await queue.close();
      redis.disconnect();
    },
  };
}

/**
 * A process's own /metrics port (LILYPAD_METRICS_PORT), e.g. for a worker. Reads the run queue
 * for the queue gauges too. Resolves to a stopper, or null when no port is configured.
 */
export async function startMetricsPort(env: Env, redisUrl: string, logger: Logger): Promise<(() => Promise<void>) | null> {
  if (!env.LILYPAD_METRICS_PORT) return null;
  const queue = new Queue(RUNS_QUEUE, { connection: createRedis(redisUrl), prefix: env.LILYPAD_QUEUE_PREFIX });
  watchQueue(queue);
  const host = env.HOST ?? 'localhost';
  const server = await startMetricsServer({ port: env.LILYPAD_METRICS_PORT, host, token: env.LILYPAD_METRICS_TOKEN });
  logger.info({ host, port: env.LILYPAD_METRICS_PORT, on: Boolean(env.LILYPAD_METRICS_TOKEN) }, 'metrics served on /metrics');
  return async () => {
    await server.close();
    await queue.close();
  };
}
