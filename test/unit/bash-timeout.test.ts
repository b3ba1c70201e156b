import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bashTimeout, callCapSeconds, timedOutLine } from '../../src/sandbox/bash-timeout.ts';

// Every rule of the Bash timeout in docs/leaf-interface.md, Lilypad's cap and the run's budget.
// test/integration/bash-timeout-reference.test.ts holds the same function to the reference's
// Python on a few hundred argument strings.

const MARGIN = 30_000;
const decide = (args: string | Record<string, unknown>, cap = 1800) => bashTimeout(typeof args === 'string' ? args : JSON.stringify(args), { capSeconds: cap, marginMs: MARGIN });
const seconds = (args: string | Record<string, unknown>, cap = 1800): number => {
  const d = decide(args, cap);
  if ('error' in d) throw new Error(`expected seconds, got ${d.error}`);
  return d.seconds;
};

describe('the Bash timeout: the reference rules', () => {
  test('no timeout: 120 s', () => {
    assert.equal(seconds({ command: 'ls' }), 120);
  });

  test('timeout is in seconds, fractions kept', () => {
    assert.equal(seconds({ command: 'ls', timeout: 30 }), 30);
    assert.equal(seconds({ command: 'ls', timeout: 0.3 }), 0.3);
  });

  test('at least 0.1 s', () => {
    assert.equal(seconds({ command: 'ls', timeout: 0.01 }), 0.1);
    assert.equal(seconds({ command: 'ls', timeout: 0 }), 0.1);
    assert.equal(seconds({ command: 'ls', timeout: -5 }), 0.1);
  });

  test('a timeout above 1000 is read as milliseconds; 1000 itself is seconds', () => {
    assert.equal(seconds({ command: 'ls', timeout: 1500 }), 1.5);
    assert.equal(seconds({ command: 'ls', timeout: 1000 }), 1000);
    assert.equal(seconds({ command: 'ls', timeout: 1000.5 }), 1.0005);
  });

  test('timeout_ms wins over timeout, shorter or longer, and is never read as seconds', () => {
    assert.equal(seconds({ command: 'ls', timeout: 60, timeout_ms: 700 }), 0.7);
    assert.equal(seconds({ command: 'ls', timeout: 0.2, timeout_ms: 3000 }), 3);
    assert.equal(seconds({ command: 'ls', timeout_ms: 50 }), 0.1);
  });

  test('an unusable timeout means the default; an unusable timeout_ms leaves timeout alone', () => {
    assert.equal(seconds({ command: 'ls', timeout: 'soon' }), 120);
    assert.equal(seconds({ command: 'ls', timeout: [5] }), 120);
    assert.equal(seconds({ command: 'ls', timeout: { s: 5 } }), 120);
    assert.equal(seconds({ command: 'ls', timeout: 5, timeout_ms: 'soon' }), 5);
    assert.equal(seconds({ command: 'ls', timeout: 5, timeout_ms: [1] }), 5);
  });

  test('booleans and null are ignored, as if absent', () => {
    assert.equal(seconds({ command: 'ls', timeout: true }), 120);
    assert.equal(seconds({ command: 'ls', timeout: 5, timeout_ms: false }), 5);
    assert.equal(seconds({ command: 'ls', timeout: null, timeout_ms: null }), 120);
  });

  test("strings go through Python's float(): spaces, signs, underscores, other scripts' digits, inf and nan", () => {
    assert.equal(seconds({ command: 'ls', timeout: '30' }), 30);
    assert.equal(seconds({ command: 'ls', timeout: ' 2.5\n' }), 2.5);
    assert.equal(seconds({ command: 'ls', timeout: '+.5' }), 0.5);
    assert.equal(seconds({ command: 'ls', timeout: '1_0' }), 10);
    assert.equal(seconds({ command: 'ls', timeout: '1__0' }), 120);
    assert.equal(seconds({ command: 'ls', timeout: '_10' }), 120);
    assert.equal(seconds({ command: 'ls', timeout: '1e1' }), 10);
    assert.equal(seconds({ command: 'ls', timeout: '\u0663' }), 3); // ARABIC-INDIC DIGIT THREE
    assert.equal(seconds({ command: 'ls', timeout: '\uff17' }), 7); // FULLWIDTH DIGIT SEVEN
    assert.equal(seconds({ command: 'ls', timeout: '\u00a04\u3000' }), 4);
    assert.equal(seconds({ command: 'ls', timeout: 'Infinity' }), 1800);
    assert.equal(seconds({ command: 'ls', timeout: '-inf' }), 0.1);
    assert.equal(seconds({ command: 'ls', timeout: 'nan' }), 120);
    // What JavaScript's Number() reads but Python's float() refuses:
    assert.equal(seconds({ command: 'ls', timeout: '0x10' }), 120);
    assert.equal(seconds({ command: 'ls', timeout: '' }), 120);
    assert.equal(seconds({ command: 'ls', timeout: '\ufeff5' }), 120);
    assert.equal(seconds({ command: 'ls', timeout: '5\x1c' }), 120);
  });

  test('NaN, Infinity and -Infinity literals (Python reads them; JSON.parse does not)', () => {
    assert.equal(seconds('{"command": "ls", "timeout": NaN}'), 120);
    assert.equal(seconds('{"command": "ls", "timeout": Infinity}'), 1800);
    assert.equal(seconds('{"command": "ls", "timeout": -Infinity}'), 0.1);
    assert.equal(seconds('{"command": "ls", "timeout": 5, "timeout_ms": NaN}'), 120);
  });

  test('an integer too large for a double is the OverflowError the reference raised; a float literal that large is infinite', () => {
    const huge = '9'.repeat(400);
    assert.deepEqual(decide(`{"command": "ls", "timeout": ${huge}}`), { error: 'OverflowError: int too large to convert to float', deadlineMs: MARGIN });
    assert.deepEqual(decide(`{"command": "ls", "timeout_ms": -${huge}}`), { error: 'OverflowError: int too large to convert to float', deadlineMs: MARGIN });
    assert.equal(seconds(`{"command": "ls", "timeout": 1e400}`), 1800);
    assert.equal(seconds(`{"command": "ls", "timeout": 9${'0'.repeat(300)}}`), 1800);
  });

  test('arguments that are not a JSON object are {}: the default', () => {
    assert.equal(seconds('not json'), 120);
    assert.equal(seconds('[1, 2]'), 120);
    assert.equal(seconds('{"timeout": 5,}'), 120);
    assert.equal(seconds('{"timeout": 5} x'), 120);
    assert.equal(seconds('{"command": "ls", "timeout": NaN, }'), 120);
  });
});

