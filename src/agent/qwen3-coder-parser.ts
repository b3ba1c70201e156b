/**
 * Client-side parser for the qwen3_coder tool-call text format.
 *
 * A correctly configured model server (SGLang `--tool-call-parser qwen3_coder`, vLLM
 * `--enable-auto-tool-choice --tool-call-parser qwen3_coder`) turns this text into `tool_calls`.
 * A misconfigured one leaves it in the assistant `content` (see docs/serving.md, "A misconfigured
 * server looks like a bad model"). This module rescues such turns:
 *
 *     <tool_call>
 *     <function=Edit>
 *     <parameter=file_path>
 *     src/app.py
 *     </parameter>
 *     </function>
 *     </tool_call>
 *
 * Only calls to declared tools are returned; other names are reported in `rejected`.
 *
 * The scanner works with `indexOf` only (no backtracking regexes) and caches the next position of
 * each marker, so a whole message is scanned in linear time whatever its shape.
 *
 * Known limitation, shared with every known server parser: values are raw text with no escaping,
 * so a literal `</parameter>` (or `<parameter=`, or `</function>`) inside a value cuts the value
 * short at that point.
 */

interface ToolParameterSchema {
  type?: string | string[];
  [k: string]: unknown;
}

export interface DeclaredTool {
  name: string;
  parameters: { properties?: Record<string, ToolParameterSchema> };
}

interface RescuedCall {
  name: string;
  /** A JSON object string, e.g. '{"file_path":"a.py"}'. */
  arguments: string;
}

export interface RescueResult {
  /** The text before the first call block (trailing whitespace trimmed), '' if there is none. */
  content: string;
  /** Calls whose function name is one of the declared tools, in order of appearance. */
  calls: RescuedCall[];
  /** Names of functions that appeared but are not declared (one entry per occurrence). */
  rejected: string[];
}

type JsonValue = string | number | boolean | null | JsonValue[] | { [k: string]: JsonValue };
type JsonObject = { [k: string]: JsonValue };

const TOOL_CALL_START = '<tool_call>';
const TOOL_CALL_END = '</tool_call>';
const FUNCTION_START = '<function=';
const FUNCTION_END = '</function>';
const PARAMETER_START = '<parameter=';
const PARAMETER_END = '</parameter>';

const MARKERS = [
  TOOL_CALL_START,
  TOOL_CALL_END,
  FUNCTION_START,
  FUNCTION_END,
  PARAMETER_START,
  PARAMETER_END,
] as const;
type Marker = (typeof MARKERS)[number];

/** True when the text carries qwen3_coder tool-call markup (a red flag in `content`/reasoning). */
export function hasToolCallMarkup(text: string | null | undefined): boolean {
  if (typeof text !== 'string' || text.length === 0) return false;
  return (
    text.includes(TOOL_CALL_START) || text.includes(FUNCTION_START) || text.includes(PARAMETER_END)
  );
}

/**
 * Finds markers with `indexOf`, remembering the next occurrence of each marker. Positions only
 * move forward, so every marker is searched through the text at most once overall.
 */
class MarkerScanner {
  private readonly cache = new Map<Marker, number>();

  constructor(private readonly text: string) {}

  /** Index of the next `marker` at or after `from`, or -1. */
  next(marker: Marker, from: number): number {
    const cached = this.cache.get(marker);
    if (cached !== undefined && (cached === -1 || cached >= from)) {
      // -1 stays valid: the marker does not occur after an earlier (smaller) `from` either.
      return cached;
    }
    const found = this.text.indexOf(marker, from);
    this.cache.set(marker, found);
    return found;
  }

  /** The earliest occurrence at or after `from` among `markers`, or null. */
  earliest(markers: readonly Marker[], from: number): { marker: Marker; index: number } | null {
    let best: { marker: Marker; index: number } | null = null;
    for (const marker of markers) {
      const index = this.next(marker, from);
      if (index !== -1 && (best === null || index < best.index)) best = { marker, index };
    }
    return best;
  }
}

/** Markers that end a parameter value which is closed properly or by the next parameter. */
const VALUE_END_MARKERS: readonly Marker[] = [PARAMETER_END, PARAMETER_START, FUNCTION_END];
/** Markers that also end a value which was never closed (`</parameter>` comes later or never). */
const UNCLOSED_VALUE_END_MARKERS: readonly Marker[] = [
  FUNCTION_START,
  TOOL_CALL_START,
  TOOL_CALL_END,
];
/** Markers looked for between the parameters of one function. */
const BODY_MARKERS: readonly Marker[] = [
  PARAMETER_START,
  FUNCTION_END,
  FUNCTION_START,
  TOOL_CALL_START,
  TOOL_CALL_END,
];

