import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { diffFiles, DiffFormatError, splitPatch } from '../../src/evidence/index.ts';
import { changeRepo, type ChangeRepo } from '../support/change-diff.ts';

describe('splitPatch on diffs made by git', () => {
  const repos: ChangeRepo[] = [];
  after(() => repos.forEach((r) => r.remove()));
  const make = (...args: Parameters<typeof changeRepo>) => {
    const r = changeRepo(...args);
    repos.push(r);
    return r;
  };

  test('new, modified, deleted, binary and mode-changed files land in the right half, whole and in order', () => {
    const r = make(
      {
        'calc.py': 'def add(a, b):\n    return a - b\n',
        'tests/test_old.py': 'def test_old():\n    assert True\n',
        'tests/fixture.bin': Buffer.from([0, 1, 2, 3, 255]),
        'run.sh': 'echo hi\n',
        'logo.png': Buffer.from([137, 80, 78, 71, 0, 0, 1]),
      },
      {
        'calc.py': 'def add(a, b):\n    return a + b\n',
        'tests/test_calc.py': 'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n',
        'tests/test_old.py': null,
        'tests/fixture.bin': Buffer.from([0, 1, 2, 3, 254, 0]),
        'run.sh': { content: 'echo hi\n', executable: true },
        'logo.png': Buffer.from([137, 80, 78, 71, 0, 0, 2]),
      },
    );
    const split = splitPatch(r.diff);
    assert.deepEqual(split.codeFiles, ['calc.py', 'logo.png', 'run.sh']);
    assert.deepEqual(split.testFiles, ['tests/fixture.bin', 'tests/test_calc.py', 'tests/test_old.py']);
    assert.match(split.tests, /GIT binary patch/);
    assert.match(split.tests, /^deleted file mode/m);
    assert.match(split.code, /^old mode 100644\nnew mode 100755$/m);
    // Nothing lost, nothing added: the halves hold every section of the original.
    assert.equal(split.tests.length + split.code.length, r.diff.length);
    for (const part of [split.tests, split.code]) for (const f of diffFiles(part)) assert.ok(r.diff.includes(f.text));
  });

  test('paths git quotes (non-ASCII) and paths with spaces are read right', () => {
    const base = { 'tests/café_test.py': 'x = 1\n', 'my dir/calc.py': 'a = 1\n', 'img/ünï.png': Buffer.from([0, 1]) };
    const change = { 'tests/café_test.py': 'x = 2\n', 'my dir/calc.py': 'a = 2\n', 'img/ünï.png': Buffer.from([0, 2]) };
    const quoted = make(base, change, { quotePath: true });
    const raw = make(base, change, { quotePath: false });
    assert.match(quoted.diff, /"a\/tests\/caf\\303\\251_test.py"/);
    assert.match(raw.diff, /^diff --git a\/tests\/café_test.py b\/tests\/café_test.py$/m);
    for (const input of [quoted.diff, quoted.bytes, raw.diff, raw.bytes]) {
      const split = typeof input === 'string' ? splitPatch(input) : splitPatch(input);
      assert.deepEqual(split.testFiles, ['tests/café_test.py']);
      assert.deepEqual(split.codeFiles.sort(), ['img/ünï.png', 'my dir/calc.py']);
    }
  });

  test('a change without tests has an empty tests half; an empty diff has two empty halves', () => {
    const r = make({ 'calc.py': 'a = 1\n' }, { 'calc.py': 'a = 2\n' });
    assert.deepEqual(splitPatch(r.diff), { tests: '', code: r.diff, testFiles: [], codeFiles: ['calc.py'] });
    assert.deepEqual(splitPatch(''), { tests: '', code: '', testFiles: [], codeFiles: [] });
  });

  test('a diff whose last line has no newline still ends each half with one', () => {
    const r = make({ 'a.py': 'a = 1\n' }, { 'a.py': 'a = 2\n' });
    const split = splitPatch(r.diff.replace(/\n$/, ''));
    assert.ok(split.code.endsWith('+a = 2\n'));
  });

  test('text that is not a git diff is refused with how to make one', () => {
    assert.throws(() => splitPatch('--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n'), (err: unknown) => err instanceof DiffFormatError && /git diff --binary --no-renames/.test(err.message));
  });
});
