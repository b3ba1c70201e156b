import { LABEL_SNAPSHOT } from '../snapshot.ts';
import type Docker from 'dockerode';
import type { Logger } from '../../observability/logger.ts';
import { envCacheEvent, envCacheSize } from '../../observability/metrics.ts';
import { withDeadline } from '../deadline.ts';
import { LABEL_ENV_ACCOUNT, LABEL_ENV_BASE, LABEL_ENV_BYTES, LABEL_ENV_CREATED, LABEL_ENV_KEY, LABEL_ENV_OWNER, LABEL_ENV_PARTIAL, LABEL_ENV_REPO, LABEL_ENV_REPO_NAME } from './image.ts';
import type { LastUsed } from './last-used.ts';

const CALL_MS = 60_000;
/** An untagged or half-made image younger than this may still be a keep in progress elsewhere. */
const LEFTOVER_GRACE_MS = 15 * 60_000;
/** A sandbox image no tag names may still be configured by its id: only unused that long does it count as gone. */
const UNTAGGED_BASE_IDLE_MS = 60 * 60_000;

export interface KeptImageEntry {
  id: string;
  key: string | null;
  /** The repository id (`github:<id>`, `local:<path>`) and the name people know it by. */
  repoId: string | null;
  repoName: string | null;
  /** Whose setups made it (the size share); `unknown` on environments kept before accounts were labelled. */
  account: string;
  bytes: number;
  /** Milliseconds since the epoch. */
  lastUsed: number;
  /**
   * Never looked up again: replaced by a newer image under the same tag (untagged), the commit of
   * a keep that never finished (partial), or made from a sandbox image that is gone, or that no
   * tag names any more and was not used for an hour (a rebuilt image: keys hold the image id, so no
   * run asks for it again, and it holds the old image's layers on disk).
   */
  leftover: 'untagged' | 'partial' | 'base-gone' | null;
  createdMs: number;
}

export interface EvictionSummary {
  removed: Array<{ id: string; key: string | null; bytes: number; why: 'leftover' | 'age' | 'size' }>;
  /** Bytes this owner's kept environments use after the pass. */
  keptBytes: number;
}

/**
 * This owner's kept environments are removed while their own layers together exceed `maxBytes`:
 * each time from the account whose environments take the most disk, its least recently used
 * first. So an account within an equal share of the cap (the cap over the accounts that hold
 * environments) never loses one to another account's setups: it is the largest only when every
 * account is within that share, and then the cap is not exceeded. Leftovers (see KeptImageEntry)
 * and environments older than `maxAgeSeconds` go whatever the size. Only images labelled with
 * this owner are ever listed, so another installation's environments, and every image Lilypad did
 * not make, are never touched. An image a container still uses is refused by the engine (no force)
 * and stays; the next one goes instead.
 */
