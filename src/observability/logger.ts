import tty from 'node:tty';
import { pino, type DestinationStream, type Logger } from 'pino';
import { prettyFactory } from 'pino-pretty';
import { z } from 'zod';
import { ConfigError } from '../config/env.ts';
import { SecretScanner } from './secrets.ts';

export type { Logger } from 'pino';

const REDACT_PATHS = [
  'apiKey',
  'token',
  'password',
  'privateKey',
  'authorization',
  '*.apiKey',
  '*.token',
  '*.password',
  '*.privateKey',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'env.OPENAI_API_KEY',
  'env.PRIVATE_KEY',
  'env.WEBHOOK_SECRET',
];

export type LogFormat = 'json' | 'pretty';

const formatSetting = z.enum(['json', 'pretty']).optional();

/**
 * How a log destination is written: LILYPAD_LOG_FORMAT (json | pretty) when set; otherwise pretty
 * for a terminal and JSON lines for anything else (a pipe, a file, a log collector, CI, tests).
 * A file destination is always JSON: it is read by programs, not people.
 */
export function logFormat(destination: string | number, env: NodeJS.ProcessEnv = process.env): LogFormat {
  if (typeof destination === 'string') return 'json';
  const raw = env['LILYPAD_LOG_FORMAT']?.trim().toLowerCase() || undefined;
  const parsed = formatSetting.safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(`LILYPAD_LOG_FORMAT=${JSON.stringify(env['LILYPAD_LOG_FORMAT'])} is not a log format; use json or pretty, or leave it unset (pretty on a terminal, JSON otherwise)`);
  }
  if (parsed.data) return parsed.data;
  const ci = env['CI'] !== undefined && env['CI'] !== '' && env['CI'] !== 'false';
  return !ci && tty.isatty(destination) ? 'pretty' : 'json';
}

/**
 * pino-pretty's formatter applied to each finished line in this thread, synchronously: the line
 * has been through redaction already, and nothing is lost when the process exits right after a log
 * call (pino-pretty's own stream and pino's transports format asynchronously).
 */
function prettyDestination(dest: string | number): DestinationStream {
  const out = forgivingDestination(dest);
  const format = prettyFactory({
    colorize: typeof dest === 'number' && tty.isatty(dest),
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,app',
    singleLine: true,
  });
  return {
    write(line: string) {
      out.write(format(line));
    },
  };
}

/**
 * The process logger: pino with secrets removed twice over, by key (tokens, keys, authorization
 * headers) and by value (the process's own secrets and token-shaped strings), before the line is
 * written as JSON or pretty-printed (see logFormat).
 */
export function createLogger(opts: {
  level: string;
  secrets?: Iterable<string | undefined>;
  destination?: string | number;
  /** Overrides logFormat(destination), e.g. to pretty-print into a file. */
  format?: LogFormat;
}): Logger {
  const scanner = new SecretScanner(opts.secrets ?? []);
  const destination = opts.destination ?? 2;
  const format = opts.format ?? logFormat(destination);
  return pino(
    {
      level: opts.level,
      base: { app: 'lilypad' },
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      hooks: {
        logMethod(args, method) {
          method.apply(this, args.map((a: unknown) => scanner.redactDeep(a)) as Parameters<typeof method>);
        },
      },
    },
    format === 'pretty' ? prettyDestination(destination) : forgivingDestination(destination),
  );
}

/**
 * pino's synchronous destination, except that a write it cannot make (the terminal closed: EIO;
 * the reader of a pipe gone: EPIPE; a full disk) costs the log line, never the process: the error
 * would otherwise be thrown from the next log call, in the middle of stopping a worker, with its
 * sandboxes, proxy and Redis still to be removed. After the first failure the lines are dropped.
 */
function forgivingDestination(dest: string | number): DestinationStream {
  const out = pino.destination({ dest, sync: true, mkdir: true });
  let broken = false;
  out.on('error', () => {
    broken = true;
  });
  return {
    write(line: string) {
      if (broken) return;
      try {
        out.write(line);
      } catch {
        broken = true;
      }
    },
  };
}
