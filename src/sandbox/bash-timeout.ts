/**
 * Where the Bash tool's timeout is decided: the seconds the toolbox enforces for one call and how
 * long the host waits for the toolbox to answer it. The toolbox (toolbox.py) applies no rule of its
 * own; it runs the command for exactly the seconds it is handed.
 *
 * The rules are the Leaf reference's (docs: leaf-interface.md, "Bash"), which is Python: `timeout`
 * in seconds through Python's float(), default 120, a value above 1000 read as milliseconds, an extra
 * `timeout_ms` winning, NaN meaning the default, at least 0.1. Lilypad adds a cap
 * (LILYPAD_BASH_TIMEOUT_CAP_SECONDS) and cuts the cap to the run's remaining wall-clock budget.
 * The model sees the result only as `Timed out after <t>s`, so every rule is computed here exactly
 * as the reference computes it, down to which inputs Python's float() accepts.
 */

const DEFAULT_SECONDS = 120;
const MIN_SECONDS = 0.1;
const MILLISECONDS_ABOVE = 1000;

export interface BashTimeout {
  /** The seconds the toolbox enforces (`Timed out after <t>s` shows them to one decimal). */
  seconds: number;
  /** True when the model asked for more than the cap allowed. */
  capped: boolean;
  /** How long the host waits for the toolbox's answer before it treats the toolbox as wedged. */
  deadlineMs: number;
}

/**
 * The reference raised instead of running the command: Python's float() of an integer too large
 * for a double. The model saw this text as the call's observation (after the command check).
 */
export interface BashTimeoutError {
  error: string;
  deadlineMs: number;
}

export interface BashLimits {
  /** The most a call may run, in seconds (already cut to the budget: see callCapSeconds). */
  capSeconds: number;
  /** Added to the call's own timeout to make the host's deadline for it. */
  marginMs: number;
}

/**
 * The cap one Bash call runs under: the configured cap, cut to the run's remaining wall-clock
 * budget rounded up, never below one second (a call still gets to run and report its timeout).
 */
export function callCapSeconds(configuredCapSeconds: number, remainingSeconds: number): number {
  return Math.max(1, Math.min(configuredCapSeconds, Math.ceil(remainingSeconds)));
}

/** The timeout and host deadline of one Bash call whose raw arguments are `rawArguments`. */
export function bashTimeout(rawArguments: string, limits: BashLimits): BashTimeout | BashTimeoutError {
  if (!(limits.capSeconds > 0) || !Number.isFinite(limits.capSeconds)) {
    throw new RangeError(`the Bash timeout cap must be a positive number of seconds, not ${limits.capSeconds}`);
  }
  const args = argumentsAsPythonSees(rawArguments);
  let seconds = DEFAULT_SECONDS;
  const timeout = pythonFloat(args['timeout']);
  if (timeout.kind === 'overflow') return { error: OVERFLOW, deadlineMs: limits.marginMs };
  if (timeout.kind === 'number') seconds = timeout.value > MILLISECONDS_ABOVE ? timeout.value / 1000 : timeout.value;
  const timeoutMs = pythonFloat(args['timeout_ms']);
  if (timeoutMs.kind === 'overflow') return { error: OVERFLOW, deadlineMs: limits.marginMs };
  if (timeoutMs.kind === 'number') seconds = timeoutMs.value / 1000;
  if (Number.isNaN(seconds)) seconds = DEFAULT_SECONDS;
  seconds = Math.max(MIN_SECONDS, seconds);
  const capped = seconds > limits.capSeconds;
  if (capped) seconds = limits.capSeconds;
  return { seconds, capped, deadlineMs: seconds * 1000 + limits.marginMs };
}

const OVERFLOW = 'OverflowError: int too large to convert to float';

// ------------------------------------------------------------------ the arguments as Python reads them

/** A JSON number Python read as an int (float() of it can overflow) rather than a float. */
class PyInt {
  constructor(readonly value: number) {}
}

/**
 * The tool arguments as the reference's json.loads gives them, for the two timeout fields: an
 * object, or {} for anything else. JSON.parse agrees with Python on every document both accept;
 * Python also accepts NaN, Infinity and -Infinity, and an integer literal beyond a double's range
 * is an int to Python (float() of it raises) where JSON.parse makes it Infinity. Those documents
 * go through the Python-compatible reader below.
 */
function argumentsAsPythonSees(raw: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return readPythonJson(raw);
  }
  if (!isObject(value)) return {};
  const infinite = (v: unknown) => typeof v === 'number' && !Number.isFinite(v);
  return infinite(value['timeout']) || infinite(value['timeout_ms']) ? readPythonJson(raw) : value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readPythonJson(raw: string): Record<string, unknown> {
  try {
    const reader = new PythonJsonReader(raw);
    const value = reader.document();
    return isObject(value) ? value : {};
  } catch {
    return {};
  }
}

/** json.loads as CPython's scanner reads a document (only used where JSON.parse cannot answer). */
class PythonJsonReader {
  private at = 0;

  constructor(private readonly text: string) {}

  document(): unknown {
    this.space();
    const value = this.value();
    this.space();
    if (this.at !== this.text.length) throw new SyntaxError('extra data');
    return value;
  }

  private space(): void {
    while (this.at < this.text.length && ' \t\n\r'.includes(this.text[this.at]!)) this.at++;
  }

  private take(word: string): boolean {
    if (!this.text.startsWith(word, this.at)) return false;
    this.at += word.length;
    return true;
  }

  private value(): unknown {
    const c = this.text[this.at];
    if (c === '"') return this.string();
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (this.take('null')) return null;
    if (this.take('true')) return true;
    if (this.take('false')) return false;
    if (this.take('NaN')) return NaN;
    if (this.take('Infinity')) return Infinity;
    if (this.take('-Infinity')) return -Infinity;
    return this.number();
  }

