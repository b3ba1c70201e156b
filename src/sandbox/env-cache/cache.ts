import type Docker from 'dockerode';
import type { Logger } from '../../observability/logger.ts';
import { envCacheEvent } from '../../observability/metrics.ts';
import { withDeadline } from '../deadline.ts';
import { CancelledError, reasonText } from '../../shared/cancel.ts';
import { evictKept, type EvictionSummary } from './evict.ts';
import {
  commitKeptImage,
  LABEL_ENV,
  LABEL_ENV_ACCOUNT,
  LABEL_ENV_REPO_NAME,
  LABEL_ENV_BASE,
  LABEL_ENV_CREATED,
  LABEL_ENV_BYTES,
  LABEL_ENV_KEY,
  LABEL_ENV_OWNER,
  LABEL_ENV_REPO,
  LABEL_ENV_SETUP_SECONDS,
} from './image.ts';
import type { KeepTimings } from './image.ts';
import { ENV_FORMAT } from './key.ts';
import { LastUsed } from './last-used.ts';

const CALL_MS = 60_000;
const OWNER_RE = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
const KEY_RE = /^[0-9a-f]{64}$/;
const ACCOUNT_RE = /^[A-Za-z0-9][A-Za-z0-9:._-]{0,99}$/;
/** LILYPAD_ENV_MAX_AGE_HOURS's default: a week. */
export const DEFAULT_MAX_AGE_HOURS = 168;

export interface EnvCacheOptions {
  docker: Docker;
  /**
   * Whose environments these are: the installation id (heartbeat.ts installationId) for workers,
   * `local` for `lilypad run`. Only this owner's images are looked up, kept and evicted.
   */
  owner: string;
  /** LILYPAD_DATA_DIR: when each environment was last used is kept under env-cache/ there. */
  dataDir: string;
  /** LILYPAD_ENV_CACHE_GB in bytes; 0 turns keeping off. */
  maxBytes: number;
  /** LILYPAD_ENV_MAX_AGE_HOURS: one made longer ago is not used, and removed (default a week). */
  maxAgeHours?: number | undefined;
  logger?: Logger | undefined;
}

/** A kept environment a sandbox can start from. */
export interface KeptEnv {
  /** The image id (sha256:…): start from the id, not the tag, so that a re-tag cannot change what starts. */
  image: string;
  ref: string;
  key: string;
  ageSeconds: number;
  bytes: number;
  /** How long the setup it replaces took, when the keeper said. */
  setupSeconds: number | null;
}

/** `seconds`: what keeping took (absent when another attempt or process had kept it already). */
export type KeepOutcome = { kept: KeptEnv; seconds?: KeepTimings } | { kept: null; note: string };

/** The one who runs setup for a key, while other attempts of this process wait for the result. */
export interface EnvBuilder {
  /**
   * After a successful setup (every setup process killed, the network cut), before anything of
   * the agent's runs: keeps the sandbox's filesystem. Never throws, except a CancelledError.
   */
  keep(container: Docker.Container, opts: { baseImageId: string; setupSeconds?: number | undefined; signal?: AbortSignal | undefined }): Promise<KeepOutcome>;
  /** Setup failed, or the run ended before keep(): waiting attempts run their own setup. Idempotent. */
  release(): void;
}

export type EnvClaim = { hit: KeptEnv } | { hit: null; builder: EnvBuilder; note?: string };

/**
 * Whose environments a run keeps: the account whose setups made them (the GitHub App
 * installation, `local`, `eval`), for the size share, and the repository's name, for people.
 */
export interface EnvRepo {
  account: string;
  name: string;
}

/** What every view of one cache shares (forRepo). */
interface Shared {
  lastUsed: LastUsed;
  building: Map<string, Promise<'kept' | 'released'>>;
}

