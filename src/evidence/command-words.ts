import { shellQuote } from '../test-results/index.ts';

/**
 * The words of a simple shell command, with where each stands in the text, so that a test command
 * can be extended without re-quoting what the repository wrote. A command with anything but words
 * (a list, a pipe, a redirection, a subshell, a command substitution, a comment, several lines) is
 * refused: where arguments would land in it cannot be known.
 */
export interface Word {
  /** The word as the shell passes it on (quotes removed, escapes applied; `$VAR` kept as written). */
  value: string;
  start: number;
  end: number;
}

export function commandWords(command: string): Word[] | null {
  const words: Word[] = [];
  let i = 0;
  while (i < command.length) {
    if (/[ \t]/.test(command[i]!)) {
      i++;
      continue;
    }
    const start = i;
    let value = '';
    for (; i < command.length && !/[ \t]/.test(command[i]!); i++) {
      const c = command[i]!;
      if (c === "'") {
        const close = command.indexOf("'", i + 1);
        if (close < 0) return null;
        value += command.slice(i + 1, close);
        i = close;
      } else if (c === '"') {
        const read = doubleQuoted(command, i);
        if (!read) return null;
        value += read.value;
        i = read.end;
      } else if (c === '\\') {
        if (i + 1 >= command.length || command[i + 1] === '\n') return null;
        value += command[++i];
      } else if (/[;&|<>()`\n\r]/.test(c) || (c === '$' && command[i + 1] === '(') || (c === '#' && i === start)) {
        return null;
      } else value += c;
    }
    words.push({ value, start, end: i });
  }
  return words;
}

function doubleQuoted(command: string, open: number): { value: string; end: number } | null {
  let value = '';
  for (let i = open + 1; i < command.length; i++) {
    const c = command[i]!;
    if (c === '"') return { value, end: i };
    if (c === '`' || (c === '$' && command[i + 1] === '(')) return null;
    if (c === '\\' && /["\\$`]/.test(command[i + 1] ?? '')) value += command[++i];
    else value += c;
  }
  return null;
}

/** Assignments before the command name (`PYTHONPATH=src pytest`). */
export function isAssignment(word: Word): boolean {
  return /^[A-Za-z_]\w*=/.test(word.value);
}

/** A test command taken apart, with the checked files and ids to restrict it to. */
export interface Selection {
  command: string;
  words: Word[];
  files: string[];
  ids: string[];
}

/** The first word whose value matches, or -1. */
export function wordIndex(words: Word[], re: RegExp, from = 0): number {
  for (let i = from; i < words.length; i++) if (re.test(words[i]!.value)) return i;
  return -1;
}

/** The command with words appended, each quoted for the shell. */
export function append(command: string, args: string[]): string {
  return `${command} ${args.map(shellQuote).join(' ')}`;
}
