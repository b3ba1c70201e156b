import type { Duplex } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type Docker from 'dockerode';
import { AttachFrames } from './attach-frames.ts';
import { z } from 'zod';
import { SandboxError } from './errors.ts';
import { withDeadline } from './deadline.ts';

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  schema: z.ZodType;
}

const failureSchema = z.object({ error: z.string() }).passthrough();

/** Every reply carries the id of the request it answers and whether it succeeded. */
function envelopeOf(raw: unknown): { id: number; ok: boolean } | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { id, ok } = raw as { id?: unknown; ok?: unknown };
  return typeof id === 'number' && Number.isSafeInteger(id) && id > 0 && typeof ok === 'boolean' ? { id, ok } : undefined;
}

interface ChannelOptions {
  argv: string[];
  env: string[];
  user?: string;
  /** Longest reply line accepted; a longer one ends the channel (it cannot be a genuine reply). */
  maxLineBytes: number;
  /** Deadline for the Docker API calls that open the session. */
  openTimeoutMs?: number;
}

const DEFAULT_OPEN_TIMEOUT_MS = 30_000;

/**
 * A long-lived JSON-lines session with the toolbox process inside the container, over one
 * `docker exec` whose stdin stays open. One request costs well under a millisecond of transport,
 * where a `docker exec` per call costs ~50 ms.
 *
 * Nothing read here is trusted: each line is bounded, parsed with a schema, and must answer a
 * pending request exactly once. Anything else ends the channel with an error that says so.
 */
export class ToolboxChannel {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** Bytes of the current, unfinished line, kept as chunks: each byte is looked at once. */
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private stderrTail = '';
  private closedError: SandboxError | undefined;

  private constructor(
    private readonly stream: Duplex,
    private readonly maxLineBytes: number,
  ) {}

  static async open(_docker: Docker, container: Docker.Container, opts: ChannelOptions): Promise<ToolboxChannel> {
    const timeout = opts.openTimeoutMs ?? DEFAULT_OPEN_TIMEOUT_MS;
    const exec = await withDeadline(
      container.exec({
        Cmd: opts.argv,
        Env: opts.env,
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        WorkingDir: '/',
        ...(opts.user ? { User: opts.user } : {}),
      }),
      timeout,
      'creating the toolbox session',
    );
    const stream = (await withDeadline(exec.start({ hijack: true, stdin: true }), timeout, 'starting the toolbox session')) as Duplex;
    const channel = new ToolboxChannel(stream, opts.maxLineBytes);
    const stderr = new StringDecoder('utf8');
    const frames = new AttachFrames(
      (chunk) => channel.onData(chunk),
      (chunk) => {
        channel.stderrTail = (channel.stderrTail + stderr.write(chunk)).slice(-4000);
      },
    );
    stream.on('data', (chunk: Buffer) => frames.push(chunk));
    const onEnd = () => channel.fail(new SandboxError(channel.exitMessage()));
    stream.on('end', onEnd);
    stream.on('close', onEnd);
    stream.on('error', (err: Error) => channel.fail(new SandboxError(`toolbox stream error: ${err.message}`, { cause: err })));
    return channel;
  }

  private exitMessage(): string {
    const tail = this.stderrTail.trim();
    return tail ? `the toolbox process in the sandbox exited: ${tail.split('\n').slice(-5).join(' | ')}` : 'the toolbox process in the sandbox exited';
  }

  private onData(chunk: Buffer): void {
    if (this.closedError) return;
    let start = 0;
    for (let nl = chunk.indexOf(0x0a, start); nl >= 0; nl = chunk.indexOf(0x0a, start)) {
      if (!this.takePart(chunk.subarray(start, nl))) return;
      const line = Buffer.concat(this.partial, this.partialBytes);
      this.partial = [];
      this.partialBytes = 0;
      start = nl + 1;
      if (!this.onLine(line)) return;
    }
    if (start < chunk.length) this.takePart(chunk.subarray(start));
  }

  /** Adds bytes to the current line; ends the channel when the line outgrows the cap. */
  private takePart(part: Buffer): boolean {
    this.partialBytes += part.length;
    if (this.partialBytes > this.maxLineBytes) {
      this.partial = [];
      this.kill(`the toolbox sent a line longer than ${formatBytes(this.maxLineBytes)} (LILYPAD_TOOLBOX_MAX_LINE_MB); no genuine reply is that long`);
      return false;
    }
    if (part.length > 0) this.partial.push(part);
    return true;
  }

  private onLine(line: Buffer): boolean {
    const text = line.toString('utf8');
    if (!text.trim()) return true;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      this.kill(`the toolbox sent a line that is not JSON (${JSON.stringify(text.slice(0, 120))})`);
      return false;
    }
    const envelope = envelopeOf(raw);
    if (!envelope) {
      this.kill(`the toolbox sent a reply without a valid id and status (${JSON.stringify(text.slice(0, 120))})`);
      return false;
    }
    const { id, ok } = envelope;
    const waiter = this.pending.get(id);
    if (!waiter) {
      this.kill(`the toolbox answered request ${id}, which was not waiting for an answer (a duplicate or forged reply)`);
      return false;
    }
    this.pending.delete(id);
    if (!ok) {
      const failure = failureSchema.safeParse(raw);
      waiter.reject(new SandboxError(`toolbox request failed: ${failure.success ? failure.data.error : 'no error text'}`));
      return true;
    }
    const parsed = waiter.schema.safeParse(raw);
    if (!parsed.success) {
      const problem = parsed.error.issues[0];
      const where = problem ? `${problem.path.join('.') || '(reply)'}: ${problem.message}` : 'malformed';
      const err = new SandboxError(`the toolbox sent a malformed reply to request ${id} (${where})`);
      waiter.reject(err);
      this.kill(err.message);
      return false;
    }
    waiter.resolve(parsed.data);
    return true;
  }

  private fail(error: SandboxError): void {
    if (this.closedError) return;
    this.closedError = error;
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }

  /** Ends the channel for good: the other side broke the protocol. */
  private kill(why: string): void {
    this.fail(new SandboxError(why));
    this.stream.destroy();
  }

  get closed(): boolean {
    return this.closedError !== undefined;
  }

  /** Sends one request and waits for its reply, parsed with `schema`. */
  request<S extends z.ZodType>(payload: Record<string, unknown>, schema: S): Promise<z.infer<S>> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise<z.infer<S>>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, schema });
      this.stream.write(`${JSON.stringify({ ...payload, id })}\n`);
    });
  }

  /** Writes one raw line (used once, to hand the toolbox its source). */
  send(line: string): void {
    this.stream.write(`${line}\n`);
  }

  close(): void {
    this.fail(new SandboxError('the toolbox channel was closed'));
    this.stream.end();
    this.stream.destroy();
  }
}

function formatBytes(n: number): string {
  return n >= 1 << 20 ? `${Math.round(n / (1 << 20))} MiB` : `${n} bytes`;
}