/**
 * Environments kept after setup (see image.ts for how, worktree.ts for a hit's checkout).
 *
 * What a kept environment holds is what setup wrote: packages fetched through the egress proxy
 * from the registries it allows, and whatever the repository's own install scripts did. That is
 * the trust the agent already extends to setup's output in every run, and no more: it is only
 * ever used for the same repository (the key holds the repository id, and lookup checks the
 * label). It never holds a secret, because setup never gets one: no token, key or credential
 * enters the sandbox (the proxy settings and CA bundle path setup runs with are per command and
 * are not kept), and the image is made from the sandbox's filesystem only.
 *
 * claim() is the entry point: a hit, or a miss whose builder keeps the environment after setup.
 * Attempts of one job (best of k) claim the same key; the first runs setup, the others wait for
 * it and start from what it kept (or run their own setup at once if it failed).
 */
export class EnvCache {
  private readonly lastUsed: LastUsed;
  private readonly building: Map<string, Promise<'kept' | 'released'>>;
  private readonly maxAgeHours: number;

  constructor(
    private readonly opts: EnvCacheOptions,
    shared?: Shared,
    private readonly repo?: EnvRepo,
  ) {
    if (!OWNER_RE.test(opts.owner)) throw new Error(`the kept environments' owner must be lower-case letters, digits, . _ - (an installation id or "local"): got ${JSON.stringify(opts.owner)}`);
    if (!(opts.maxBytes >= 0)) throw new Error(`LILYPAD_ENV_CACHE_GB must be 0 (off) or more; got ${opts.maxBytes} bytes`);
    this.maxAgeHours = opts.maxAgeHours ?? DEFAULT_MAX_AGE_HOURS;
    if (!(this.maxAgeHours > 0 && Number.isFinite(this.maxAgeHours))) throw new Error(`LILYPAD_ENV_MAX_AGE_HOURS must be a number of hours above 0; got ${opts.maxAgeHours}`);
    this.lastUsed = shared?.lastUsed ?? new LastUsed(opts.dataDir, opts.owner);
    this.building = shared?.building ?? new Map();
  }

  /**
   * The same cache, keeping environments for `repo`'s account and name (the labels the size share
   * and `lilypad env` read). Claims of every view wait for each other as claims of one cache do.
   */
  forRepo(repo: EnvRepo): EnvCache {
    if (!ACCOUNT_RE.test(repo.account)) throw new Error(`not an account for kept environments: ${JSON.stringify(repo.account)}`);
    const name = repo.name.replace(/[\x00-\x1f\x7f]/g, '').slice(0, 300);
    return new EnvCache(this.opts, { lastUsed: this.lastUsed, building: this.building }, { account: repo.account, name: name || repo.account });
  }

  /** The account and name labelled on what this view keeps; without forRepo, read from the repository id. */
  private describe(repoId: string): EnvRepo {
    if (this.repo) return this.repo;
    const [scheme = '', ...rest] = repoId.split(':');
    const local = scheme === 'local' || scheme === 'eval';
    return { account: local ? scheme : 'unknown', name: local ? rest.join(':') || repoId : repoId };
  }

  get enabled(): boolean {
    return this.opts.maxBytes > 0;
  }

  /** The tag a key's environment is kept under. */
  ref(key: string): string {
    if (!KEY_RE.test(key)) throw new Error(`not an environment key: ${JSON.stringify(key)}`);
    return `lilypad-env-${this.opts.owner}:${key}`;
  }

  /**
   * Null when keeping is off; otherwise a hit, or a miss with the builder for this key. While a
   * claim of this process holds a key (from its lookup until its builder keeps or releases), later
   * claims of the key wait for it, then look again.
   */
  async claim(key: string, repoId: string, signal?: AbortSignal): Promise<EnvClaim | null> {
    if (!this.enabled) return null;
    for (;;) {
      throwIfAborted(signal);
      const pending = this.building.get(key);
      // After a keep, look again (a hit); after a failed setup, run setup at once, in parallel.
      if (pending && (await untilAborted(pending, signal)) === 'kept') continue;
      const { builder, finish } = this.builder(key, repoId, !pending);
      let hit: KeptEnv | null;
      let note: string | undefined;
      try {
        ({ hit, note } = await this.find(key, repoId, signal));
      } catch (err) {
        if (signal?.aborted) {
          finish('released');
          throw new CancelledError(reasonText(signal.reason));
        }
        envCacheEvent('failed');
        this.opts.logger?.warn({ err, key }, 'could not look up the kept environment; setup runs');
        return { hit: null, builder, note: `the kept environment could not be read (${(err as Error).message}); setup ran` };
      }
      if (hit) {
        finish('kept');
        envCacheEvent('hit');
        return { hit };
      }
      envCacheEvent('miss');
      return { hit: null, builder, ...(note ? { note } : {}) };
    }
  }

