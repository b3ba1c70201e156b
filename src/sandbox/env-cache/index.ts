/**
 * Kept environments (issue 16, part 3). How the spine uses them, in order:
 *
 *   files = await keptEnvFiles(checkoutDir, { setup, named: inferred_from })   // EnvKeyFilesError: report 'failed'
 *   key   = envKey({ imageId, setup, repoId, workdir, user, files })            // imageId: inspect(image).Id
 *   claim = await cache.claim(key, repoId, signal)                              // null: off
 *   hit   → Sandbox.create({ image: claim.hit.image }) (no setup network), clearKeptWorktree,
 *           copyInFromInside, [moveToHead], commitSetupState; setup is skipped: hitReport(claim.hit)
 *   miss  → as today; after setup, takeOver and cutNetwork (before moveToHead and
 *           commitSetupState): claim.builder.keep(sandbox.container, { baseImageId, setupSeconds });
 *           a failed setup: never keep; always claim.builder.release() in a finally.
 *           missReport(key, outcome)
 *
 * A Sandbox.create from a hit that fails because the image is gone (evicted between lookup and
 * create) is a miss: run setup.
 */
export { DEFAULT_MAX_AGE_HOURS, EnvCache, formatAge, formatBytes, type EnvBuilder, type EnvCacheOptions, type EnvClaim, type EnvRepo, type KeepOutcome, type KeptEnv } from './cache.ts';
export { type EvictionSummary } from './evict.ts';
export { ENV_FORMAT, envKey, type EnvKeyInput, type KeyFile } from './key.ts';
export { EnvKeyFilesError, isKeyFile, keptEnvFiles } from './key-files.ts';
export { describeEnvCache, envCacheReportSchema, hitReport, missReport, type EnvCacheReport } from './report.ts';
