import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { WarnLogger } from '../shared/warn-logger.ts';
import { keys } from './keys.ts';

/** A request to stop a job, as published on the channel and stored under the job's flag key. */
const cancelRequestSchema = z.object({
  jobId: z.string().min(1),
  by: z.string().optional(),
  why: z.string(),
});
export type CancelRequest = z.infer<typeof cancelRequestSchema>;

/**
 * Where invalid messages are reported when the caller gave no logger: a process warning, so a bad
 * message is never dropped without a trace.
 */
const processWarnings: WarnLogger = {
  warn: (obj, msg) => process.emitWarning(`${msg}: ${JSON.stringify(obj)}`, 'LilypadCancelBus'),
};

/**
 * Reads one cancel request from its Redis text. Not JSON, or not the shape above: `null` and the
 * reason, for the caller to log; a message that cannot be read is ignored, never thrown.
 */
export function parseCancelRequest(raw: string): { ok: true; request: CancelRequest } | { ok: false; reason: string } {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (err) {
    return { ok: false, reason: `not JSON (${(err as Error).message})` };
  }
  const parsed = cancelRequestSchema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: z.prettifyError(parsed.error).replace(/\n/g, '; ') };
  return { ok: true, request: parsed.data };
}

/**
 * Cancellation across processes: the webhook may land on one machine while the job runs on
 * another. A request is both published (for the worker holding the job now) and stored with a
 * TTL (for a worker that picks the job up a moment later).
 */
export class CancelBus {
  private subscriber: Redis | undefined;
  /** The unreadable flag last reported per job: the worker polls the flag every few seconds. */
  private readonly reportedFlags = new Map<string, string>();

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly logger: WarnLogger = processWarnings,
  ) {}

  private channel(): string {
    return keys.cancelChannel(this.prefix);
  }

  private flagKey(jobId: string): string {
    return keys.cancelled(this.prefix, jobId);
  }

  async request(req: CancelRequest): Promise<void> {
    const text = JSON.stringify(cancelRequestSchema.parse(req));
    await this.redis.set(this.flagKey(req.jobId), text, 'EX', 24 * 60 * 60);
    await this.redis.publish(this.channel(), text);
  }

  /** The stored request for the job; `null` when there is none or it cannot be read (logged). */
  async pending(jobId: string): Promise<CancelRequest | null> {
    const key = this.flagKey(jobId);
    const raw = await this.redis.get(key);
    if (raw === null) return null;
    const parsed = parseCancelRequest(raw);
    if (parsed.ok && parsed.request.jobId === jobId) return parsed.request;
    if (this.reportedFlags.get(jobId) !== raw) {
      this.reportedFlags.set(jobId, raw);
      const reason = parsed.ok ? `it names job ${parsed.request.jobId}` : parsed.reason;
      this.logger.warn({ key, reason, message: raw.slice(0, 200) }, 'ignored an unreadable cancel flag');
    }
    return null;
  }

  async clear(jobId: string): Promise<void> {
    this.reportedFlags.delete(jobId);
    await this.redis.del(this.flagKey(jobId));
  }

  async subscribe(onCancel: (req: CancelRequest) => void): Promise<void> {
    this.subscriber = this.redis.duplicate();
    this.subscriber.on('message', (channel: string, message: string) => {
      const parsed = parseCancelRequest(message);
      if (!parsed.ok) {
        this.logger.warn({ channel, reason: parsed.reason, message: message.slice(0, 200) }, 'ignored an unreadable cancel message');
        return;
      }
      try {
        onCancel(parsed.request);
      } catch (err) {
        // A throw here would surface inside ioredis's reply parser; the next message must still arrive.
        this.logger.warn({ channel, job: parsed.request.jobId, err: (err as Error).message }, 'the cancel handler failed');
      }
    });
    await this.subscriber.subscribe(this.channel());
  }

  async close(): Promise<void> {
    await this.subscriber?.quit().catch(() => undefined);
  }
}
