import type Docker from 'dockerode';
import { envCacheEvent, envCacheSize } from '../../observability/metrics.ts';
import { withDeadline } from '../deadline.ts';
import { LABEL_ENV_BYTES, LABEL_ENV_CREATED, LABEL_ENV_KEY, LABEL_ENV_OWNER, LABEL_ENV_PARTIAL } from './image.ts';
import type { LastUsed } from './last-used.ts';

const CALL_MS = 60_000;
/** An untagged or half-made image younger than this may still be a keep in progress elsewhere. */
const LEFTOVER_GRACE_MS = 15 * 60_000;

export interface KeptImageEntry {
  id: string;
  key: string | null;
  bytes: number;
  /** Milliseconds since the epoch. */
  lastUsed: number;
  /** Replaced by a newer image under the same tag, or the commit of a keep that never finished. */
  leftover: boolean;
  createdMs: number;
}

export interface EvictionSummary {
  removed: Array<{ id: string; key: string | null; bytes: number }>;
  /** Bytes this owner's kept environments use after the pass. */
  keptBytes: number;
}

/**
 * Least recently used first, this owner's kept environments are removed while their own layers
 * together exceed `maxBytes`; leftovers (untagged, or a keep that never finished) go whatever the
 * size once they are old enough. Only images labelled with this owner are ever listed, so another
 * installation's environments, and every image Lilypad did not make, are never touched. An image
 * a container still uses is refused by the engine (no force) and stays; the next one goes instead.
 */
export async function evictKept(docker: Docker, owner: string, lastUsed: LastUsed, maxBytes: number, signal?: AbortSignal): Promise<EvictionSummary> {
  const entries = await listKept(docker, owner, lastUsed, signal);
  const now = Date.now();
  const removed: EvictionSummary['removed'] = [];
  const remove = async (e: KeptImageEntry): Promise<boolean> => {
    const ok = await withDeadline(docker.getImage(e.id).remove({ force: false, noprune: false }), CALL_MS, 'removing a kept environment').then(
      () => true,
      (err: { statusCode?: number }) => err.statusCode === 404,
    );
    if (ok) {
      removed.push({ id: e.id, key: e.key, bytes: e.bytes });
      if (e.key && !e.leftover) await lastUsed.forget(e.key);
    }
    return ok;
  };
  for (const e of entries.filter((x) => x.leftover && now - x.createdMs > LEFTOVER_GRACE_MS)) await remove(e);
  const kept = entries.filter((x) => !x.leftover).sort((a, b) => a.lastUsed - b.lastUsed);
  let total = kept.reduce((sum, e) => sum + e.bytes, 0);
  for (const e of kept) {
    if (total <= maxBytes) break;
    if (await remove(e)) total -= e.bytes;
  }
  const evicted = removed.filter((r) => kept.some((k) => k.id === r.id)).length;
  if (evicted > 0) envCacheEvent('evicted', evicted);
  envCacheSize(total);
  return { removed, keptBytes: total };
}

/** This owner's kept images (tagged or not), with their size and when they were last used. */
export async function listKept(docker: Docker, owner: string, lastUsed: LastUsed, signal?: AbortSignal): Promise<KeptImageEntry[]> {
  const list = await withDeadline(docker.listImages({ filters: { label: [`${LABEL_ENV_OWNER}=${owner}`] }, ...(signal ? { abortSignal: signal } : {}) }), CALL_MS, 'listing kept environments');
  const out: KeptImageEntry[] = [];
  for (const img of list) {
    const labels = img.Labels ?? {};
    const key = labels[LABEL_ENV_KEY] ?? null;
    const tagged = (img.RepoTags ?? []).some((t) => key !== null && t.endsWith(`:${key}`));
    const createdMs = Number(labels[LABEL_ENV_CREATED] ?? img.Created) * 1000;
    const used = key && tagged ? await lastUsed.get(key) : null;
    out.push({
      id: img.Id,
      key,
      bytes: Number(labels[LABEL_ENV_BYTES] ?? 0) || 0,
      lastUsed: used ?? createdMs,
      leftover: !tagged || labels[LABEL_ENV_PARTIAL] === 'true',
      createdMs: Number(img.Created) * 1000,
    });
  }
  return out;
}