interface RawCall {
  name: string;
  params: Array<{ name: string; value: string }>;
}

/** Exactly one leading and one trailing newline around a value belong to the format. */
function stripFormatNewlines(value: string): string {
  let start = 0;
  let end = value.length;
  if (end > start && value.charCodeAt(start) === 10) start += 1;
  if (end > start && value.charCodeAt(end - 1) === 10) end -= 1;
  return value.slice(start, end);
}

/** Scans every `<function=...>` block from `start` on and returns its raw name and parameters. */
function scanCalls(text: string, start: number): RawCall[] {
  const scanner = new MarkerScanner(text);
  const calls: RawCall[] = [];
  let pos = start;

  for (;;) {
    const fnStart = scanner.next(FUNCTION_START, pos);
    if (fnStart === -1) break;
    const nameStart = fnStart + FUNCTION_START.length;
    const nameEnd = text.indexOf('>', nameStart);
    // A name cut off by the end of the text (no '>') cannot be trusted: stop.
    if (nameEnd === -1) break;
    const call: RawCall = { name: text.slice(nameStart, nameEnd).trim(), params: [] };
    calls.push(call);
    pos = nameEnd + 1;

    // Parameters, until `</function>`, the start of another call, or the end of the text
    // (a truncated call keeps the parameters seen so far).
    for (;;) {
      const hit = scanner.earliest(BODY_MARKERS, pos);
      if (hit === null) {
        pos = text.length;
        break;
      }
      if (hit.marker === FUNCTION_END) {
        pos = hit.index + FUNCTION_END.length;
        break;
      }
      if (hit.marker !== PARAMETER_START) {
        // `</function>` is missing: the next call (or block boundary) ends this one.
        pos = hit.index;
        break;
      }
      const pNameStart = hit.index + PARAMETER_START.length;
      const pNameEnd = text.indexOf('>', pNameStart);
      if (pNameEnd === -1) {
        // Parameter name truncated at the end of the text: drop it.
        pos = text.length;
        break;
      }
      const paramName = text.slice(pNameStart, pNameEnd).trim();
      const valueStart = pNameEnd + 1;

      let valueEnd = text.length;
      let nextPos = text.length;
      const end = scanner.earliest(VALUE_END_MARKERS, valueStart);
      if (end !== null && end.marker === PARAMETER_END) {
        valueEnd = end.index;
        nextPos = end.index + PARAMETER_END.length;
      } else {
        // No `</parameter>` before the next structural marker: the value ends at whichever
        // marker comes first, including the start of another call or block.
        const unclosed = scanner.earliest(UNCLOSED_VALUE_END_MARKERS, valueStart);
        const candidates = [end?.index ?? -1, unclosed?.index ?? -1].filter((i) => i !== -1);
        if (candidates.length > 0) valueEnd = Math.min(...candidates);
        nextPos = valueEnd;
      }
      call.params.push({ name: paramName, value: stripFormatNewlines(text.slice(valueStart, valueEnd)) });
      pos = nextPos;
    }
  }
  return calls;
}

// ---------------------------------------------------------------------------------------------
// Typing values from the declared JSON schema
// ---------------------------------------------------------------------------------------------

type Kind = 'string' | 'integer' | 'number' | 'boolean' | 'object' | 'array' | 'null';

const KIND_ALIASES: Readonly<Record<string, Kind>> = {
  string: 'string',
  str: 'string',
  text: 'string',
  integer: 'integer',
  int: 'integer',
  number: 'number',
  float: 'number',
  double: 'number',
  boolean: 'boolean',
  bool: 'boolean',
  object: 'object',
  dict: 'object',
  array: 'array',
  list: 'array',
  null: 'null',
};

/** Declared types in order of preference; unknown type names count as string. */
function declaredKinds(schema: ToolParameterSchema | undefined): Kind[] {
  if (schema === undefined) return ['string'];
  const raw = schema.type;
  const names = typeof raw === 'string' ? [raw] : Array.isArray(raw) ? raw : [];
  const kinds: Kind[] = [];
  for (const name of names) {
    if (typeof name !== 'string') continue;
    const key = name.trim().toLowerCase();
    kinds.push(Object.hasOwn(KIND_ALIASES, key) ? (KIND_ALIASES[key] ?? 'string') : 'string');
  }
  return kinds.length > 0 ? kinds : ['string'];
}

type Converted = { ok: true; value: JsonValue } | { ok: false };
const FAILED: Converted = { ok: false };

const INTEGER_RE = /^[+-]?\d+$/;
const NUMBER_RE = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