  /** The kept environment for this key and repository, or null; a hit counts as a use. */
  async lookup(key: string, repoId: string, signal?: AbortSignal): Promise<KeptEnv | null> {
    return (await this.find(key, repoId, signal)).hit;
  }

  /** lookup(), with why nothing was found when the environment was there but too old. */
  private async find(key: string, repoId: string, signal?: AbortSignal): Promise<{ hit: KeptEnv | null; note?: string }> {
    throwIfAborted(signal);
    const info = await withDeadline(this.opts.docker.getImage(this.ref(key)).inspect(), CALL_MS, 'inspecting the kept environment').catch((err: { statusCode?: number }) => {
      if (err.statusCode === 404) return null;
      throw err;
    });
    if (!info) return { hit: null };
    const labels = info.Config?.Labels ?? {};
    // Never another repository's, another owner's or another format's, whatever the tag says.
    if (labels[LABEL_ENV] !== String(ENV_FORMAT) || labels[LABEL_ENV_KEY] !== key || labels[LABEL_ENV_REPO] !== repoId || labels[LABEL_ENV_OWNER] !== this.opts.owner) return { hit: null };
    const created = Number(labels[LABEL_ENV_CREATED]);
    const ageSeconds = Number.isFinite(created) ? Date.now() / 1000 - created : 0;
    if (ageSeconds > this.maxAgeHours * 3600) return { hit: null, note: await this.expire(info.Id, key, repoId, labels, ageSeconds) };
    await this.touch(key);
    const setup = Number(labels[LABEL_ENV_SETUP_SECONDS]);
    return {
      hit: {
        image: info.Id,
        ref: this.ref(key),
        key,
        ageSeconds: Number.isFinite(created) ? Math.max(0, Math.round(Date.now() / 1000 - created)) : 0,
        bytes: Number(labels[LABEL_ENV_BYTES] ?? 0) || 0,
        setupSeconds: labels[LABEL_ENV_SETUP_SECONDS] !== undefined && Number.isFinite(setup) ? setup : null,
      },
    };
  }

  /**
   * An environment older than LILYPAD_ENV_MAX_AGE_HOURS: removed (unless a sandbox still runs
   * from it: the engine refuses, and the next lookup or eviction tries again), with a log line.
   * Returns the sentence for the run's record.
   */
  private async expire(id: string, key: string, repoId: string, labels: Record<string, string>, ageSeconds: number): Promise<string> {
    const limit = `LILYPAD_ENV_MAX_AGE_HOURS (${this.maxAgeHours})`;
    const outcome = await withDeadline(this.opts.docker.getImage(id).remove({ force: false, noprune: false }), CALL_MS, 'removing a kept environment').then(
      () => 'removed' as const,
      (err: { statusCode?: number; message?: string }) => (err.statusCode === 404 ? ('removed' as const) : `not removed (${(err.message ?? String(err)).slice(0, 200)})`),
    );
    const fields = { key, repoId, repo: labels[LABEL_ENV_REPO_NAME] ?? repoId, account: labels[LABEL_ENV_ACCOUNT] ?? null, ageHours: Math.round((ageSeconds / 3600) * 100) / 100, maxAgeHours: this.maxAgeHours, bytes: Number(labels[LABEL_ENV_BYTES] ?? 0) || 0 };
    if (outcome === 'removed') {
      await this.lastUsed.forget(key);
      envCacheEvent('evicted');
      this.opts.logger?.info(fields, `removed a kept environment older than ${limit}`);
      return `the kept environment was ${formatAge(ageSeconds)} old, older than ${limit} allows: it was removed, and setup ran`;
    }
    this.opts.logger?.warn({ ...fields, outcome }, `a kept environment older than ${limit} was not used; removing it failed`);
    return `the kept environment was ${formatAge(ageSeconds)} old, older than ${limit} allows: it was not used (${outcome}), and setup ran`;
  }

