import type { Redis } from 'ioredis';
import type { WarnLogger } from '../shared/warn-logger.ts';
import { keepInstallationId } from './installation-id.ts';
import { keys } from './keys.ts';

/**
 * A worker instance is alive while its heartbeat key exists; it is refreshed far more often than it
 * expires (every LILYPAD_HEARTBEAT_SECONDS, default 15; it expires after three times that). The
 * value is the time of the last beat (for a human reading Redis); only its presence is read.
 */
export const HEARTBEAT_EVERY_MS = 15_000;
const TTL_BEATS = 3;

/**
 * Keeps this instance's heartbeat in Redis until stopped. With `installation`, each beat also
 * writes the installation id back if Redis lost it, so that the workers still running keep it.
 */
export function startHeartbeat(redis: Redis, prefix: string, instance: string, logger: WarnLogger, installation?: string, everyMs = HEARTBEAT_EVERY_MS): { stop(): Promise<void> } {
  const beat = async () => {
    try {
      await redis.set(keys.heartbeat(prefix, instance), String(Date.now()), 'PX', everyMs * TTL_BEATS);
      if (installation !== undefined) await keepInstallationId(redis, prefix, installation);
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'heartbeat failed');
    }
  };
  void beat();
  const timer = setInterval(() => void beat(), everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await redis.del(keys.heartbeat(prefix, instance)).catch(() => undefined);
    },
  };
}

export async function isAlive(redis: Redis, prefix: string, instance: string): Promise<boolean> {
  return (await redis.exists(keys.heartbeat(prefix, instance))) === 1;
}
