// The evidence a change carries, computed by Lilypad (never the model), through `lilypad run` as a
// user runs it: the real sandbox image, scripted agents, result.json's `evidence`. Each story is one
// of issue 17's: a new test that fails without the fix (verified), a test that passes on the base
// code too (unverified), a deleted assertion (weakened), another test broken (failing), and best of
// 3 where the verified attempt wins over a smaller unverified one.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { makeRepo } from '../support/fixture-repo.ts';
import { startModelServer, type ChatRequestBody, type ModelServer, type ScriptedReply } from '../support/model-server.ts';
import { runCli } from '../support/run-cli.ts';

/** add() subtracts; mul() is right and has a passing test. No configuration: tests are inferred. */
const REPO: Record<string, string> = {
  'calc.py': 'def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n',
  'tests/__init__.py': '',
  'tests/test_mul.py': 'import unittest\n\nfrom calc import mul\n\n\nclass MulTest(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n',
  'tests/test_add.py': 'import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add_zero(self):\n        self.assertEqual(add(0, 0), 0)\n\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n',
  '.gitignore': '__pycache__/\n',
};

const edit = (file_path: string, old_string: string, new_string: string) => ({ name: 'Edit', arguments: { file_path, old_string, new_string } });
const write = (file_path: string, content: string) => ({ name: 'Write', arguments: { file_path, content } });
const FIX = edit('calc.py', 'return a - b', 'return a + b');
const NEW_TEST = write('tests/test_add_more.py', 'import unittest\n\nfrom calc import add\n\n\nclass AddMoreTest(unittest.TestCase):\n    def test_add_negative(self):\n        self.assertEqual(add(-1, -2), -3)\n');
const PASSES_ON_BASE = write('tests/test_add_more.py', 'import unittest\n\nfrom calc import add\n\n\nclass AddMoreTest(unittest.TestCase):\n    def test_add_zero_again(self):\n        self.assertEqual(add(5, 0), 5)\n');

const STORIES: Record<string, ScriptedReply[]> = {
  verified: [{ toolCalls: [FIX, NEW_TEST] }, { content: 'Fixed add() and added a test.' }],
  unverified: [{ toolCalls: [edit('calc.py', 'def add(a, b):', 'def add(a, b):  # sums'), PASSES_ON_BASE] }, { content: 'Added a test.' }],
  weakened: [{ toolCalls: [FIX, edit('tests/test_add.py', '        self.assertEqual(add(2, 3), 5)\n', '        pass\n')] }, { content: 'Fixed it.' }],
  failing: [{ toolCalls: [FIX, edit('calc.py', 'return a * b', 'return a * b + 1')] }, { content: 'Fixed it.' }],
};

function scriptBySeed(replies: Record<number, ScriptedReply[]>) {
  return ({ body }: { body: ChatRequestBody }): ScriptedReply => {
    const seed = Number((body as unknown as { seed?: number }).seed ?? 1);
    const turn = body.messages.filter((m) => m.role === 'assistant').length;
    return replies[seed]?.[turn] ?? { content: 'done' };
  };
}

