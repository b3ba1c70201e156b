import { OutcomeMap, type TestCaseOutcome } from './types.ts';

const MARK: Record<string, TestCaseOutcome> = { '✓': 'passed', '√': 'passed', '✕': 'failed', '×': 'failed', '○': 'skipped', '✎': 'skipped' };

/**
 * Jest's default reporter with `--verbose` (it prints the tree for a single file without it too):
 * `PASS|FAIL <file>` headers, describe() names indented two spaces a level, ✓/✕/○/✎ lines.
 * Ids are `file::describe > test`; a file whose suite failed to run is `file` with `error`.
 */
export function parseJest(text: string): OutcomeMap {
  const map = new OutcomeMap();
  let file: string | null = null;
  let details = false;
  const stack: string[] = [];
  for (const line of text.split('\n')) {
    const head = /^(PASS|FAIL) (\S+)/.exec(line);
    if (head) {
      file = head[2]!.replace(/^\.\//, '');
      details = false;
      stack.length = 0;
      continue;
    }
    if (file === null) continue;
    if (/^(Test Suites|Tests):/.test(line)) {
      file = null;
      continue;
    }
    if (/^\s+● Test suite failed to run/.test(line)) {
      map.record(file, 'error');
      continue;
    }
    // The failure details ("  ● suite › test") follow the tree: nothing in them is a result.
    if (/^\s+● /.test(line)) details = true;
    if (details) continue;
    const m = /^(\s+)(✓|√|✕|×|○|✎) (?:(skipped|todo) )?(.*?)(?: \(\d+(?:\.\d+)? m?s\))?$/.exec(line);
    if (m) {
      const depth = m[1]!.length / 2 - 1;
      stack.length = Math.max(0, depth);
      map.record(`${file}::${[...stack, m[4]!].join(' > ')}`, MARK[m[2]!]!);
      continue;
    }
    const suite = /^(\s+)(\S.*)$/.exec(line);
    if (suite && suite[1]!.length % 2 === 0) {
      const depth = suite[1]!.length / 2 - 1;
      stack.length = depth;
      stack[depth] = suite[2]!;
    }
  }
  return map;
}
