/**
 * Secret detection and redaction. Used on everything Lilypad writes down or publishes: logs, stored
 * trajectories, and (for the GitHub app) diffs and pull-request texts, which are refused on a hit.
 */
const KEY_WITH_BEGIN = /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g;
// The base64 lines right before an END line are a key even without their BEGIN line (a text that
// starts inside a key: the end of a log, a hunk). At most 200 lines, so a long run of one-word
// lines with no END after it costs little.
const KEY_WITHOUT_BEGIN = /^(?:[ \t]*[A-Za-z0-9+/=]+[ \t]*\r?\n){1,200}[ \t]*-----END [A-Z ]*PRIVATE KEY-----/gm;

const TOKEN_PATTERNS: readonly RegExp[] = [
  /\bgh[pousr]_[A-Za-z0-9]{30,255}\b/g, // GitHub classic/app tokens: ghp_, gho_, ghu_, ghs_, ghr_
  /\bgithub_pat_[A-Za-z0-9_]{40,255}\b/g,
  KEY_WITH_BEGIN,
  KEY_WITHOUT_BEGIN,
  /\bsk-[A-Za-z0-9_-]{32,}\b/g, // OpenAI-style API keys
  /(?<=\b[a-z][a-z0-9+.-]*:\/\/)[^/\s:@]*:[^/\s@]+(?=@)/gi, // credentials inside a URL (redis://:password@ too)
];

/**
 * A text every match of the pattern at the same index must contain. Checking it first skips the
 * regex scan (the URL pattern's lookbehind is tried at every position) on the usual text that
 * has no candidate at all; the result is the same either way.
 */
const REQUIRED_TEXT: readonly string[] = ['_', 'github_pat_', 'PRIVATE KEY-----', 'PRIVATE KEY-----', 'sk-', '://'];

const REDACTED = '[REDACTED]';

export class SecretScanner {
  private readonly values: string[];

  /** `values` are the exact secrets this process holds (API keys, tokens); short ones are ignored. */
  constructor(values: Iterable<string | undefined> = []) {
    this.values = [...new Set([...values].filter((v): v is string => typeof v === 'string' && v.length >= 8))];
  }

  withValues(values: Iterable<string | undefined>): SecretScanner {
    return new SecretScanner([...this.values, ...values]);
  }

  /** Names the kinds of secret found in `text` (never the secret itself). */
  findings(text: string): string[] {
    const found: string[] = [];
    for (const value of this.values) if (text.includes(value)) found.push('a secret value held by this process');
    for (const [i, pattern] of TOKEN_PATTERNS.entries()) {
      if (!text.includes(REQUIRED_TEXT[i]!)) continue;
      pattern.lastIndex = 0;
      // A whole key (BEGIN to END) is one finding, not two: its END is looked at without it.
      const match = pattern.exec(pattern === KEY_WITHOUT_BEGIN ? text.replace(KEY_WITH_BEGIN, '') : text);
      if (!match) continue;
      // A key found by its END line is named by that line, never by the start of its body.
      if (pattern === KEY_WITHOUT_BEGIN) found.push('-----END … PRIVATE KEY----- token-shaped text');
      else found.push(`${match[0].slice(0, 11).replace(/[A-Za-z0-9]{4}$/, '')}… token-shaped text`);
    }
    return found;
  }

  redact(text: string): string {
    let out = text;
    for (const value of this.values) if (out.includes(value)) out = out.split(value).join(REDACTED);
    for (const [i, pattern] of TOKEN_PATTERNS.entries()) if (out.includes(REQUIRED_TEXT[i]!)) out = out.replace(pattern, REDACTED);
    return out;
  }

  /**
   * redactDeep, when it could change anything: one scan of every string joined by newlines first
   * (a newline keeps each string's edges word boundaries, and no pattern's match needs to cross
   * one), and the field-by-field walk only when that scan finds something. Returns `value` itself
   * when there is nothing to redact.
   */
  redactDeepIfNeeded<T>(value: T): T {
    const texts: string[] = [];
    collectStrings(value, texts, 0);
    return this.findings(texts.join('\n')).length > 0 ? this.redactDeep(value) : value;
  }

  /**
   * Deep-redacts every string inside plain objects and arrays (cycle-safe, depth-limited). Class
   * instances other than errors are left to their own serializers.
   */
  redactDeep<T>(value: T, seen: WeakSet<object> = new WeakSet(), depth = 0): T {
    if (typeof value === 'string') return this.redact(value) as T;
    if (value === null || typeof value !== 'object' || depth > 12) return value;
    if (seen.has(value)) return value;
    seen.add(value);
    if (value instanceof Error) {
      const copy = new Error(this.redact(value.message));
      copy.name = value.name;
      copy.stack = value.stack ? this.redact(value.stack) : '';
      return copy as T;
    }
    if (Array.isArray(value)) return value.map((v: unknown) => this.redactDeep(v, seen, depth + 1)) as T;
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null) return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = this.redactDeep(v, seen, depth + 1);
    return out as T;
  }
}

function collectStrings(value: unknown, into: string[], depth: number): void {
  if (typeof value === 'string') into.push(value);
  else if (depth > 12 || value === null || typeof value !== 'object') return;
  else if (Array.isArray(value)) for (const item of value) collectStrings(item, into, depth + 1);
  else if (value instanceof Error) into.push(value.message, value.stack ?? '');
  else for (const key in value) collectStrings((value as Record<string, unknown>)[key], into, depth + 1);
}

