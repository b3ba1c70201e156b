import { createHash } from 'node:crypto';

/**
 * A failing check's "failure signature": the check's name, its annotation messages and the last
 * error lines of its log, normalised so that what changes from one run to the next (numbers, times,
 * commit shas, temporary paths) does not count. Two runs with the same signature fail the same way,
 * which is how a caller tells that a fix attempt changed nothing and stops retrying.
 */

/** Error-looking lines at the end of a log taken into the signature. */
const ERROR_LINES = 5;
/** Lines at the end of a log used instead when none looks like an error. */
const FALLBACK_LINES = 3;
const ERRORISH = /\b(?:error|errors|fail|failed|failure|failures|exception|assert\w*|panic\w*|fatal|traceback)\b|✗|✘/i;

export function normaliseForSignature(text: string): string {
  return text
    .toLowerCase()
    .replace(/\b[0-9a-f]{7,64}\b/g, '<sha>')
    .replace(/(?:\/tmp|\/var\/folders|\/home\/runner\/work\/_temp)\/[^\s'":]+/g, '<tmp>')
    .replace(/\d+(?:\.\d+)?/g, '<n>')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The last error-looking lines of a cleaned log tail (or its last lines when none looks like one). */
export function lastErrorLines(lines: readonly string[]): string[] {
  const errors = lines.filter((l) => ERRORISH.test(l));
  const picked = errors.length > 0 ? errors.slice(-ERROR_LINES) : lines.filter((l) => l.trim() !== '').slice(-FALLBACK_LINES);
  return picked;
}

export function failureSignature(input: { name: string; annotationMessages: readonly string[]; logLines: readonly string[]; summary?: string }): string {
  const parts = [
    normaliseForSignature(input.name),
    ...[...new Set(input.annotationMessages.map(normaliseForSignature))].sort(),
    '--',
    ...lastErrorLines(input.logLines).map(normaliseForSignature),
  ];
  // A check with neither annotations nor a log (a commit status) fails "the same way" when its summary matches.
  if (input.annotationMessages.length === 0 && input.logLines.length === 0 && input.summary) parts.push(normaliseForSignature(input.summary));
  return createHash('sha256').update(parts.join('\n')).digest('hex').slice(0, 32);
}
