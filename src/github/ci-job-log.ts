import { sanitizeIssueText } from '../agent/prompt.ts';
import type { SecretScanner } from '../observability/secrets.ts';
import { escapeMentions } from '../shared/escape-mentions.ts';
import { statusOf, type GitHubClient } from './client.ts';

/**
 * The tail of a GitHub Actions job's log, as data for a "fix CI" task: only the end of the file is
 * downloaded (a byte range), then cleaned (timestamps, colours, progress redraws and workflow
 * command markers removed), scrubbed of hidden text and secret-scanned as a whole (every full line
 * read), and only then cut to its last lines and bytes, with its @mentions defused. GitHub answers the log request with a redirect to a
 * short-lived signed address on its blob storage; that address is fetched without Lilypad's token.
 */

export interface LogTailLimits {
  /** Bytes asked for from the end of the file (a `Range: bytes=-N` request). */
  downloadBytes: number;
  /** A server that ignores the range is read to the end up to this many bytes, then given up on. */
  maxReadBytes: number;
  /** Lines kept at the end of the log. */
  lines: number;
  /** Bytes (UTF-8) kept at the end of the kept lines. */
  bytes: number;
  /** Characters kept of one line (the start of it). */
  lineChars: number;
  timeoutMs: number;
}

export const DEFAULT_LOG_TAIL_LIMITS: LogTailLimits = {
  downloadBytes: 256 * 1024,
  maxReadBytes: 32 * 1024 * 1024,
  lines: 120,
  bytes: 12 * 1024,
  lineChars: 400,
  timeoutMs: 30_000,
};

export interface LogTail {
  /** The kept lines, oldest first, cleaned and redacted. */
  lines: string[];
  /** Cleaned lines read but not kept (older than the tail). */
  droppedLines: number;
  /** Only the end of the file was downloaded (older lines were never read). */
  partial: boolean;
  /** Lines after the failing step's end (post-job clean-up) left out. */
  afterFailureLines: number;
  /** Secret-shaped texts replaced with [REDACTED]. */
  redactions: number;
  /** HTML comments and invisible characters removed. */
  hiddenRemoved: number;
}

export type LogTailResult = { ok: true; tail: LogTail } | { ok: false; reason: string };

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?/;
// CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks), then any other escape.
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]/g;
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/g;
const WORKFLOW_COMMAND = /^##\[(\w+)\]/;
/** The runner's line at the end of a failed step; what follows is post-job clean-up. */
const STEP_FAILED = /^Error: Process completed with exit code \d+\.$/;

/** One raw log line as a person reading the log on GitHub would see it. Null: a line with nothing to show. */
function cleanLine(raw: string): string | null {
  let line = raw.replace(TIMESTAMP, '');
  // A progress bar redraws the line after a carriage return; only the last drawing is visible.
  const cr = line.replace(/\r+$/, '').lastIndexOf('\r');
  if (cr >= 0) line = line.slice(cr + 1);
  line = line.replace(ANSI, '').replace(CONTROL, '');
  const command = WORKFLOW_COMMAND.exec(line);
  if (command) {
    const rest = line.slice(command[0].length);
    switch (command[1]) {
      case 'endgroup':
        return null;
      case 'error':
        return `Error: ${rest}`;
      case 'warning':
        return `Warning: ${rest}`;
      default:
        return rest; // group, command, debug, notice: the text without the marker
    }
  }
  return line.replace(/\s+$/, '');
}

/**
 * The tail of a raw job log (pure). `partial`: the text starts somewhere inside the file, so its
 * first line may be cut and is dropped.
 */
export function tailOfLog(raw: string, opts: { partial: boolean; scanner: SecretScanner; limits?: Partial<LogTailLimits> }): LogTail {
  const limits = { ...DEFAULT_LOG_TAIL_LIMITS, ...opts.limits };
  const rawLines = raw.replace(/^\uFEFF/, '').split('\n');
  if (opts.partial) rawLines.shift();
  const cleaned = rawLines.map(cleanLine).filter((l): l is string => l !== null);

  // Hidden text out and secrets redacted on every whole line of the text read, before any cut: a
  // token that crosses the per-line cut, or a key whose BEGIN line is older than the kept lines,
  // is still seen whole. Hidden text goes first (a comment or a zero-width character inside a
  // token would hide it), line by line: a stray `<!--` hides the rest of its line, not of the log.
  let hiddenRemoved = 0;
  const visible = cleaned
    .map((l) => {
      const h = sanitizeIssueText(l);
      hiddenRemoved += h.removedComments + h.removedInvisible;
      return h.text;
    })
    .join('\n');
  const redacted = opts.scanner.redact(visible);
  const redactions = count(redacted, '[REDACTED]') - count(visible, '[REDACTED]');
  let lines = redacted.split('\n');
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  // The failing step ends with the runner's exit-code line; the post-job steps after it only clean up.
  const lastFailure = lines.findLastIndex((l) => STEP_FAILED.test(l));
  const afterFailureLines = lastFailure >= 0 ? lines.length - lastFailure - 1 : 0;
  if (lastFailure >= 0) lines = lines.slice(0, lastFailure + 1);
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  lines = lines.filter((l, i) => l !== '' || lines[i - 1] !== '');

  const read = lines.length;
  lines = lines.slice(-limits.lines).map((l) => (l.length > limits.lineChars ? `${l.slice(0, limits.lineChars)} [… ${l.length - limits.lineChars} more characters]` : l));
  let bytes = lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0);
  while (lines.length > 1 && bytes > limits.bytes) bytes -= Buffer.byteLength(lines.shift() ?? '') + 1;

  // A log can print an issue body or a comment: its @mentions are defused like any other quoted text.
  const kept = escapeMentions(lines.join('\n')).split('\n');
  return {
    lines: kept,
    droppedLines: read - kept.length,
    partial: opts.partial,
    afterFailureLines,
    redactions,
    hiddenRemoved,
  };
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

