import { z } from 'zod';
import type { KeepOutcome, KeptEnv } from './cache.ts';

/**
 * What a run says about its environment, in result.json (`setup.env_cache`) and on the run page:
 * - hit: setup was skipped; the sandbox started from an environment kept `age_seconds` ago
 *   (`setup_seconds_saved`: how long the setup it replaced took);
 * - miss: setup ran; `stored` says whether its result was kept (`note`: why not);
 * - off: LILYPAD_ENV_CACHE_GB=0, or no setup to keep;
 * - failed: the cache could not be used (the key's files or the engine); setup ran as without it.
 */
export const envCacheReportSchema = z.object({
  result: z.enum(['hit', 'miss', 'off', 'failed']),
  key: z.string().optional(),
  image: z.string().optional(),
  age_seconds: z.number().optional(),
  setup_seconds_saved: z.number().optional(),
  stored: z.boolean().optional(),
  note: z.string().optional(),
});
export type EnvCacheReport = z.infer<typeof envCacheReportSchema>;

export function hitReport(env: KeptEnv): EnvCacheReport {
  return {
    result: 'hit',
    key: env.key,
    image: env.ref,
    age_seconds: env.ageSeconds,
    ...(env.setupSeconds !== null ? { setup_seconds_saved: env.setupSeconds } : {}),
  };
}

/**
 * A miss: setup ran; `outcome` is what keeping it gave, or a note when nothing was kept (setup
 * failed). `why` is the lookup's own note (an environment too old to use), kept either way.
 */
export function missReport(key: string, outcome: KeepOutcome | { note: string }, why?: string): EnvCacheReport {
  if ('kept' in outcome && outcome.kept) return { result: 'miss', key, image: outcome.kept.ref, stored: true, ...(why ? { note: why } : {}) };
  return { result: 'miss', key, stored: false, note: why ? `${outcome.note}; ${why}` : outcome.note };
}

/** One line for the run page, the status comment and the pull request body. */
export function describeEnvCache(r: EnvCacheReport): string {
  switch (r.result) {
    case 'hit':
      return `environment kept from ${ago(r.age_seconds ?? 0)} reused, setup skipped${r.setup_seconds_saved !== undefined ? ` (it took ${duration(r.setup_seconds_saved)})` : ''}`;
    case 'miss':
      return r.stored ? `setup ran; its environment is kept for the next runs${r.note ? ` (${r.note})` : ''}` : `setup ran; its environment was not kept${r.note ? ` (${r.note})` : ''}`;
    case 'off':
      return r.note ? `environments are not kept: ${r.note}` : 'environments are not kept (LILYPAD_ENV_CACHE_GB=0)';
    case 'failed':
      return `the kept environments could not be used${r.note ? `: ${r.note}` : ''}; setup ran`;
  }
}

function ago(seconds: number): string {
  return `${duration(seconds)} ago`;
}

function duration(seconds: number): string {
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 90 * 60) return `${Math.round(seconds / 60)} min`;
  if (seconds < 36 * 3600) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} days`;
}
