import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { changedLines, normalisePatch, selectAttempt } from '../../src/evidence/select-attempt.ts';

const diff = (file: string, minus: string[], plus: string[], at = 1, index = 'abc1234..def5678') =>
  [`diff --git a/${file} b/${file}`, `index ${index} 100644`, `--- a/${file}`, `+++ b/${file}`, `@@ -${at},3 +${at},3 @@`, ' def f():', ...minus.map((l) => `-${l}`), ...plus.map((l) => `+${l}`), ''].join('\n');

const fixA = diff('calc.py', ['    return a - b'], ['    return a + b']);
// The same change, with other index hashes, hunk position, trailing spaces and a blank line added.
const fixA2 = diff('calc.py', ['    return a - b'], ['    return a + b   ', ''], 7, '1111111..2222222');
const fixB = diff('calc.py', ['    return a - b'], ['    return b + a']);
const big = diff('calc.py', ['    return a - b', '    x = 1'], ['    return a + b', '    x = 2', '    y = 3']);

describe('best-of-k selection', () => {
  test('normalisation ignores index lines, hunk positions, trailing whitespace, blank lines and file order', () => {
    assert.equal(normalisePatch(fixA), normalisePatch(fixA2));
    assert.notEqual(normalisePatch(fixA), normalisePatch(fixB));
    const twoFiles = diff('a.py', ['x'], ['y']) + diff('b.py', ['p'], ['q']);
    const swapped = diff('b.py', ['p'], ['q']) + diff('a.py', ['x'], ['y']);
    assert.equal(normalisePatch(twoFiles), normalisePatch(swapped));
    assert.equal(changedLines(big), 5);
  });

  test('(1) tests after: an attempt whose tests passed beats a larger agreeing cluster whose tests failed', () => {
    const sel = selectAttempt([
      { index: 0, patch: fixA, testsPassed: false },
      { index: 1, patch: fixA2, testsPassed: false },
      { index: 2, patch: big, testsPassed: true },
    ]);
    assert.equal(sel.winner, 2);
    assert.equal(sel.decidedBy, 'tests');
    assert.equal(sel.attempts[0]!.eligible, false);
    assert.match(sel.attempts[0]!.note, /tests failed/);
  });

  test('(2) agreement: among passing attempts the largest cluster of the same change wins, even with a bigger diff', () => {
    const sel = selectAttempt([
      { index: 0, patch: fixB, testsPassed: true },
      { index: 1, patch: big, testsPassed: true },
      { index: 2, patch: big.replace('abc1234', '9999999'), testsPassed: true },
    ]);
    assert.equal(sel.winner, 1);
    assert.equal(sel.decidedBy, 'agreement');
    assert.deepEqual(sel.clusters, [[1, 2], [0]]);
    assert.match(sel.summary, /2 of 3 passing attempts made the same change/);
  });

  test('(3) smallest diff: equal clusters are decided by the fewest changed lines, then the earliest attempt', () => {
    const sel = selectAttempt([
      { index: 0, patch: big, testsPassed: null },
      { index: 1, patch: fixB, testsPassed: null },
      { index: 2, patch: fixA, testsPassed: null },
    ]);
    assert.equal(sel.winner, 1);
    assert.equal(sel.decidedBy, 'smallest_diff');
  });

  test('attempts without a patch never win; no patch at all means no winner', () => {
    assert.equal(selectAttempt([{ index: 0, patch: '', testsPassed: true }, { index: 1, patch: fixA, testsPassed: false }]).winner, 1);
    const none = selectAttempt([{ index: 0, patch: null, testsPassed: null }, { index: 1, patch: '  \n', testsPassed: true }]);
    assert.equal(none.winner, null);
    assert.equal(none.decidedBy, null);
    assert.match(none.summary, /none of the 2 attempt\(s\) produced a patch/);
    assert.equal(selectAttempt([{ index: 3, patch: fixA, testsPassed: null }]).decidedBy, 'only_candidate');
  });

  test('unanimous attempts: agreement decides', () => {
    const sel = selectAttempt([
      { index: 0, patch: fixA2, testsPassed: true },
      { index: 1, patch: fixA, testsPassed: true },
    ]);
    assert.equal(sel.winner, 1);
    assert.equal(sel.decidedBy, 'agreement');
    assert.match(sel.summary, /attempt 2 of 2: 2 of 2 passing attempts made the same change/);
  });

  test('when no attempt passed its tests, all attempts with a patch compete', () => {
    const sel = selectAttempt([
      { index: 0, patch: fixB, testsPassed: false },
      { index: 1, patch: fixA, testsPassed: false },
      { index: 2, patch: fixA2, testsPassed: null },
    ]);
    assert.equal(sel.winner, 1);
    assert.equal(sel.decidedBy, 'agreement');
    assert.ok(sel.attempts.every((a) => a.eligible));
  });
});
