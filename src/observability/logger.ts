import { pino, type Logger } from 'pino';
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

/**
 * The process logger: JSON lines (pino) with secrets removed twice over: by key (tokens, keys,
 * authorization headers) and by value (the process's own secrets and token-shaped strings).
 */
export function createLogger(opts: { level: string; secrets?: Iterable<string | undefined>; destination?: string | number }): Logger {
  const scanner = new SecretScanner(opts.secrets ?? []);
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
    pino.destination({ dest: opts.destination ?? 2, sync: true, mkdir: true }),
  );
}