/** Reads a body to its end keeping only the last `keep` bytes; gives up after `maxRead` bytes. */
async function readTail(body: ReadableStream<Uint8Array> | null, keep: number, maxRead: number): Promise<{ bytes: Buffer; total: number; complete: boolean }> {
  if (!body) return { bytes: Buffer.alloc(0), total: 0, complete: true };
  const reader = body.getReader();
  let chunks: Buffer[] = [];
  let held = 0;
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxRead) {
      await reader.cancel().catch(() => undefined);
      return { bytes: Buffer.alloc(0), total, complete: false };
    }
    chunks.push(Buffer.from(value));
    held += value.byteLength;
    if (held > 2 * keep) {
      const joined = Buffer.concat(chunks);
      chunks = [joined.subarray(joined.length - keep)];
      held = keep;
    }
  }
  const all = Buffer.concat(chunks);
  return { bytes: all.length > keep ? all.subarray(all.length - keep) : all, total, complete: true };
}

/** Why a log could not be read, in words an operator can act on. */
function refusal(err: unknown): string {
  const status = statusOf(err);
  if (status === 403) return 'GitHub refused the job log (403): the app needs the `actions: read` permission (an existing installation must accept it in its settings)';
  if (status === 404) return 'GitHub has no log for this job (404): it is still running, or its logs were deleted';
  if (status === 410) return 'the job log has expired (410)';
  if (status !== undefined) return `GitHub answered ${status} to the job log request`;
  return `the job log could not be fetched: ${err instanceof Error ? err.message : String(err)}`;
}

/**
 * Whether Lilypad fetches a download address GitHub gave: http(s) only, and https whenever the API
 * itself is (a redirect must not downgrade the transport of a log that may hold secrets).
 */
export function downloadAllowed(location: string, apiBaseUrl: string): boolean {
  let url: URL;
  try {
    url = new URL(location);
  } catch {
    return false;
  }
  if (url.protocol === 'https:') return true;
  return url.protocol === 'http:' && apiBaseUrl.startsWith('http:');
}

/** Downloads the end of the log at `url` (no credentials: the address is signed) and returns its raw text. */
async function downloadEnd(url: string, limits: LogTailLimits, signal: AbortSignal): Promise<{ text: string; partial: boolean } | { reason: string }> {
  const res = await fetch(url, { headers: { range: `bytes=-${limits.downloadBytes}` }, signal });
  if (res.status === 206) {
    const { bytes } = await readTail(res.body, limits.downloadBytes, limits.downloadBytes * 2);
    const total = Number(/\/(\d+)$/.exec(res.headers.get('content-range') ?? '')?.[1] ?? NaN);
    return { text: bytes.toString('utf8'), partial: !(total <= bytes.length) };
  }
  if (res.status === 200) {
    const read = await readTail(res.body, limits.downloadBytes, limits.maxReadBytes);
    if (!read.complete) return { reason: `the job log is larger than ${limits.maxReadBytes} bytes and its server does not send byte ranges; not read` };
    return { text: read.bytes.toString('utf8'), partial: read.total > read.bytes.length };
  }
  await res.body?.cancel().catch(() => undefined);
  return { reason: `the job log download answered ${res.status}` };
}

/** The cleaned, bounded, secret-scanned tail of GitHub Actions job `jobId`'s log, or why there is none. */
export async function fetchJobLogTail(
  client: GitHubClient,
  opts: { owner: string; repo: string; jobId: number; scanner: SecretScanner; limits?: Partial<LogTailLimits>; signal?: AbortSignal },
): Promise<LogTailResult> {
  const limits = { ...DEFAULT_LOG_TAIL_LIMITS, ...opts.limits };
  const signal = opts.signal ? AbortSignal.any([opts.signal, AbortSignal.timeout(limits.timeoutMs)]) : AbortSignal.timeout(limits.timeoutMs);
  try {
    // redirect: manual, so that the download address is fetched by us, without the token.
    const res = await client.request('GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs', {
      owner: opts.owner,
      repo: opts.repo,
      job_id: opts.jobId,
      request: { redirect: 'manual', signal },
    });
    const location = (res.headers as Record<string, string | undefined>).location;
    let raw: { text: string; partial: boolean } | { reason: string };
    const apiBase = String(client.request.endpoint.DEFAULTS.baseUrl);
    if (location && !downloadAllowed(location, apiBase)) raw = { reason: `GitHub pointed the log download at an address Lilypad does not fetch (${location.split('?')[0]?.slice(0, 100)})` };
    else if (location) raw = await downloadEnd(location, limits, signal);
    else if (typeof res.data === 'string') raw = { text: res.data.slice(-limits.downloadBytes), partial: res.data.length > limits.downloadBytes };
    else if ((res.data as unknown) instanceof ArrayBuffer) {
      const buf = Buffer.from(res.data as unknown as ArrayBuffer);
      raw = { text: buf.subarray(Math.max(0, buf.length - limits.downloadBytes)).toString('utf8'), partial: buf.length > limits.downloadBytes };
    } else raw = { reason: `GitHub answered ${res.status} without a log or a download address` };
    if ('reason' in raw) return { ok: false, reason: raw.reason };
    return { ok: true, tail: tailOfLog(raw.text, { partial: raw.partial, scanner: opts.scanner, limits }) };
  } catch (err) {
    if (opts.signal?.aborted) throw err;
    return { ok: false, reason: refusal(err) };
  }
}
