import { OutcomeMap, type TestCaseOutcome } from './types.ts';

const FILE_NAME = /\.(?:[cm]?js|[cm]?ts|jsx|tsx)$/;

export function looksLikeTap(text: string): boolean {
  return /^TAP version \d+/m.test(text) || /^\s*(?:not )?ok \d+(?: - | |$)/m.test(text);
}

/**
 * TAP: `node --test` (its TAP reporter, the default without a TTY before node 23), tape, prove,
 * node-tap. Subtests (TAP 14 indentation under `# Subtest: name`) are named `parent > child`;
 * a suite's own line (node's `type: 'suite'`) is not a test; `# SKIP` and `# TODO` are skipped.
 */
export function parseTap(text: string): OutcomeMap {
  const map = new OutcomeMap();
  const lines = text.split('\n');
  // node 18 wraps each file's tests in a subtest named by the file's path: that level is dropped.
  const fileWrapped = lines.some((l) => /^# Subtest: /.test(l) && FILE_NAME.test(l.slice(11).trim())) && lines.some((l) => l.startsWith('    # Subtest: '));
  const stack: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const sub = /^(\s*)# Subtest: (.*)$/.exec(line);
    if (sub) {
      const depth = Math.floor(sub[1]!.length / 4);
      stack.length = depth;
      stack[depth] = sub[2]!;
      continue;
    }
    const res = /^(\s*)(not ok|ok) (\d+)(?: -)?(?: ([^#].*?))?(?:\s*#\s*(SKIP|TODO)\b.*)?$/i.exec(line);
    if (!res) continue;
    const depth = Math.floor(res[1]!.length / 4);
    if (isSuite(lines, i, res[1]!.length)) continue;
    const own = (res[4] ?? '').replace(/\\#/g, '#').trim() || `#${res[3]}`;
    const names = [...stack.slice(0, depth), own];
    if (fileWrapped) {
      if (names.length === 1 && FILE_NAME.test(names[0]!)) continue;
      if (names.length > 1 && FILE_NAME.test(names[0]!)) names.shift();
    }
    const directive = res[5]?.toUpperCase();
    const outcome: TestCaseOutcome = directive ? 'skipped' : res[2]!.toLowerCase() === 'ok' ? 'passed' : 'failed';
    map.record(names.join(' > '), outcome);
  }
  return map;
}

// node's TAP puts a YAML block under each result; a describe() block says `type: 'suite'` there.
function isSuite(lines: string[], at: number, indent: number): boolean {
  if (!/^\s*---\s*$/.test(lines[at + 1] ?? '')) return false;
  for (let j = at + 2; j < lines.length && j < at + 40; j++) {
    const l = lines[j]!;
    if (/^\s*\.\.\.\s*$/.test(l)) return false;
    if (l.slice(0, indent + 2).trim() === '' && /^\s*type: '?suite'?\s*$/.test(l)) return true;
  }
  return false;
}

/** The spec reporter of `node --test` (node 20+ on a TTY, every node from 23): ✔/✖/﹣ lines under ▶ suites. */
export function parseNodeSpec(text: string): OutcomeMap {
  const map = new OutcomeMap();
  const stack: string[] = [];
  for (const line of text.split('\n')) {
    // The reporter repeats failures at the end without their suites: the first listing is enough.
    if (/^✖ failing tests:/.test(line)) break;
    // "﹣ name (0.1ms) # reason" for a skip, "✔ name (0.1ms) # TODO" for a todo that passed. A test's
    // line always ends with its duration (node 18 to 23); a linter's "✖  12:3  message" never does.
    const m = /^(\s*)(✔|✖|﹣)\s+(.*?)\s+\([\d.]+m?s\)(?:\s+#\s*(.*))?$/.exec(line) ?? /^(\s*)(▶)\s+(.*?)(?:\s+\([\d.]+m?s\))?()$/.exec(line);
    if (!m) continue;
    const depth = Math.floor(m[1]!.length / 2);
    if (m[2] === '▶') {
      stack.length = depth;
      stack[depth] = m[3]!;
      continue;
    }
    stack.length = depth;
    const name = [...stack, m[3]!].join(' > ');
    const directive = /^(SKIP|TODO)\b/.test(m[4] ?? '');
    map.record(name, m[2] === '﹣' || directive ? 'skipped' : m[2] === '✔' ? 'passed' : 'failed');
  }
  return map;
}
