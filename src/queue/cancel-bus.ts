import type { Redis } from 'ioredis';

export interface CancelRequest {
  jobId: string;
  by?: string | undefined;
  why: string;
}

/**
 * Cancellation across processes: the webhook may land on one machine while the job runs on
 * another. A request is both published (for the worker holding the job now) and stored with a
 * TTL (for a worker that picks the job up a moment later).
 */
export class CancelBus {
  private subscriber: Redis | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private channel(): string {
    return `${this.prefix}:cancel`;
  }

  private flagKey(jobId: string): string {
    return `${this.prefix}:cancelled:${jobId}`;
  }

  async request(req: CancelRequest): Promise<void> {
    await this.redis.set(this.flagKey(req.jobId), JSON.stringify(req), 'EX', 24 * 60 * 60);
    await this.redis.publish(this.channel(), JSON.stringify(req));
  }

  async pending(jobId: string): Promise<CancelRequest | null> {
    const raw = await this.redis.get(this.flagKey(jobId));
    return raw ? (JSON.parse(raw) as CancelRequest) : null;
  }

  async clear(jobId: string): Promise<void> {
    await this.redis.del(this.flagKey(jobId));
  }

  async subscribe(onCancel: (req: CancelRequest) => void): Promise<void> {
    this.subscriber = this.redis.duplicate();
    this.subscriber.on('message', (_channel: string, message: string) => {
      try {
        onCancel(JSON.parse(message) as CancelRequest);
      } catch {
        /* ignore malformed messages */
      }
    });
    await this.subscriber.subscribe(this.channel());
  }

  async close(): Promise<void> {
    await this.subscriber?.quit().catch(() => undefined);
  }
}