describe('evidence for every change (lilypad run)', () => {
  const servers: ModelServer[] = [];
  after(async () => {
    for (const s of servers) await s.close();
  });

  const run = async (script: ScriptedReply[] | ReturnType<typeof scriptBySeed>, extra: string[] = []) => {
    const model = await startModelServer({ script });
    servers.push(model);
    const out = mkdtempSync(path.join(os.tmpdir(), 'lilypad-evidence-'));
    const cli = await runCli(['--repo', makeRepo(REPO), '--title', 'add() subtracts', '--body', 'add(2, 3) gives -1.', '--out', out, '--base-url', model.url, ...extra], { LILYPAD_SETUP_EGRESS: 'none' });
    assert.equal(cli.code, 0, cli.stderr + cli.stdout);
    const result = JSON.parse(readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.equal(result.tests.source, 'inferred', JSON.stringify(result.tests));
    return { result, stdout: cli.stdout };
  };

  test('a fix with a new test that fails without it: verified, the test named as a reproduction, the existing one as fixed', async () => {
    const { result } = await run(STORIES['verified']!);
    assert.equal(result.evidence.verdict, 'verified', JSON.stringify(result.evidence, null, 2));
    assert.ok(result.evidence.reproduction.some((id: string) => id.includes('test_add_negative')), JSON.stringify(result.evidence));
    assert.ok(result.evidence.fixed.some((id: string) => id.includes('test_add')), JSON.stringify(result.evidence));
    assert.deepEqual(result.evidence.broken, []);
    assert.deepEqual(result.evidence.change_tests.files, ['tests/test_add_more.py']);
  });

  test('a change with a test that passes on the base code too: unverified (nothing shows the issue fixed)', async () => {
    const { result } = await run(STORIES['unverified']!);
    assert.equal(result.evidence.verdict, 'unverified', JSON.stringify(result.evidence, null, 2));
    assert.deepEqual(result.evidence.reproduction, []);
  });

  test('a change that deletes an assertion to make a test pass: weakened, not verified', async () => {
    const { result } = await run(STORIES['weakened']!);
    assert.notEqual(result.evidence.verdict, 'verified', JSON.stringify(result.evidence, null, 2));
    assert.ok(result.evidence.weakened.some((w: { file: string }) => w.file === 'tests/test_add.py'), JSON.stringify(result.evidence.weakened));
  });

  test('a change that breaks another test: failing, the broken test named', async () => {
    const { result } = await run(STORIES['failing']!);
    assert.equal(result.evidence.verdict, 'failing', JSON.stringify(result.evidence, null, 2));
    assert.ok(result.evidence.broken.some((id: string) => id.includes('test_mul')), JSON.stringify(result.evidence));
  });

  test('a looping agent ends as stuck with its work kept; with best of 2 a fresh attempt takes the steps it left', async () => {
    const loop: ScriptedReply[] = Array.from({ length: 10 }, () => ({ toolCalls: [{ name: 'Bash', arguments: { command: 'python3 -m unittest 2>&1 | tail -1' } }] }));
    const { result } = await run(scriptBySeed({ 1: loop, 2: STORIES['unverified']!, 3: STORIES['verified']! }), ['--attempts', '2']);
    const rows = result.attempts.rows as Array<{ attempt: number; exitReason: string; steps: number; chosen: boolean; note: string }>;
    assert.deepEqual(rows.map((a) => [a.attempt, a.exitReason]), [[1, 'stuck'], [2, 'agent'], [3, 'agent']], JSON.stringify(rows, null, 2));
    assert.equal(rows[0]!.steps, 4, 'the same call with the same observation four times (stuck_repeats)');
    assert.match(rows[2]!.note, /fresh attempt with the steps attempt 1 left when it got stuck/);
    assert.equal(rows.find((a) => a.chosen)?.attempt, 3, 'the fresh attempt is verified and wins');
  });

  test('--reproduce: a run writes a failing test first; the fix is judged by it (verified) and the test goes with the patch', async () => {
    const reproTest = write('tests/test_repro.py', 'import unittest\n\nfrom calc import add\n\n\nclass ReproTest(unittest.TestCase):\n    def test_add_sums(self):\n        self.assertEqual(add(1, 1), 2)\n');
    const asked: string[] = [];
    const script = ({ body }: { body: ChatRequestBody }): ScriptedReply => {
      const user = String(body.messages[1]!.content);
      const turn = body.messages.filter((m) => m.role === 'assistant').length;
      const repro = user.includes('Do not fix this issue yet');
      if (turn === 0) asked.push(repro ? 'reproduce' : 'fix');
      if (repro) return turn === 0 ? { toolCalls: [reproTest] } : { content: 'Wrote a failing test.' };
      return turn === 0 ? { toolCalls: [FIX] } : { content: 'Fixed add().' };
    };
    const { result } = await run(script, ['--reproduce']);
    assert.deepEqual(asked, ['reproduce', 'fix'], 'one reproduction run, then the fix');
    assert.equal(result.reproduction.kept, true, JSON.stringify(result.reproduction));
    assert.deepEqual(result.reproduction.files, ['tests/test_repro.py']);
    assert.equal(result.evidence.verdict, 'verified', JSON.stringify(result.evidence, null, 2));
    assert.ok(result.evidence.reproduction.some((id: string) => id.includes('test_add_sums')), JSON.stringify(result.evidence));
    assert.deepEqual([...result.patch.files].sort(), ['calc.py', 'tests/test_repro.py'], 'the reproduction test is offered with the change');
  });

  test('--reproduce: a test that fails only with an import error is not kept', async () => {
    const badTest = write('tests/test_repro.py', 'import unittest\n\nfrom calc import add_numbers\n\n\nclass ReproTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add_numbers(1, 1), 2)\n');
    const script = ({ body }: { body: ChatRequestBody }): ScriptedReply => {
      const repro = String(body.messages[1]!.content).includes('Do not fix this issue yet');
      const turn = body.messages.filter((m) => m.role === 'assistant').length;
      if (repro) return turn === 0 ? { toolCalls: [badTest] } : { content: 'Wrote a test.' };
      return turn === 0 ? { toolCalls: [FIX] } : { content: 'Fixed add().' };
    };
    const { result } = await run(script, ['--reproduce']);
    assert.equal(result.reproduction.kept, false, JSON.stringify(result.reproduction));
    assert.match(result.reproduction.why, /import|did not load/);
    assert.deepEqual(result.patch.files, ['calc.py']);
  });

  test('best of 3: the verified attempt wins over a smaller unverified one and a failing one', async () => {
    const { result, stdout } = await run(scriptBySeed({ 1: STORIES['unverified']!, 2: STORIES['verified']!, 3: STORIES['failing']! }), ['--attempts', '3']);
    const chosen = result.attempts.rows.find((a: { chosen: boolean }) => a.chosen);
    assert.equal(chosen.attempt, 2, JSON.stringify(result.attempts, null, 2));
    assert.deepEqual(result.attempts.rows.map((a: { evidence: string }) => a.evidence), ['unverified', 'verified', 'failing']);
    assert.equal(result.evidence.verdict, 'verified');
    assert.match(stdout, /attempt 2 \(chosen\)/);
  });
});
