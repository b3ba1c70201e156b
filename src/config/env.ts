import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { urlForDisplay } from '../shared/url-secrets.ts';

/**
 * Every setting Lilypad reads from the environment, parsed once at start-up. `.env.example` documents
 * the same list; `test/unit/env.test.ts` checks the two stay in step.
 */
const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const positiveNumber = (fallback: number) => z.coerce.number().positive().default(fallback);
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

export const envSchema = z.object({
  OPENAI_BASE_URL: z
    .string()
    .default('http://127.0.0.1:30000/v1')
    .refine((v) => /^https?:\/\/[^/]+/.test(v), 'must be an http(s) URL such as http://127.0.0.1:30000/v1'),
  OPENAI_API_KEY: optionalText,
  LILYPAD_MODEL: optionalText,
  LILYPAD_SANDBOX_IMAGE: z.string().min(1).default('lilypad-sandbox:latest'),
  // Empty: only LILYPAD_SANDBOX_IMAGE. Otherwise comma-separated picomatch globs (see README).
  LILYPAD_ALLOWED_IMAGES: z.string().default(''),
  LILYPAD_ALLOW_ROOT_IMAGES: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
  LILYPAD_SANDBOX_WORKDIR: z
    .string()
    .default('/testbed')
    .refine((v) => v.startsWith('/') && v.length > 1 && !v.includes('..'), 'must be an absolute path such as /testbed'),
  LILYPAD_SANDBOX_USER: optionalText,
  LILYPAD_SANDBOX_MEMORY_MB: positiveInt(4096),
  LILYPAD_SANDBOX_CPUS: positiveNumber(2),
  LILYPAD_SANDBOX_PIDS: positiveInt(1024),
  LILYPAD_SANDBOX_DISK_MB: positiveInt(10240),
  // The engine's OCI runtime for sandboxes (runsc: gVisor); unset keeps the engine's default. Checked against `docker info` at start.
  LILYPAD_SANDBOX_RUNTIME: optionalText.refine((v) => v === undefined || /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(v), 'must be a runtime name the Docker engine lists (docker info: Runtimes), e.g. runsc'),
  LILYPAD_TOOLBOX_MAX_LINE_MB: positiveInt(64),
  LILYPAD_SETUP_EGRESS: z.string().default('registries'),
  LILYPAD_SETUP_EGRESS_PRIVATE: z.string().default(''),
  // A hosts-format file the egress proxy resolves names with before DNS (src/sandbox/egress.ts reads and checks it at start).
  LILYPAD_SETUP_EGRESS_HOSTS: optionalText,
  LILYPAD_EGRESS_IMAGE: z.string().min(1).default('lilypad-egress:latest'),
  LILYPAD_SETUP_TIMEOUT_SECONDS: positiveInt(1800),
  // Kept environments (images committed after setup), least recently used removed past this; 0 turns keeping off.
  LILYPAD_ENV_CACHE_GB: z.coerce.number().min(0, 'must be 0 (off) or more').default(20),
  // Hours a kept environment is used after it was made (fractions allowed); an older one is removed when next looked up.
  LILYPAD_ENV_MAX_AGE_HOURS: z.preprocess(
    (v) => (typeof v === 'string' && v.trim() === '' ? undefined : v),
    z.coerce.number('must be a number of hours').finite('must be a finite number of hours').positive('must be more than 0 hours').default(168),
  ),
  // A PEM file of extra CA certificates setup's tools trust (src/sandbox/extra-ca.ts reads and checks it).
  LILYPAD_EXTRA_CA_CERTS: optionalText,
  DOCKER_HOST: optionalText,
  LILYPAD_DATA_DIR: optionalText.transform((v) => v ?? path.join(os.homedir(), '.lilypad')),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LILYPAD_MAX_STEPS: positiveInt(150),
  LILYPAD_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(10).default(1),
  LILYPAD_MAX_CONTEXT_TOKENS: positiveInt(131072),
  LILYPAD_MAX_TOKENS_PER_TURN: positiveInt(8192),
  LILYPAD_MAX_WALL_SECONDS: positiveInt(3600),
  LILYPAD_BASH_TIMEOUT_CAP_SECONDS: positiveNumber(1800),
  LILYPAD_TEST_TIMEOUT_SECONDS: positiveInt(1800),
  LILYPAD_JOB_MAX_MINUTES: positiveInt(240),
  LILYPAD_MODEL_TIMEOUT_SECONDS: positiveInt(600),
  LILYPAD_MODEL_RETRIES: z.coerce.number().int().min(0).max(10).default(4),
  LILYPAD_MODEL_RETRY_BASE_MS: positiveInt(1000),
  LILYPAD_MODEL_MAX_RESPONSE_MB: positiveInt(16),
  LILYPAD_STATUS_INTERVAL_MS: z.coerce.number().int().min(0).default(20_000),
  REDIS_URL: optionalText.refine((v) => v === undefined || /^rediss?:\/\//.test(v), 'must be a redis:// or rediss:// URL'),
  // With REDIS_URL unset, `lilypad start` runs a private Redis: redis-server if installed, else this image.
  LILYPAD_REDIS_IMAGE: optionalText,
  // The settings file read before the environment is parsed (default: .env in the working directory).
  LILYPAD_ENV_FILE: optionalText,

  // GitHub App (read by Probot too; validated here so a mistake is reported once, clearly).
  APP_ID: optionalText.refine((v) => v === undefined || /^\d+$/.test(v), 'must be the numeric App ID from the app settings page'),
  PRIVATE_KEY: optionalText,
  PRIVATE_KEY_PATH: optionalText,
  WEBHOOK_SECRET: optionalText,
  GHE_HOST: optionalText.refine((v) => v === undefined || !/^https?:/.test(v), 'is a host name without protocol, e.g. github.example.com'),
  GHE_PROTOCOL: z.enum(['https', 'http']).default('https'),
  // Registration creates the app under this organisation (else under the signed-in user).
  GH_ORG: optionalText,
  HOST: optionalText,
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  LILYPAD_WORKER_CONCURRENCY: positiveInt(1),
  LILYPAD_WORKER_ID: optionalText,
  LILYPAD_QUEUE_PREFIX: z.string().regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, - and _ only').default('lilypad'),
  LILYPAD_JOB_ATTEMPTS: positiveInt(3),
  LILYPAD_JOB_RETRY_DELAY_MS: positiveInt(30_000),
  LILYPAD_JOB_LOCK_SECONDS: positiveInt(60),
  LILYPAD_RECONCILE_SECONDS: z.coerce.number().int().min(0).default(600),
  // A worker's heartbeat; dead instances' leftovers are swept every four beats (src/cli/worker-sweeps.ts).
  LILYPAD_HEARTBEAT_SECONDS: positiveInt(15),
  // GitHub asks for a second between writes (src/github/write-pacing.ts); tests against the stand-in shorten it.
  LILYPAD_GITHUB_WRITE_SPACING_MS: z.coerce.number().int().min(0, 'must be 0 or more milliseconds').default(1000),

  // Run pages (sign-in with the GitHub App's own OAuth client) and Prometheus metrics.
  GITHUB_CLIENT_ID: optionalText,
  GITHUB_CLIENT_SECRET: optionalText,
  LILYPAD_PUBLIC_URL: optionalText
    .refine((v) => v === undefined || /^https?:\/\/[^/]+/.test(v), 'must be an http(s) URL such as https://lilypad.example.com')
    .transform((v) => v?.replace(/\/+$/, '')),
  LILYPAD_RUN_RETENTION_DAYS: positiveNumber(30),
  LILYPAD_RUN_MAX_MB: positiveNumber(8),
  LILYPAD_METRICS_PORT: optionalText
    .transform((v) => (v === undefined ? undefined : Number(v)))
    .refine((v) => v === undefined || (Number.isInteger(v) && v >= 1 && v <= 65535), 'must be a TCP port number (1-65535)'),
  LILYPAD_METRICS_TOKEN: optionalText,
});

export type Env = z.infer<typeof envSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const HINTS: Record<string, string> = {
  OPENAI_BASE_URL: 'set it to your SGLang or vLLM server, e.g. OPENAI_BASE_URL=http://127.0.0.1:30000/v1',
  LOG_LEVEL: 'use one of fatal, error, warn, info, debug, trace, silent',
  LILYPAD_SANDBOX_WORKDIR: 'use an absolute directory inside the container, e.g. /testbed',
  REDIS_URL: 'e.g. REDIS_URL=redis://127.0.0.1:6379',
  APP_ID: 'copy the App ID from the GitHub App settings page',
  GHE_HOST: 'e.g. GHE_HOST=github.example.com',
  GHE_PROTOCOL: 'use https (or http for a local test server)',
  LILYPAD_PUBLIC_URL: 'the address people open the run pages at, e.g. LILYPAD_PUBLIC_URL=https://lilypad.example.com',
  LILYPAD_ENV_CACHE_GB: 'the disk kept environments may use, in GB (e.g. LILYPAD_ENV_CACHE_GB=20); 0 turns keeping them off',
  LILYPAD_ENV_MAX_AGE_HOURS:
    'the hours a kept environment may be used after it was made, e.g. LILYPAD_ENV_MAX_AGE_HOURS=168 (a week) or 0.5; to keep none at all, set LILYPAD_ENV_CACHE_GB=0',
  LILYPAD_GITHUB_WRITE_SPACING_MS: 'milliseconds between two writes to GitHub; leave it unset for the 1000 GitHub asks for',
  LILYPAD_METRICS_PORT: 'a free TCP port for this process\'s /metrics, e.g. LILYPAD_METRICS_PORT=9464',
};

/** Parses the environment; throws a ConfigError naming each bad variable and how to fix it. */
export function loadEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const result = envSchema.safeParse(source);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const name = String(issue.path[0] ?? '(environment)');
    // A Redis URL may carry a password; it is named without it.
    const got = name === 'REDIS_URL' && source[name] !== undefined ? urlForDisplay(source[name]) : source[name];
    const hint = HINTS[name] ?? 'see .env.example for the accepted values';
    return `- ${name}${got === undefined ? '' : `=${JSON.stringify(got)}`}: ${issue.message}; ${hint}`;
  });
  throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
}