function convertAs(kind: Kind, raw: string): Converted {
  const trimmed = raw.trim();
  switch (kind) {
    case 'string':
      return { ok: true, value: raw };
    case 'null':
      return trimmed === 'null' ? { ok: true, value: null } : FAILED;
    case 'integer': {
      if (!INTEGER_RE.test(trimmed)) return FAILED;
      const n = Number(trimmed);
      // Beyond 2^53 the JSON number would silently change: keep the raw string.
      return Number.isSafeInteger(n) ? { ok: true, value: n } : FAILED;
    }
    case 'number': {
      if (!NUMBER_RE.test(trimmed)) return FAILED;
      const n = Number(trimmed);
      return Number.isFinite(n) ? { ok: true, value: n } : FAILED;
    }
    case 'boolean': {
      const lower = trimmed.toLowerCase();
      if (lower === 'true') return { ok: true, value: true };
      if (lower === 'false') return { ok: true, value: false };
      return FAILED;
    }
    case 'object':
    case 'array': {
      if (trimmed === '') return FAILED;
      try {
        return { ok: true, value: JSON.parse(trimmed) as JsonValue };
      } catch {
        const py = parsePythonLiteral(trimmed);
        return py === undefined ? FAILED : { ok: true, value: py };
      }
    }
  }
}

function convertValue(raw: string, schema: ToolParameterSchema | undefined): JsonValue {
  const kinds = declaredKinds(schema);
  // A raw `null` is null unless a string type is declared without `null` being allowed.
  if (raw.trim() === 'null' && (kinds.includes('null') || !kinds.includes('string'))) return null;
  for (const kind of kinds) {
    if (kind === 'null') continue;
    const converted = convertAs(kind, raw);
    if (converted.ok) return converted.value;
  }
  return raw;
}

// ---------------------------------------------------------------------------------------------
// Python literals (what `ast.literal_eval` accepts for dicts, lists, tuples, str, numbers,
// True/False/None), converted to JSON values. Anything else gives undefined.
// ---------------------------------------------------------------------------------------------

const MAX_PY_DEPTH = 256;