  /** Marks the environment as used now (for least-recently-used eviction). */
  touch(key: string): Promise<void> {
    return this.lastUsed.touch(key);
  }

  /** Removes the least recently used environments while they take more than LILYPAD_ENV_CACHE_GB. */
  evict(signal?: AbortSignal): Promise<EvictionSummary> {
    return evictKept(this.opts.docker, this.opts.owner, this.lastUsed, this.opts.maxBytes, signal, { maxAgeSeconds: this.maxAgeHours * 3600, logger: this.opts.logger });
  }

  private builder(key: string, repoId: string, exclusive: boolean): { builder: EnvBuilder; finish: (how: 'kept' | 'released') => void } {
    let settle: ((how: 'kept' | 'released') => void) | undefined;
    if (exclusive) {
      const done = new Promise<'kept' | 'released'>((resolve) => (settle = resolve));
      this.building.set(key, done);
    }
    const finish = (how: 'kept' | 'released') => {
      if (!settle) return;
      settle(how);
      settle = undefined;
      this.building.delete(key);
    };
    const builder: EnvBuilder = {
      keep: async (container, o) => {
        try {
          const outcome = await this.keep(container, key, repoId, o);
          finish(outcome.kept ? 'kept' : 'released');
          return outcome;
        } catch (err) {
          finish('released');
          throw err;
        }
      },
      release: () => finish('released'),
    };
    return { builder, finish };
  }

  private async keep(container: Docker.Container, key: string, repoId: string, o: { baseImageId: string; setupSeconds?: number | undefined; signal?: AbortSignal | undefined }): Promise<KeepOutcome> {
    try {
      const already = await this.lookup(key, repoId, o.signal);
      if (already) return { kept: already };
      const labels: Record<string, string> = {
        [LABEL_ENV]: String(ENV_FORMAT),
        [LABEL_ENV_KEY]: key,
        [LABEL_ENV_REPO]: repoId,
        [LABEL_ENV_ACCOUNT]: this.describe(repoId).account,
        [LABEL_ENV_REPO_NAME]: this.describe(repoId).name,
        [LABEL_ENV_BASE]: o.baseImageId,
        [LABEL_ENV_CREATED]: String(Math.floor(Date.now() / 1000)),
        ...(o.setupSeconds !== undefined ? { [LABEL_ENV_SETUP_SECONDS]: String(Math.round(o.setupSeconds * 10) / 10) } : {}),
      };
      const made = await commitKeptImage({ docker: this.opts.docker, container, baseImageId: o.baseImageId, ref: this.ref(key), owner: this.opts.owner, labels, maxBytes: this.opts.maxBytes, signal: o.signal });
      if (made.id === null) {
        return { kept: null, note: `not kept: setup wrote ${formatBytes(made.bytes)}, more than LILYPAD_ENV_CACHE_GB allows (${formatBytes(this.opts.maxBytes)})` };
      }
      await this.touch(key);
      envCacheEvent('stored');
      this.opts.logger?.info({ key, repoId, bytes: made.bytes, commitSeconds: made.seconds.commit, loadSeconds: made.seconds.load }, 'kept the environment after setup');
      await this.evict(o.signal).catch((err: unknown) => this.opts.logger?.warn({ err }, 'evicting kept environments failed'));
      const kept = await this.lookup(key, repoId, o.signal);
      return kept ? { kept, seconds: made.seconds } : { kept: null, note: 'the environment was kept but removed at once to stay within LILYPAD_ENV_CACHE_GB' };
    } catch (err) {
      if (o.signal?.aborted) throw new CancelledError(reasonText(o.signal.reason));
      envCacheEvent('failed');
      this.opts.logger?.warn({ err, key }, 'could not keep the environment');
      return { kept: null, note: `not kept: ${(err as Error).message}` };
    }
  }
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
}

/** Waits for `p`, or throws a CancelledError as soon as `signal` aborts. */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  throwIfAborted(signal);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new CancelledError(reasonText(signal.reason)));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** 45 s, 12 min, 5.2 h, 8.0 days. */
export function formatAge(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 48 * 3600) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} days`;
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1e9) return `${(bytes / 1e9).toFixed(1)} GB`;
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(1)} MB`;
  return `${Math.round(bytes / 1e3)} kB`;
}
