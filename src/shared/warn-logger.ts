/**
 * All a low layer needs of a logger: a warning with structured fields. The process's pino logger
 * (observability/logger.ts) fits, and so does anything a test passes in.
 */
export interface WarnLogger {
  warn(fields: object, message: string): void;
}
