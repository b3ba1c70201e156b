import { PassThrough, type Duplex } from 'node:stream';
import { finished } from 'node:stream/promises';
import type Docker from 'dockerode';
import { withDeadline } from './deadline.ts';

interface ExecOnceResult {
  exitCode: number | null;
  stdout: Buffer;
  stderr: Buffer;
}

interface ExecOnceOptions {
  argv: string[];
  user: string;
  env?: string[];
  timeoutMs: number;
  maxBytes: number;
  /** Streamed to the command's stdin; its end closes stdin. Without it, stdin is not attached. */
  input?: NodeJS.ReadableStream;
  /** Where stdout goes, whole, instead of being kept (then `stdout` comes back empty). */
  output?: NodeJS.WritableStream;
}

/**
 * One short command over its own `docker exec`, with a deadline on every Docker call and on the
 * output, which is kept only up to `maxBytes` per stream.
 */
export async function execOnce(container: Docker.Container, opts: ExecOnceOptions): Promise<ExecOnceResult> {
  const what = `\`${opts.argv[0]}\` in the sandbox`;
  const stdin = opts.input !== undefined;
  const exec = await withDeadline(
    container.exec({ Cmd: opts.argv, Env: opts.env ?? [], User: opts.user, AttachStdout: true, AttachStderr: true, AttachStdin: stdin, Tty: false, WorkingDir: '/' }),
    opts.timeoutMs,
    `creating ${what}`,
  );
  const stream = (await withDeadline(exec.start({ hijack: true, stdin }), opts.timeoutMs, `starting ${what}`)) as Duplex;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const keep = (into: Buffer[]) => (chunk: Buffer) => {
    const have = into.reduce((n, b) => n + b.length, 0);
    if (have < opts.maxBytes) into.push(chunk.subarray(0, opts.maxBytes - have));
  };
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  if (opts.output) stdout.pipe(opts.output, { end: false });
  else stdout.on('data', keep(out));
  stderr.on('data', keep(err));
  container.modem.demuxStream(stream, stdout, stderr);
  const ended = new Promise<void>((resolve) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', () => resolve());
  });
  // The input's end half-closes the connection, which the engine passes on as the end of stdin.
  opts.input?.pipe(stream, { end: true });
  try {
    await withDeadline(ended, opts.timeoutMs, what);
    // Everything read is handed on before the caller closes `output`.
    if (opts.output) await withDeadline(finished(stdout.end()), opts.timeoutMs, `${what}: handing on its output`);
  } finally {
    opts.input?.unpipe(stream);
    stream.destroy();
  }
  const info = await withDeadline(exec.inspect(), opts.timeoutMs, `inspecting ${what}`).catch(() => undefined);
  return { exitCode: info?.ExitCode ?? null, stdout: Buffer.concat(out), stderr: Buffer.concat(err) };
}
