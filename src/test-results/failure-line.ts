/**
 * The one line of a failed command's output that says why, for a person reading a summary (`lilypad
 * run` prints it under a failed setup command; the whole tail stays in result.json). Tools end
 * their output with generic lines ("error: subprocess-exited-with-error", "See above for output",
 * "A complete log of this run can be found in ..."), so those are passed over: the last line that
 * names a failure is taken, else the last line with any text.
 */

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;?]*[A-Za-z]/g;
const FAILURE = /\b(error|fatal|failed|failure|cannot|can't|could not|couldn't|unable|not found|no such|denied|refused|timed out|unreachable)\b|\berr!/i;
/** An errno name (ENOTFOUND, EACCES), in capitals only. */
const ERRNO = /\bE[A-Z_]{3,}\b/;
/** Lines that only say an error happened elsewhere: pip's build-isolation frame, npm's log pointer, and the like. */
const GENERIC = [
  /^error: subprocess-exited-with-error$/i,
  /originates from a subprocess/i,
  /see above for (the )?output/i,
  /did not run successfully/i,
  /a complete log of this run can be found/i,
  /^\[?(notice|hint|note)\]?:?\s/i,
  /^(npm (ERR!|error)\s*)$/i,
  /^(\[end of output\]|exit code: \d+)$/i,
];
const MAX_CHARS = 300;

export function failureLine(output: string): string | null {
  const lines = output
    .replace(ANSI, '')
    .split(/\r?\n/)
    .map((l) => l.replace(/^[\s│╰─>×|]+/, '').trim())
    .filter((l) => l.length > 0 && !GENERIC.some((re) => re.test(l)));
  const line = [...lines].reverse().find((l) => FAILURE.test(l) || ERRNO.test(l)) ?? lines[lines.length - 1];
  if (!line) return null;
  return line.length > MAX_CHARS ? `${line.slice(0, MAX_CHARS - 1)}…` : line;
}