  private number(): number | PyInt {
    const m = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
    m.lastIndex = this.at;
    const found = m.exec(this.text);
    if (!found) throw new SyntaxError('expecting value');
    this.at += found[0].length;
    const value = Number(found[0]);
    return found[1] === undefined && found[2] === undefined ? new PyInt(value) : value;
  }

  private string(): string {
    this.at++;
    let out = '';
    for (;;) {
      const c = this.text[this.at++];
      if (c === undefined) throw new SyntaxError('unterminated string');
      if (c === '"') return out;
      if (c < ' ') throw new SyntaxError('invalid control character');
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = this.text[this.at++];
      const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e !== undefined && e in simple) out += simple[e];
      else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(this.text.slice(this.at, this.at + 4))) {
        out += String.fromCharCode(parseInt(this.text.slice(this.at, this.at + 4), 16));
        this.at += 4;
      } else throw new SyntaxError('invalid escape');
    }
  }

  private object(): Record<string, unknown> {
    this.at++;
    const out: Record<string, unknown> = {};
    this.space();
    if (this.take('}')) return out;
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') throw new SyntaxError('expecting property name');
      const key = this.string();
      this.space();
      if (!this.take(':')) throw new SyntaxError("expecting ':'");
      this.space();
      Object.defineProperty(out, key, { value: this.value(), enumerable: true, writable: true, configurable: true });
      this.space();
      if (this.take('}')) return out;
      if (!this.take(',')) throw new SyntaxError("expecting ','");
    }
  }

  private array(): unknown[] {
    this.at++;
    const out: unknown[] = [];
    this.space();
    if (this.take(']')) return out;
    for (;;) {
      this.space();
      out.push(this.value());
      this.space();
      if (this.take(']')) return out;
      if (!this.take(',')) throw new SyntaxError("expecting ','");
    }
  }
}

// ------------------------------------------------------------------ Python's float()

type PyFloat = { kind: 'absent' } | { kind: 'number'; value: number } | { kind: 'rejected' } | { kind: 'overflow' };

/**
 * float(value) as the reference applies it: None and booleans are skipped (absent), a TypeError or
 * ValueError is `rejected` (the reference then keeps its default), an int beyond a double raises
 * OverflowError, which the reference did not catch.
 */
function pythonFloat(value: unknown): PyFloat {
  if (value === undefined || value === null || typeof value === 'boolean') return { kind: 'absent' };
  if (value instanceof PyInt) return Number.isFinite(value.value) ? { kind: 'number', value: value.value } : { kind: 'overflow' };
  if (typeof value === 'number') return { kind: 'number', value };
  if (typeof value === 'string') {
    const parsed = pythonFloatOfString(value);
    return parsed === undefined ? { kind: 'rejected' } : { kind: 'number', value: parsed };
  }
  return { kind: 'rejected' };
}

// str.isspace() outside ASCII: float() reads these as spaces.
const UNICODE_SPACE = /[\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;
const DECIMAL_DIGIT = /\p{Nd}/u;
const FLOAT_TEXT = /^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)$/i;

/**
 * CPython's float(str): decimal digits of any script read as ASCII digits and Unicode spaces as
 * spaces, single underscores allowed between digits, surrounding ASCII whitespace ignored, then a
 * decimal number, inf, infinity or nan (any case, optional sign). No hex, no empty string.
 */
function pythonFloatOfString(text: string): number | undefined {
  let ascii = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (cp < 127) ascii += ch;
    else if (UNICODE_SPACE.test(ch)) ascii += ' ';
    else if (DECIMAL_DIGIT.test(ch)) ascii += String(decimalDigitValue(cp));
    else return undefined;
  }
  if (ascii.includes('_')) {
    if (!/^(?:[^_]|(?<=[0-9])_(?=[0-9]))*$/.test(ascii)) return undefined;
    ascii = ascii.replaceAll('_', '');
  }
  const trimmed = ascii.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, '');
  if (!FLOAT_TEXT.test(trimmed)) return undefined;
  const negative = trimmed.startsWith('-');
  const body = trimmed.replace(/^[+-]/, '').toLowerCase();
  const magnitude = body === 'inf' || body === 'infinity' ? Infinity : body === 'nan' ? NaN : Number(body);
  return negative ? -magnitude : magnitude;
}

/**
 * The value of a Unicode decimal digit: Unicode encodes each script's digits as a run of ten from
 * zero to nine, and adjacent runs (the mathematical digits) start on a zero, so the distance from
 * the start of the run modulo ten is the digit.
 */
function decimalDigitValue(cp: number): number {
  let start = cp;
  while (start > 0 && DECIMAL_DIGIT.test(String.fromCodePoint(start - 1))) start--;
  return (cp - start) % 10;
}

/**
 * The first line of a timed-out call's observation, `Timed out after <t>s`, with t formatted as
 * Python's `f"{t:.1f}"` does (the toolbox's own line): halfway cases round to even there, where
 * JavaScript's toFixed rounds them up (1.25 reads 1.2, not 1.3).
 */
export function timedOutLine(seconds: number): string {
  // A double lies exactly halfway between two tenths only at an odd number of quarters (x.25, x.75);
  // multiplying by 4 or 2 is exact, so this test is too. Elsewhere toFixed rounds the exact value.
  const halfway = Number.isInteger(seconds * 4) && !Number.isInteger(seconds * 2);
  const floor = Math.floor(seconds * 10);
  const text = halfway ? ((floor % 2 === 0 ? floor : floor + 1) / 10).toFixed(1) : seconds.toFixed(1);
  return `Timed out after ${text}s`;
}