export async function evictKept(
  docker: Docker,
  owner: string,
  lastUsed: LastUsed,
  maxBytes: number,
  signal?: AbortSignal,
  opts: { maxAgeSeconds?: number | undefined; logger?: Logger | undefined } = {},
): Promise<EvictionSummary> {
  const entries = await listKept(docker, owner, lastUsed, signal);
  const now = Date.now();
  const removed: EvictionSummary['removed'] = [];
  const remove = async (e: KeptImageEntry, why: 'leftover' | 'age' | 'size'): Promise<boolean> => {
    const ok = await withDeadline(docker.getImage(e.id).remove({ force: false, noprune: false }), CALL_MS, 'removing a kept environment').then(
      () => true,
      (err: { statusCode?: number }) => err.statusCode === 404,
    );
    if (ok) {
      removed.push({ id: e.id, key: e.key, bytes: e.bytes, why });
      if (why !== 'leftover') opts.logger?.info({ key: e.key, repoId: e.repoId, repo: e.repoName ?? e.repoId, account: e.account, bytes: e.bytes, ageHours: Math.round(((now - e.createdMs) / 3600_000) * 100) / 100 }, why === 'age' ? 'removed a kept environment older than LILYPAD_ENV_MAX_AGE_HOURS' : 'removed a kept environment to stay within LILYPAD_ENV_CACHE_GB');
      // An untagged or partial image's key names a newer image, or none yet: its time stays.
      if (e.key && (e.leftover === null || e.leftover === 'base-gone')) await lastUsed.forget(e.key);
    }
    return ok;
  };
  // A young untagged or partial image may be a keep still in progress in another process.
  for (const e of entries.filter((x) => x.leftover === 'base-gone' || (x.leftover && now - x.createdMs > LEFTOVER_GRACE_MS))) await remove(e, 'leftover');
  const maxAgeMs = (opts.maxAgeSeconds ?? Infinity) * 1000;
  const live: KeptImageEntry[] = [];
  for (const e of entries.filter((x) => !x.leftover)) {
    if (now - e.createdMs > maxAgeMs && (await remove(e, 'age'))) continue;
    live.push(e);
  }
  // Per account, least recently used first.
  const accounts = new Map<string, { bytes: number; queue: KeptImageEntry[] }>();
  for (const e of live.sort((a, b) => a.lastUsed - b.lastUsed)) {
    const a = accounts.get(e.account) ?? { bytes: 0, queue: [] };
    a.bytes += e.bytes;
    a.queue.push(e);
    accounts.set(e.account, a);
  }
  let total = live.reduce((sum, e) => sum + e.bytes, 0);
  while (total > maxBytes) {
    // The account using the most disk that still has an environment to try (in use ones are skipped).
    const largest = [...accounts.values()].filter((a) => a.queue.length > 0).sort((a, b) => b.bytes - a.bytes)[0];
    const next = largest?.queue.shift();
    if (!largest || !next) break;
    if (await remove(next, 'size')) {
      total -= next.bytes;
      largest.bytes -= next.bytes;
    }
  }
  const evicted = removed.filter((r) => r.why !== 'leftover' || entries.some((k) => k.id === r.id && k.leftover === 'base-gone')).length;
  if (evicted > 0) envCacheEvent('evicted', evicted);
  envCacheSize(total);
  return { removed, keptBytes: total };
}

type BaseState = 'named' | 'unnamed' | 'gone';

/** This owner's kept images (tagged or not), with their size and when they were last used. */
export async function listKept(docker: Docker, owner: string, lastUsed: LastUsed, signal?: AbortSignal): Promise<KeptImageEntry[]> {
  const list = await withDeadline(docker.listImages({ filters: { label: [`${LABEL_ENV_OWNER}=${owner}`] }, ...(signal ? { abortSignal: signal } : {}) }), CALL_MS, 'listing kept environments');
  const bases = new Map<string, Promise<BaseState>>();
  const baseNamed = (id: string) => {
    let p = bases.get(id);
    if (!p) {
      p = withDeadline(docker.getImage(id).inspect(), CALL_MS, 'inspecting a sandbox image').then(
        (info): BaseState => ((info.RepoTags ?? []).some((t) => t !== '<none>:<none>') ? 'named' : 'unnamed'),
        (err: { statusCode?: number }): BaseState => {
          if (err.statusCode === 404) return 'gone';
          throw err;
        },
      );
      bases.set(id, p);
    }
    return p;
  };
  const out: KeptImageEntry[] = [];
  for (const img of list) {
    const labels = img.Labels ?? {};
    // A run's snapshot of a sandbox started from a kept environment carries its labels; it is the run's to remove.
    if (labels[LABEL_SNAPSHOT] !== undefined) continue;
    const key = labels[LABEL_ENV_KEY] ?? null;
    const tagged = (img.RepoTags ?? []).some((t) => key !== null && t.endsWith(`:${key}`));
    const createdMs = Number(labels[LABEL_ENV_CREATED] ?? img.Created) * 1000;
    const used = key && tagged ? await lastUsed.get(key) : null;
    const base = labels[LABEL_ENV_BASE];
    const baseState = base && tagged ? await baseNamed(base) : 'named';
    const baseGone = baseState === 'gone' || (baseState === 'unnamed' && Date.now() - (used ?? createdMs) > UNTAGGED_BASE_IDLE_MS);
    const leftover = labels[LABEL_ENV_PARTIAL] === 'true' ? 'partial' : !tagged ? 'untagged' : baseGone ? 'base-gone' : null;
    out.push({
      id: img.Id,
      key,
      repoId: labels[LABEL_ENV_REPO] ?? null,
      repoName: labels[LABEL_ENV_REPO_NAME] ?? null,
      account: labels[LABEL_ENV_ACCOUNT] ?? 'unknown',
      bytes: Number(labels[LABEL_ENV_BYTES] ?? 0) || 0,
      lastUsed: used ?? createdMs,
      leftover,
      createdMs,
    });
  }
  return out;
}
