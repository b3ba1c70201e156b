import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { splitPatch } from '../../src/evidence/index.ts';
import { changeRepo, type ChangeRepo } from '../support/change-diff.ts';

const repos: ChangeRepo[] = [];
after(() => repos.forEach((r) => r.remove()));

const apply = (r: ChangeRepo, patch: Buffer, ...flags: string[]) => execFileSync('git', ['apply', '--binary', ...flags, '-'], { cwd: r.dir, input: patch, stdio: 'pipe' });

test('each half of a split change (bytes as git wrote them) applies to the base commit on its own, and the two together make the change', () => {
  const r = changeRepo(
    {
      'calc.py': 'def add(a, b):\n    return a - b\n',
      'tests/test_old.py': 'def test_old():\n    assert True\n',
      'tests/data.bin': Buffer.from([0, 1, 2, 3, 255, 0, 7]),
      'src/lib.rs': 'pub fn f() -> i32 { 1 }\n',
      'assets/logo.png': Buffer.from([137, 80, 78, 71, 13, 10, 26, 10, 0, 0]),
      'run.sh': 'echo hi\n',
      'docs/guide café.md': 'old\n',
      'win.txt': 'line one\r\n',
      'legacy.py': Buffer.from('# caf\xe9\nx = 1\n', 'latin1'),
      'ünïcode/name.py': 'a = 1\n',
    },
    {
      'calc.py': 'def add(a, b):\n    return a + b\n',
      'tests/test_calc.py': 'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n',
      'tests/test_old.py': null,
      'tests/data.bin': Buffer.from([0, 1, 2, 3, 254, 0, 7, 9]),
      'src/lib.rs': 'pub fn f() -> i32 { 2 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn f_is_two() { assert_eq!(super::f(), 2); }\n}\n',
      'assets/logo.png': null,
      'assets/icon.png': Buffer.from([137, 80, 78, 71, 13, 10, 26, 10, 1, 1]),
      'win.txt': 'line one\r\nline two\r\n',
      'run.sh': { content: 'echo hi\n', executable: true },
      'docs/guide café.md': 'new\n',
      'legacy.py': Buffer.from('# caf\xe9\nx = 2\n', 'latin1'),
      'ünïcode/name.py': 'a = 2\n',
      'tests/test_ünï.py': 'def test_u():\n    assert True\n',
    },
  );
  repos.push(r);
  const split = splitPatch(r.bytes);
  assert.deepEqual(split.testFiles, ['tests/data.bin', 'tests/test_calc.py', 'tests/test_old.py', 'tests/test_ünï.py']);
  assert.equal(split.codeFiles.length, 9);
  assert.ok(split.codeFiles.includes('ünïcode/name.py'));
  assert.match(split.code.toString('latin1'), /\+line two\r\n/);

  // Each half alone, against the base.
  apply(r, split.tests, '--check');
  apply(r, split.code, '--check');

  // The tests half on the base code: what Lilypad runs to see a test fail without the fix.
  apply(r, split.tests);
  assert.equal(readFileSync(path.join(r.dir, 'calc.py'), 'utf8'), 'def add(a, b):\n    return a - b\n');
  assert.match(readFileSync(path.join(r.dir, 'tests/test_calc.py'), 'utf8'), /assert add\(2, 3\) == 5/);
  // Then the code half on top: the whole change.
  apply(r, split.code);
  r.git('add', '-A');
  assert.equal(r.git('-c', 'core.quotePath=false', 'diff', '--cached', '--binary', '--no-renames', '--no-color', 'HEAD'), r.diff);
  assert.equal(Buffer.concat([split.tests, split.code]).length, r.bytes.length);
});
