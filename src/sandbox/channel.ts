import { PassThrough, type Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { SandboxError } from './errors.ts';

interface Pending {
  resolve: (value: Record<string, unknown>) => void;
  reject: (error: Error) => void;
}

/**
 * A long-lived JSON-lines session with the toolbox process inside the container, over one
 * `docker exec` whose stdin stays open. One request costs well under a millisecond of transport,
 * where a `docker exec` per call costs ~50 ms.
 */
export class ToolboxChannel {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private buffer = '';
  private stderrTail = '';
  private closedError: SandboxError | undefined;

  private constructor(private readonly stream: Duplex) {}

  static async open(docker: Docker, container: Docker.Container, opts: { argv: string[]; env: string[]; user?: string }): Promise<ToolboxChannel> {
    const exec = await container.exec({
      Cmd: opts.argv,
      Env: opts.env,
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      WorkingDir: '/',
      ...(opts.user ? { User: opts.user } : {}),
    });
    const stream = (await exec.start({ hijack: true, stdin: true })) as Duplex;
    const channel = new ToolboxChannel(stream);
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    docker.modem.demuxStream(stream, stdout, stderr);
    stdout.setEncoding('utf8');
    stdout.on('data', (chunk: string) => channel.onData(chunk));
    stderr.setEncoding('utf8');
    stderr.on('data', (chunk: string) => {
      channel.stderrTail = (channel.stderrTail + chunk).slice(-4000);
    });
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

  private onData(chunk: string): void {
    this.buffer += chunk;
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      if (!line.trim()) continue;
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        this.stderrTail = (this.stderrTail + `\nunparseable toolbox output: ${line.slice(0, 200)}`).slice(-4000);
        continue;
      }
      const id = typeof msg['id'] === 'number' ? msg['id'] : -1;
      const waiter = this.pending.get(id);
      if (!waiter) continue;
      this.pending.delete(id);
      if (msg['ok'] === true) waiter.resolve(msg);
      else waiter.reject(new SandboxError(`toolbox request failed: ${String(msg['error'])}`));
    }
  }

  private fail(error: SandboxError): void {
    if (this.closedError) return;
    this.closedError = error;
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }

  get closed(): boolean {
    return this.closedError !== undefined;
  }

  request(payload: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
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
