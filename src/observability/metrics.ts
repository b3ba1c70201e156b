import { timingSafeEqual, createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Queue } from 'bullmq';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { TOOL_NAMES } from '../shared/tool-names.ts';

/**
 * Prometheus metrics. Every process (web, worker, or both) keeps its own registry and serves it
 * itself: the web role on its PORT at /metrics, a worker on LILYPAD_METRICS_PORT. Prometheus
 * scrapes each process; nothing is aggregated through Redis, because counters and histograms
 * sum exactly in PromQL, per-process metrics (memory, event loop) only mean something per process,
 * and a dead worker shows as `up == 0` instead of leaving stale numbers behind.
 * The queue gauges are read from BullMQ at scrape time and are the same on every target: query
 * them with max().
 */
const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry });

const SECONDS_BUCKETS = [0.05, 0.25, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400];

const jobsTotal = new Counter({
  name: 'lilypad_jobs_total',
  help: 'Jobs finished, by kind (run: an issue job; event: a webhook) and outcome.',
  labelNames: ['kind', 'outcome'] as const,
  registers: [metricsRegistry],
});
const jobDuration = new Histogram({
  name: 'lilypad_job_duration_seconds',
  help: 'Wall-clock time of a job, from the worker taking it to its outcome.',
  labelNames: ['kind'] as const,
  buckets: SECONDS_BUCKETS,
  registers: [metricsRegistry],
});
const phaseDuration = new Histogram({
  name: 'lilypad_phase_duration_seconds',
  help: 'Time per job phase (validate, mirror, checkout, sandbox, setup, tests_before, agent, patch, test_cache_read, test_cache_write, tests_after, apply, push, pull_request, ...).',
  labelNames: ['phase'] as const,
  buckets: SECONDS_BUCKETS,
  registers: [metricsRegistry],
});
const agentSteps = new Histogram({
  name: 'lilypad_agent_steps',
  help: 'Model calls per agent run.',
  buckets: [1, 2, 5, 10, 20, 40, 60, 80, 100, 125, 150],
  registers: [metricsRegistry],
});
const modelTokens = new Counter({
  name: 'lilypad_model_tokens_total',
  help: 'Tokens reported by the model server: prompt, completion, and cached (prompt tokens served from the prefix cache).',
  labelNames: ['kind'] as const,
  registers: [metricsRegistry],
});
const modelRequestDuration = new Histogram({
  name: 'lilypad_model_request_duration_seconds',
  help: 'Time of one chat-completions request (one attempt), by outcome (ok, error).',
  labelNames: ['outcome'] as const,
  buckets: [0.1, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 600],
  registers: [metricsRegistry],
});
const modelRetries = new Counter({
  name: 'lilypad_model_retries_total',
  help: 'Model requests retried, by reason (connection, timeout, rate_limited, server_error).',
  labelNames: ['reason'] as const,
  registers: [metricsRegistry],
});
const toolCallDuration = new Histogram({
  name: 'lilypad_tool_call_duration_seconds',
  help: 'Time of one tool call in the sandbox, by tool (a name the model made up counts as "unknown").',
  labelNames: ['tool'] as const,
  buckets: [0.001, 0.005, 0.02, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
  registers: [metricsRegistry],
});
const sandboxesActive = new Gauge({
  name: 'lilypad_sandboxes_active',
  help: 'Sandbox containers this process holds right now.',
  registers: [metricsRegistry],
});
const envCacheEvents = new Counter({
  name: 'lilypad_env_cache_total',
  help: 'Kept environments: hit (setup skipped), miss (setup ran), stored (an environment kept after setup), evicted (removed, least recently used), failed (the cache could not be read or written; the run went on without it).',
  labelNames: ['result'] as const,
  registers: [metricsRegistry],
});
const envCacheBytes = new Gauge({
  name: 'lilypad_env_cache_bytes',
  help: "Disk used by this installation's kept environments (their own layers), as of this process's last eviction pass.",
  registers: [metricsRegistry],
});

/** Requests in the prefix-cache window: [time, prompt tokens, cached tokens]. */
const CACHE_WINDOW_MS = 10 * 60_000;
const cacheWindow: Array<[number, number, number]> = [];
new Gauge({
  name: 'lilypad_prefix_cache_hit_ratio',
  help: 'Cached prompt tokens over prompt tokens, over the model requests of the last 10 minutes (absent without requests).',
  registers: [metricsRegistry],
  collect() {
    pruneCacheWindow(Date.now());
    let prompt = 0;
    let cached = 0;
    for (const [, p, c] of cacheWindow) {
      prompt += p;
      cached += c;
    }
    this.reset();
    if (prompt > 0) this.set(cached / prompt);
  },
});

function pruneCacheWindow(now: number): void {
  while (cacheWindow.length > 0 && cacheWindow[0]![0] < now - CACHE_WINDOW_MS) cacheWindow.shift();
}

// ---------------------------------------------------------------- the queue

export interface QueueSummary {
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
  /** Seconds since the oldest waiting job was queued; null when nothing waits. */
  oldestWaitingSeconds: number | null;
}

/** BullMQ's counts for a queue ("waiting" includes prioritized jobs) and the age of its oldest waiting job. */
export async function readQueueSummary(queue: Queue): Promise<QueueSummary> {
  const counts = await queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed');
  const oldest = (await queue.getJobs(['waiting', 'prioritized'], 0, 0, true))[0];
  return {
    waiting: (counts['waiting'] ?? 0) + (counts['prioritized'] ?? 0),
    active: counts['active'] ?? 0,
    delayed: counts['delayed'] ?? 0,
    failed: counts['failed'] ?? 0,
    oldestWaitingSeconds: oldest ? Math.max(0, (Date.now() - oldest.timestamp) / 1000) : null,
  };
}

let watchedQueue: Queue | undefined;
const queueJobs = new Gauge({
  name: 'lilypad_queue_jobs',
  help: 'Issue jobs in the run queue by state (waiting, active, delayed, failed), from BullMQ at scrape time.',
  labelNames: ['state'] as const,
  registers: [metricsRegistry],
});
const queueOldest = new Gauge({
  name: 'lilypad_queue_oldest_waiting_seconds',
  help: 'Age of the oldest waiting issue job, in seconds (0 when none waits).',
  registers: [metricsRegistry],
});

/** Reads the run queue on every scrape (a failed read leaves the gauges out rather than stale). */
export function watchQueue(queue: Queue): void {
  watchedQueue = queue;
}

async function refreshQueueGauges(): Promise<void> {
  queueJobs.reset();
  queueOldest.reset();
  if (!watchedQueue) return;
  const s = await readQueueSummary(watchedQueue).catch(() => null);
  if (!s) return;
  for (const state of ['waiting', 'active', 'delayed', 'failed'] as const) queueJobs.set({ state }, s[state]);
  queueOldest.set(s.oldestWaitingSeconds ?? 0);
}

// ---------------------------------------------------------------- recording

type JobKind = 'run' | 'followup' | 'event';

/** A job reached its outcome (run: pull_request, no_change, stale, cancelled, failed, retried, handed_back). */
export function jobFinished(kind: JobKind, outcome: string, seconds: number): void {
  jobsTotal.inc({ kind, outcome });
  jobDuration.observe({ kind }, seconds);
}

export function phaseTimed(phase: string, seconds: number): void {
  phaseDuration.observe({ phase }, seconds);
}

export function agentFinished(steps: number): void {
  agentSteps.observe(steps);
}

type RetryReason = 'connection' | 'timeout' | 'rate_limited' | 'server_error';

export function modelRetried(reason: RetryReason): void {
  modelRetries.inc({ reason });
}

/** One request attempt: its duration, and the usage the server reported (when it answered). */
export function modelRequest(seconds: number, outcome: 'ok' | 'error', usage?: { prompt: number; completion: number; cached: number }): void {
  modelRequestDuration.observe({ outcome }, seconds);
  if (!usage) return;
  modelTokens.inc({ kind: 'prompt' }, usage.prompt);
  modelTokens.inc({ kind: 'completion' }, usage.completion);
  modelTokens.inc({ kind: 'cached' }, usage.cached);
  const now = Date.now();
  cacheWindow.push([now, usage.prompt, usage.cached]);
  pruneCacheWindow(now);
}

const KNOWN_TOOLS = new Set<string>(TOOL_NAMES);

export function toolCall(tool: string, seconds: number): void {
  toolCallDuration.observe({ tool: KNOWN_TOOLS.has(tool) ? tool : 'unknown' }, seconds);
}

export function sandboxOpened(): void {
  sandboxesActive.inc();
}

export function sandboxClosed(): void {
  sandboxesActive.dec();
}

export type EnvCacheEvent = 'hit' | 'miss' | 'stored' | 'evicted' | 'failed';

export function envCacheEvent(result: EnvCacheEvent, count = 1): void {
  envCacheEvents.inc({ result }, count);
}

export function envCacheSize(bytes: number): void {
  envCacheBytes.set(bytes);
}

// ---------------------------------------------------------------- serving

/** The metrics in Prometheus' text format. */
export async function renderMetrics(): Promise<{ contentType: string; body: string }> {
  await refreshQueueGauges();
  return { contentType: metricsRegistry.contentType, body: await metricsRegistry.metrics() };
}

function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * Answers GET /metrics: 200 with the metrics for `Authorization: Bearer <LILYPAD_METRICS_TOKEN>`,
 * 401 otherwise, and 404 while no token is configured (metrics are off, not open).
 */
export async function handleMetricsRequest(req: IncomingMessage, res: ServerResponse, token: string | undefined): Promise<void> {
  if (!token) {
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics are off: set LILYPAD_METRICS_TOKEN to serve them\n');
    return;
  }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!m || !sameSecret(m[1]!, token)) {
    res.writeHead(401, { 'content-type': 'text/plain; charset=utf-8', 'www-authenticate': 'Bearer realm="lilypad-metrics"' }).end('send Authorization: Bearer <LILYPAD_METRICS_TOKEN>\n');
    return;
  }
  const { contentType, body } = await renderMetrics();
  res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store' }).end(body);
}

/** A worker's own metrics endpoint (GET /metrics on LILYPAD_METRICS_PORT); resolves once listening. */
export async function startMetricsServer(opts: { port: number; host: string; token: string | undefined }): Promise<{ server: Server; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
      handleMetricsRequest(req, res, opts.token).catch((err: Error) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err.message}\n`);
      });
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics is served here\n');
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new Error(`LILYPAD_METRICS_PORT ${opts.port} is already in use: give each worker on this machine its own port`) : err),
    );
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