function parsePythonLiteral(src: string): JsonValue | undefined {
  let i = 0;

  const skipWs = (): void => {
    while (i < src.length) {
      const c = src.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13) i += 1;
      else break;
    }
  };

  const parseString = (): string | undefined => {
    const quote = src[i];
    if (quote !== "'" && quote !== '"') return undefined;
    // Triple-quoted strings are not supported.
    if (src.startsWith(quote.repeat(3), i)) return undefined;
    i += 1;
    let out = '';
    let chunkStart = i;
    while (i < src.length) {
      const ch = src[i];
      if (ch === quote) {
        out += src.slice(chunkStart, i);
        i += 1;
        return out;
      }
      if (ch === '\n') return undefined;
      if (ch !== '\\') {
        i += 1;
        continue;
      }
      out += src.slice(chunkStart, i);
      const esc = src[i + 1];
      if (esc === undefined) return undefined;
      i += 2;
      switch (esc) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\x07'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case "'": out += "'"; break;
        case '"': out += '"'; break;
        case '\n': break; // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const len = esc === 'x' ? 2 : esc === 'u' ? 4 : 8;
          const hex = src.slice(i, i + len);
          if (hex.length !== len || !/^[0-9a-fA-F]+$/.test(hex)) return undefined;
          const code = parseInt(hex, 16);
          if (code > 0x10ffff) return undefined;
          out += String.fromCodePoint(code);
          i += len;
          break;
        }
        default:
          // Python keeps unknown escapes verbatim.
          out += '\\' + esc;
      }
      chunkStart = i;
    }
    return undefined;
  };

  const parseNumber = (): number | undefined => {
    const start = i;
    if (src[i] === '+' || src[i] === '-') i += 1;
    while (i < src.length && /[0-9.eE+\-]/.test(src[i] ?? '')) {
      // A sign is only part of the number right after an exponent marker.
      const ch = src[i];
      if ((ch === '+' || ch === '-') && !/[eE]/.test(src[i - 1] ?? '')) break;
      i += 1;
    }
    const token = src.slice(start, i);
    if (!NUMBER_RE.test(token)) return undefined;
    const n = Number(token);
    return Number.isFinite(n) ? n : undefined;
  };

  /** Called right after the opening bracket or after a comma; `items` holds what came before. */
  const parseSequence = (close: string, depth: number, items: JsonValue[] = []): JsonValue[] | undefined => {
    skipWs();
    if (src[i] === close) {
      i += 1;
      return items;
    }
    for (;;) {
      const item = parseValue(depth + 1);
      if (item === undefined) return undefined;
      items.push(item);
      skipWs();
      if (src[i] === ',') {
        i += 1;
        skipWs();
        if (src[i] === close) {
          i += 1;
          return items;
        }
        continue;
      }
      if (src[i] === close) {
        i += 1;
        return items;
      }
      return undefined;
    }
  };

  const keyString = (key: JsonValue): string | undefined => {
    if (typeof key === 'string') return key;
    if (typeof key === 'number' || typeof key === 'boolean' || key === null) return JSON.stringify(key);
    return undefined;
  };

  const parseDict = (depth: number): JsonObject | undefined => {
    const obj: JsonObject = Object.create(null) as JsonObject;
    skipWs();
    if (src[i] === '}') {
      i += 1;
      return obj;
    }
    for (;;) {
      const rawKey = parseValue(depth + 1);
      if (rawKey === undefined) return undefined;
      const key = keyString(rawKey);
      if (key === undefined) return undefined;
      skipWs();
      if (src[i] !== ':') return undefined;
      i += 1;
      const value = parseValue(depth + 1);
      if (value === undefined) return undefined;
      obj[key] = value;
      skipWs();
      if (src[i] === ',') {
        i += 1;
        skipWs();
        if (src[i] === '}') {
          i += 1;
          return obj;
        }
        continue;
      }
      if (src[i] === '}') {
        i += 1;
        return obj;
      }
      return undefined;
    }
  };

  const parseValue = (depth: number): JsonValue | undefined => {
    if (depth > MAX_PY_DEPTH) return undefined;
    skipWs();
    const ch = src[i];
    if (ch === undefined) return undefined;
    if (ch === '{') {
      i += 1;
      return parseDict(depth);
    }
    if (ch === '[') {
      i += 1;
      return parseSequence(']', depth);
    }
    if (ch === '(') {
      // Tuples become arrays; `(x)` without a comma is just `x`.
      i += 1;
      skipWs();
      if (src[i] === ')') {
        i += 1;
        return [];
      }
      const first = parseValue(depth + 1);
      if (first === undefined) return undefined;
      skipWs();
      if (src[i] === ')') {
        i += 1;
        return first;
      }
      if (src[i] !== ',') return undefined;
      i += 1;
      return parseSequence(')', depth, [first]);
    }
    if (ch === "'" || ch === '"') return parseString();
    for (const [word, value] of [
      ['True', true],
      ['False', false],
      ['None', null],
    ] as const) {
      if (src.startsWith(word, i) && !/[A-Za-z0-9_]/.test(src[i + word.length] ?? '')) {
        i += word.length;
        return value;
      }
    }
    if (/[0-9+\-.]/.test(ch)) return parseNumber();
    return undefined;
  };

  const value = parseValue(0);
  skipWs();
  return value !== undefined && i === src.length ? value : undefined;
}

// ---------------------------------------------------------------------------------------------
// Public entry point
// ---------------------------------------------------------------------------------------------

/**
 * Extracts qwen3_coder tool calls from text a server left in `content`. Calls to tools that are
 * not in `tools` are not returned; their names are listed in `rejected`. When the text holds no
 * `<function=` at all, nothing is rescued and `content` is the text unchanged.
 */
export function parseQwen3CoderToolCalls(text: string, tools: readonly DeclaredTool[]): RescueResult {
  const firstFunction = text.indexOf(FUNCTION_START);
  if (firstFunction === -1) return { content: text, calls: [], rejected: [] };

  const firstBlock = text.indexOf(TOOL_CALL_START);
  const contentEnd = firstBlock !== -1 && firstBlock < firstFunction ? firstBlock : firstFunction;
  const content = text.slice(0, contentEnd).trimEnd();

  const declared = new Map<string, DeclaredTool>();
  for (const tool of tools) if (!declared.has(tool.name)) declared.set(tool.name, tool);

  const calls: RescuedCall[] = [];
  const rejected: string[] = [];
  for (const raw of scanCalls(text, firstFunction)) {
    const tool = declared.get(raw.name);
    if (tool === undefined) {
      rejected.push(raw.name);
      continue;
    }
    const properties = tool.parameters.properties ?? {};
    const args: JsonObject = Object.create(null) as JsonObject;
    for (const param of raw.params) {
      const schema = Object.hasOwn(properties, param.name) ? properties[param.name] : undefined;
      args[param.name] = schema === undefined ? param.value : convertValue(param.value, schema);
    }
    calls.push({ name: raw.name, arguments: JSON.stringify(args) });
  }
  return { content, calls, rejected };
}
