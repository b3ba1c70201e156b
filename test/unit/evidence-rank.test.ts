import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { rankAttempts, type RankCandidate } from '../../src/evidence/index.ts';

const diff = (file: string, minus: string[], plus: string[]) =>
  [`diff --git a/${file} b/${file}`, 'index abc1234..def5678 100644', `--- a/${file}`, `+++ b/${file}`, `@@ -1,${minus.length + 1} +1,${plus.length + 1} @@`, ' def f():', ...minus.map((l) => `-${l}`), ...plus.map((l) => `+${l}`), ''].join('\n');

const small = diff('calc.py', ['    return a - b'], ['    return a + b']);
const bigger = diff('calc.py', ['    return a - b'], ['    if a is None:', '        raise TypeError("a")', '    return a + b']) + diff('tests/test_calc.py', [], ['def test_add():', '    assert add(2, 3) == 5']);
const other = diff('calc.py', ['    return a - b'], ['    return b + a']);

const verified = { verdict: 'verified' as const, broken: [], weakened: [] };
const unverified = { verdict: 'unverified' as const, broken: [], weakened: [] };
const failing = { verdict: 'failing' as const, broken: ['tests/test_calc.py::test_sub'], weakened: [] };
const weakened = { verdict: 'unverified' as const, broken: [], weakened: [{ file: 'tests/test_calc.py', what: 'deleted an assertion: `assert x`' }] };

describe('ranking attempts by evidence', () => {
  test('best of 3: the verified attempt wins over a smaller unverified one whose tests also pass', () => {
    const r = rankAttempts([
      { index: 0, patch: small, testsPassed: true, evidence: unverified },
      { index: 1, patch: bigger, testsPassed: true, evidence: verified },
      { index: 2, patch: small, testsPassed: true, evidence: unverified },
    ]);
    assert.equal(r.winner, 1);
    assert.equal(r.decidedBy, 'verified');
    assert.equal(r.summary, 'attempt 2 of 3: the only verified attempt');
    // Agreement (0 and 2 made the same change) would have chosen 0 without the evidence.
    assert.deepEqual(r.order, [1, 0, 2]);
    assert.deepEqual(
      r.attempts.map((a) => a.verdict),
      ['unverified', 'verified', 'unverified'],
    );
  });

  test('among unverified attempts, one that breaks and weakens nothing beats failing and weakened ones, even with failing tests elsewhere', () => {
    const r = rankAttempts([
      { index: 0, patch: small, testsPassed: false, evidence: failing },
      { index: 1, patch: other, testsPassed: true, evidence: weakened },
      { index: 2, patch: bigger, testsPassed: true, evidence: unverified },
    ]);
    assert.equal(r.winner, 2);
    assert.equal(r.decidedBy, 'not_broken');
    assert.equal(r.summary, 'attempt 3 of 3: the only attempt that breaks and weakens no test');
    assert.match(r.attempts[0]!.note, /^failing \(1 broken\)/);
    assert.match(r.attempts[1]!.note, /^unverified \(1 weakened\)/);
  });

  test('then tests passing; then agreement among equally supported attempts, then the smallest diff', () => {
    const byTests = rankAttempts([
      { index: 0, patch: small, testsPassed: null, evidence: unverified },
      { index: 1, patch: bigger, testsPassed: true, evidence: unverified },
    ]);
    assert.equal(byTests.winner, 1);
    assert.equal(byTests.decidedBy, 'tests');

    const byAgreement = rankAttempts([
      { index: 0, patch: other, testsPassed: true, evidence: verified },
      { index: 1, patch: bigger, testsPassed: true, evidence: verified },
      { index: 2, patch: bigger.replace('abc1234', '9999999'), testsPassed: true, evidence: verified },
    ]);
    assert.equal(byAgreement.winner, 1);
    assert.equal(byAgreement.decidedBy, 'agreement');
    assert.equal(byAgreement.summary, 'attempt 2 of 3: 2 of 3 verified attempts made the same change');

    const bySize = rankAttempts([
      { index: 0, patch: bigger, testsPassed: true, evidence: verified },
      { index: 1, patch: other, testsPassed: true, evidence: verified },
    ]);
    assert.equal(bySize.winner, 1);
    assert.equal(bySize.decidedBy, 'smallest_diff');
    assert.equal(bySize.summary, 'attempt 2 of 2: the smallest diff (2 changed lines) among 2 equally supported verified attempts');
  });

  test('attempts without a patch never win and come last; evidence not computed counts as neither verified nor clean', () => {
    const r = rankAttempts([
      { index: 0, patch: null, testsPassed: null, evidence: null },
      { index: 1, patch: small, testsPassed: true, evidence: null },
      { index: 2, patch: bigger, testsPassed: false, evidence: unverified },
    ]);
    assert.equal(r.winner, 2);
    assert.deepEqual(r.order, [2, 1, 0]);
    assert.match(r.attempts[0]!.note, /evidence not computed; no patch/);
    const none = rankAttempts([{ index: 0, patch: '', testsPassed: null, evidence: null }]);
    assert.equal(none.winner, null);
    assert.equal(none.summary, 'none of the 1 attempt(s) produced a patch');
    const one = rankAttempts([{ index: 0, patch: small, testsPassed: false, evidence: failing } satisfies RankCandidate]);
    assert.deepEqual([one.winner, one.decidedBy, one.summary], [0, 'only_candidate', 'attempt 1 of 1: the only attempt with a patch']);
  });
});
