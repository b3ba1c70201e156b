/**
 * Enough TOML for pyproject.toml and Cargo.toml: tables, arrays of tables, dotted and quoted keys,
 * strings (basic, literal, multi-line), numbers, booleans, arrays and inline tables. A line it
 * cannot read is skipped (inference is best effort; nothing here runs what it reads).
 */
export type TomlValue = string | number | boolean | TomlValue[] | TomlTable;
export interface TomlTable {
  [key: string]: TomlValue;
}

export function parseToml(text: string): TomlTable {
  const root: TomlTable = {};
  let current = root;
  const src = text.replace(/\r\n?/g, '\n');
  let i = 0;
  const peek = () => src[i];
  const skipSpace = () => {
    while (i < src.length && (src[i] === ' ' || src[i] === '\t')) i++;
  };
  const skipBlank = () => {
    for (;;) {
      while (i < src.length && /\s/.test(src[i]!)) i++;
      if (src[i] === '#') while (i < src.length && src[i] !== '\n') i++;
      else return;
    }
  };
  const toLineEnd = () => {
    while (i < src.length && src[i] !== '\n') i++;
  };

  const readString = (): string => {
    const q = src[i]!;
    if (src.startsWith(q.repeat(3), i)) {
      i += 3;
      if (src[i] === '\n') i++;
      const end = src.indexOf(q.repeat(3), i);
      const raw = src.slice(i, end < 0 ? src.length : end);
      i = end < 0 ? src.length : end + 3;
      return q === '"' ? unescape(raw) : raw;
    }
    i++;
    let out = '';
    while (i < src.length && src[i] !== q && src[i] !== '\n') {
      if (q === '"' && src[i] === '\\') {
        out += src.slice(i, i + 2);
        i += 2;
      } else out += src[i++];
    }
    i++;
    return q === '"' ? unescape(out) : out;
  };

  const readKey = (): string[] => {
    const parts: string[] = [];
    for (;;) {
      skipSpace();
      if (peek() === '"' || peek() === "'") parts.push(readString());
      else {
        const m = /^[A-Za-z0-9_-]+/.exec(src.slice(i, i + 200));
        if (!m) throw new Error('bad key');
        parts.push(m[0]);
        i += m[0].length;
      }
      skipSpace();
      if (peek() === '.') i++;
      else return parts;
    }
  };

  const readValue = (): TomlValue => {
    skipSpace();
    const c = peek();
    if (c === '"' || c === "'") return readString();
    if (c === '[') {
      i++;
      const arr: TomlValue[] = [];
      for (;;) {
        skipBlank();
        if (peek() === ']') {
          i++;
          return arr;
        }
        arr.push(readValue());
        skipBlank();
        if (peek() === ',') i++;
        else if (peek() !== ']') throw new Error('bad array');
      }
    }
    if (c === '{') {
      i++;
      const table: TomlTable = {};
      for (;;) {
        skipSpace();
        if (peek() === '}') {
          i++;
          return table;
        }
        const key = readKey();
        skipSpace();
        if (peek() !== '=') throw new Error('bad inline table');
        i++;
        setPath(table, key, readValue());
        skipSpace();
        if (peek() === ',') i++;
      }
    }
    const m = /^[^\s,\]}#]+/.exec(src.slice(i, i + 200));
    if (!m) throw new Error('bad value');
    i += m[0].length;
    if (m[0] === 'true' || m[0] === 'false') return m[0] === 'true';
    const n = Number(m[0].replace(/_/g, ''));
    return Number.isNaN(n) ? m[0] : n;
  };

  while (i < src.length) {
    skipBlank();
    if (i >= src.length) break;
    const lineStart = i;
    try {
      if (peek() === '[') {
        const array = src[i + 1] === '[';
        i += array ? 2 : 1;
        const key = readKey();
        i += array ? 2 : 1;
        toLineEnd();
        if (array) {
          const parent = tableAt(root, key.slice(0, -1));
          const last = key[key.length - 1]!;
          const list = Array.isArray(parent[last]) ? (parent[last] as TomlValue[]) : (parent[last] = []);
          const table: TomlTable = {};
          list.push(table);
          current = table;
        } else current = tableAt(root, key);
        continue;
      }
      const key = readKey();
      skipSpace();
      if (peek() !== '=') throw new Error('expected =');
      i++;
      setPath(current, key, readValue());
      skipSpace();
      if (peek() === '#') toLineEnd();
    } catch {
      i = lineStart;
      toLineEnd();
    }
  }
  return root;
}

function unescape(s: string): string {
  return s.replace(/\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)/gs, (_, e: string) => {
    if (e[0] === 'u' || e[0] === 'U') return String.fromCodePoint(parseInt(e.slice(1), 16));
    return ({ n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\', b: '\b', f: '\f' } as Record<string, string>)[e] ?? (e === '\n' ? '' : e);
  });
}

function tableAt(root: TomlTable, key: string[]): TomlTable {
  let t = root;
  for (const k of key) {
    let next = t[k];
    if (Array.isArray(next)) next = next[next.length - 1];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) {
      next = {};
      t[k] = next;
    }
    t = next as TomlTable;
  }
  return t;
}

function setPath(table: TomlTable, key: string[], value: TomlValue): void {
  tableAt(table, key.slice(0, -1))[key[key.length - 1]!] = value;
}

/** The table at a dotted path, or undefined. */
export function tomlTable(root: TomlTable, ...key: string[]): TomlTable | undefined {
  let t: TomlValue | undefined = root;
  for (const k of key) {
    if (typeof t !== 'object' || t === null || Array.isArray(t)) return undefined;
    t = t[k];
  }
  return typeof t === 'object' && t !== null && !Array.isArray(t) ? t : undefined;
}

export const stringsOf = (v: TomlValue | undefined): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
