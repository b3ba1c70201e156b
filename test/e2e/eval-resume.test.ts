import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startModelServer, type ModelServer } from '../support/model-server.ts';
import { containersOfEval, readJsonFile, runEvalCli, startEval, waitFor } from '../fixtures/eval/cli.ts';
import { calcInstance, diffOf, makeFixture, scriptFor, writeInstances, type Fixture } from '../fixtures/eval/instances.ts';

interface EndpointReport {
  avg_at_k: number;
  pass_at_k: number;
  selected_resolve_rate: number | null;
  resolved_attempts: number;
  attempts_done: number;
  selections: Record<string, { winner: number | null; decidedBy: string; summary: string }> | null;
}
interface RunReport {
  complete: boolean;
  interrupted: boolean;
  endpoints: EndpointReport[];
  models: Record<string, { resolved_ids: string[]; completed_ids: string[]; incomplete_ids: string[] }>;
  validation: Array<{ instance_id: string; valid: boolean; problems: string[] }> | null;
}

describe('lilypad eval: best of k, interruption and resume, gold validation', () => {
  let f: Fixture;
  const servers: ModelServer[] = [];
  before(() => {
    f = makeFixture();
  });
  after(async () => {
    for (const s of servers) await s.close();
  });

  test('--attempts 3 --select: Avg@k, pass@k and the selected attempt (agreement among attempts) side by side', async () => {
    // Three conversations on one issue: one wrong fix, two identical right ones.
    const server = await startModelServer({ script: scriptFor({ 'c-k': ['wrong', 'resolve', 'resolve'] }) });
    servers.push(server);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-eval-'));
    const out = path.join(dir, 'out');
    const file = writeInstances(dir, [calcInstance(f, 'c-k')]);
    const run = await runEvalCli(['run', '--instances', file, '--endpoint', `local=${server.url},gpu_hour_cost=1`, '--attempts', '3', '--select', '--workers', '3', '--out', out]);
    assert.equal(run.code, 0, run.stderr + run.stdout);
    assert.match(run.stdout, /^local: resolve rate 66\.7% \(2\/3 attempts, pass@3 100\.0%, selected 100\.0%\)/m);
    const report = readJsonFile(path.join(out, 'run-report.json')) as RunReport;
    const m = report.endpoints[0]!;
    assert.ok(Math.abs(m.avg_at_k - 2 / 3) < 1e-9);
    assert.equal(m.pass_at_k, 1);
    assert.equal(m.selected_resolve_rate, 1);
    // The tests after the agent (without the hidden test patch) pass for all three: agreement decides.
    assert.equal(m.selections!['c-k']!.decidedBy, 'agreement');
    assert.match(m.selections!['c-k']!.summary, /2 of 3 attempts that break and weaken no test made the same change/);
    const winner = m.selections!['c-k']!.winner!;
    assert.match(readFileSync(path.join(out, `runs/local/attempt-${winner + 1}/c-k/patch.diff`), 'utf8'), /^\+    return a \+ b$/m);
    assert.deepEqual(report.models['local/selected']!.resolved_ids, ['c-k']);
    assert.equal(Object.keys(report.models).sort().join(' '), 'local/attempt-1 local/attempt-2 local/attempt-3 local/selected');
    const predictions = readFileSync(path.join(out, 'predictions.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { model_name_or_path: string });
    assert.deepEqual(predictions.map((p) => p.model_name_or_path).sort(), ['local/attempt-1', 'local/attempt-2', 'local/attempt-3', 'local/selected']);
    assert.match(readFileSync(path.join(out, 'report.md'), 'utf8'), /\| c-k \| local \| [✔✘] [✔✘] [✔✘] \| #\d \|/);
  });

  test('the terminal closing (SIGHUP, stopped as Ctrl-C is) mid-run leaves no container and a consistent partial report; --resume runs only what is left', async () => {
    const first = await startModelServer({ script: scriptFor({ 'c-first': 'resolve', 'c-hang': 'hang' }) });
    servers.push(first);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-eval-'));
    const out = path.join(dir, 'out');
    const file = writeInstances(dir, [calcInstance(f, 'c-first'), calcInstance(f, 'c-hang')]);
    const { child, done } = startEval(['run', '--instances', file, '--endpoint', `local=${first.url}`, '--out', out]);
    await waitFor('the model request of the second instance', () => first.chatRequests().some((r) => String(r.messages[1]!.content).includes('[c-hang]')));
    assert.ok((await containersOfEval(out)) >= 1, 'the second attempt has its sandbox (and a kept environment\'s baseline) while the model thinks');
    child.kill('SIGHUP');
    const run = await done;
    assert.equal(run.code, 130, run.stderr);
    assert.match(run.stdout, /interrupted: the report holds the finished attempts; rerun with --resume/);
    assert.equal(await containersOfEval(out), 0);
    let report = readJsonFile(path.join(out, 'run-report.json')) as RunReport;
    assert.equal(report.complete, false);
    assert.equal(report.interrupted, true);
    assert.deepEqual(report.models['local']!.completed_ids, ['c-first']);
    assert.deepEqual(report.models['local']!.incomplete_ids, ['c-hang']);
    assert.equal(report.endpoints[0]!.attempts_done, 1);
    assert.match(readFileSync(path.join(out, 'report.md'), 'utf8'), /\*\*Interrupted: partial results\*\*/);
    assert.ok(!existsSync(path.join(out, 'runs/local/attempt-1/c-hang/attempt.json')));

    const second = await startModelServer({ script: scriptFor({ 'c-first': 'wrong', 'c-hang': 'resolve' }) });
    servers.push(second);
    const resumed = await runEvalCli(['run', '--instances', file, '--endpoint', `local=${second.url}`, '--out', out, '--resume']);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.ok(!second.chatRequests().some((r) => String(r.messages[1]!.content).includes('[c-first]')), 'the finished attempt is not run again');
    report = readJsonFile(path.join(out, 'run-report.json')) as RunReport;
    assert.equal(report.complete, true);
    assert.deepEqual(report.models['local']!.resolved_ids, ['c-first', 'c-hang']);
    assert.equal(await containersOfEval(out), 0);
  });

  test('--validate without endpoints: the gold patch must resolve the instance and the tests must fail without it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-eval-'));
    const out = path.join(dir, 'out');
    const wrongGold = diffOf(f.calcRepo, { 'calc.py': 'def add(a, b):\n    return a * b\n\n\ndef mul(a, b):\n    return a * b\n' });
    const file = writeInstances(dir, [
      calcInstance(f, 'v-good'),
      calcInstance(f, 'v-wrong-gold', { patch: wrongGold }),
      calcInstance(f, 'v-already-passing', { FAIL_TO_PASS: ['test_calc.CalcTest.test_mul'], PASS_TO_PASS: [] }),
    ]);
    const run = await runEvalCli(['run', '--instances', file, '--validate', '--workers', '2', '--out', out]);
    assert.equal(run.code, 0, run.stderr + run.stdout);
    assert.match(run.stdout, /^validation: 1 of 3 instance\(s\) valid \(invalid: v-wrong-gold, v-already-passing\)/m);
    const report = readJsonFile(path.join(out, 'run-report.json')) as RunReport;
    const v = new Map(report.validation!.map((x) => [x.instance_id, x]));
    assert.equal(v.get('v-good')!.valid, true);
    assert.match(v.get('v-wrong-gold')!.problems.join(), /with the gold patch, FAIL_TO_PASS tests fail: test_calc.CalcTest.test_add/);
    assert.match(v.get('v-already-passing')!.problems.join(), /without any patch, FAIL_TO_PASS tests already pass: test_calc.CalcTest.test_mul/);
    assert.equal(report.endpoints.length, 0);
    assert.equal(await containersOfEval(out), 0);
  });
});
