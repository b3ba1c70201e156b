import { OutcomeMap, type TestCaseOutcome } from './types.ts';

export function looksLikeCargo(text: string): boolean {
  return /^test result: (ok|FAILED)\. \d+ passed/m.test(text) || /^test \S.* \.\.\. (ok|FAILED|ignored)/m.test(text);
}

/**
 * `cargo test` (libtest's pretty format). Ids are `target::path::test`, the target being the
 * source file of the test binary (`src/lib.rs`, `tests/api.rs`) or `doc` for doctests, because
 * integration test files often reuse names. A binary that did not compile is `target` with `error`.
 */
export function parseCargo(text: string): OutcomeMap {
  const map = new OutcomeMap();
  let target = '';
  for (const line of text.split('\n')) {
    // "     Running unittests src/lib.rs (target/debug/deps/x-1234)", "     Running tests/api.rs (target/...)"
    const run = /^\s+Running (?:unittests )?(\S+)(?: \(|$)/.exec(line);
    if (run) {
      target = run[1]!;
      continue;
    }
    if (/^\s+Doc-tests \S+/.test(line)) {
      target = 'doc';
      continue;
    }
    const t = /^test (.+?) \.\.\. (ok|FAILED|ignored(?:, .*)?)$/.exec(line);
    if (t) {
      const outcome: TestCaseOutcome = t[2] === 'ok' ? 'passed' : t[2] === 'FAILED' ? 'failed' : 'skipped';
      map.record(target ? `${target}::${t[1]}` : t[1]!, outcome);
      continue;
    }
    // "error: could not compile `x` (test "api") due to 2 previous errors"
    const broken = /^error: could not compile `([^`]+)`(?: \((lib test|test "([^"]+)"|bin "[^"]+" test)\))?/.exec(line);
    if (broken) map.record(broken[3] ? `tests/${broken[3]}.rs` : broken[1]!, 'error');
  }
  return map;
}