describe('the Bash timeout: the cap and the host deadline', () => {
  test('above the cap: the cap, and capped says so', () => {
    assert.deepEqual(decide({ command: 'ls', timeout: 5 }, 1), { seconds: 1, capped: true, deadlineMs: 1000 + MARGIN });
    assert.deepEqual(decide({ command: 'ls' }, 60), { seconds: 60, capped: true, deadlineMs: 60_000 + MARGIN });
  });

  test('at or below the cap: the timeout, not capped', () => {
    assert.deepEqual(decide({ command: 'ls', timeout: 60 }, 60), { seconds: 60, capped: false, deadlineMs: 60_000 + MARGIN });
    assert.deepEqual(decide({ command: 'ls', timeout: 0.3 }, 1), { seconds: 0.3, capped: false, deadlineMs: 300 + MARGIN });
  });

  test('the host waits for the timeout the toolbox enforces plus the margin, not for the cap', () => {
    const d = decide({ command: 'ls', timeout: 2 }, 1800);
    assert.ok('seconds' in d);
    assert.equal(d.deadlineMs, 2000 + MARGIN);
  });

  test('a cap that is not a positive number of seconds is a programming error', () => {
    assert.throws(() => decide({ command: 'ls' }, 0), RangeError);
    assert.throws(() => decide({ command: 'ls' }, Infinity), RangeError);
    assert.throws(() => decide({ command: 'ls' }, NaN), RangeError);
  });
});

describe("the Bash cap: the run's remaining budget", () => {
  test('plenty of budget left: the configured cap', () => {
    assert.equal(callCapSeconds(300, 3000), 300);
  });

  test('less budget left than the cap: what is left, rounded up', () => {
    assert.equal(callCapSeconds(1800, 69.5), 70);
    assert.equal(callCapSeconds(1800, 70), 70);
  });

  test('never below one second, even with the budget spent', () => {
    assert.equal(callCapSeconds(1800, 0.1), 1);
    assert.equal(callCapSeconds(1800, -5), 1);
  });
});

test("a call the host's deadline ended reads as the toolbox's own timeout line: Python's one-decimal rounding", () => {
  // Expected values printed by python3 `f"Timed out after {t:.1f}s"`: exact halves of a tenth
  // (odd quarters) round to even, and values that only look halfway round by their exact value.
  const python: Array<[number, string]> = [
    [0.25, '0.2'], [0.75, '0.8'], [1.25, '1.2'], [2.25, '2.2'], [999.75, '999.8'],
    [1.05, '1.1'], [0.35, '0.3'], [1.15, '1.1'], [0.45, '0.5'],
    [0.1, '0.1'], [2.5, '2.5'], [5, '5.0'], [120, '120.0'], [1000, '1000.0'],
  ];
  for (const [t, shown] of python) assert.equal(timedOutLine(t), `Timed out after ${shown}s`, `t=${t}`);
});
