import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { z } from 'zod';
import { judgePatch } from '../../src/eval/judge.ts';
import { parseInstances } from '../../src/eval/instance.ts';
import { RepoCache } from '../../src/eval/repo-source.ts';
import { createDockerClient } from '../../src/sandbox/sandbox.ts';
import { startModelServer, type ModelServer } from '../support/model-server.ts';
import { containersOfEval, readJsonFile, runEvalCli } from '../fixtures/eval/cli.ts';
import { calcInstance, makeFixture, scriptFor, sumInstance, writeInstances, type Fixture } from '../fixtures/eval/instances.ts';

// SWE-bench's field names and types, strictly: an extra or missing field fails.
const predictionSchema = z.strictObject({ instance_id: z.string(), model_name_or_path: z.string(), model_patch: z.string() });
const bucket = z.strictObject({ success: z.array(z.string()), failure: z.array(z.string()) });
const instanceReportSchema = z.record(
  z.string(),
  z.strictObject({
    patch_is_None: z.boolean(),
    patch_exists: z.boolean(),
    patch_successfully_applied: z.boolean(),
    resolved: z.boolean(),
    tests_status: z.strictObject({ FAIL_TO_PASS: bucket, PASS_TO_PASS: bucket, FAIL_TO_FAIL: bucket, PASS_TO_FAIL: bucket }),
  }),
);
const runReportSchema = z.strictObject({
  total_instances: z.number().int(),
  submitted_instances: z.number().int(),
  completed_instances: z.number().int(),
  resolved_instances: z.number().int(),
  unresolved_instances: z.number().int(),
  empty_patch_instances: z.number().int(),
  error_instances: z.number().int(),
  completed_ids: z.array(z.string()),
  incomplete_ids: z.array(z.string()),
  empty_patch_ids: z.array(z.string()),
  submitted_ids: z.array(z.string()),
  resolved_ids: z.array(z.string()),
  unresolved_ids: z.array(z.string()),
  error_ids: z.array(z.string()),
  schema_version: z.literal(2),
});

describe('lilypad eval run', () => {
  let f: Fixture;
  const servers: ModelServer[] = [];
  before(() => {
    f = makeFixture();
  });
  after(async () => {
    for (const s of servers) await s.close();
  });

  test('two endpoints side by side: resolved, failing, P2P-breaking, empty and node instances, bad lines reported one by one; SWE-bench outputs', async () => {
    const plan = { 'c-resolve': 'resolve', 'c-wrong': 'wrong', 'c-breaks': 'breaks', 'c-nothing': 'nothing', 's-resolve': 'sum-resolve' };
    const local = await startModelServer({ script: scriptFor(plan) });
    // The "hosted" endpoint gets every calc issue wrong.
    const hosted = await startModelServer({ flavour: 'vllm', modelId: 'hosted-model', script: scriptFor({ ...plan, 'c-resolve': 'wrong', 's-resolve': 'nothing' }) });
    servers.push(local, hosted);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-eval-'));
    const out = path.join(dir, 'out');
    const file = writeInstances(dir, [
      calcInstance(f, 'c-resolve'),
      '{"instance_id": "truncated"',
      calcInstance(f, 'c-wrong'),
      calcInstance(f, 'c-breaks'),
      { ...calcInstance(f, 'c-no-cmd'), test_command: undefined },
      calcInstance(f, 'c-nothing'),
      sumInstance(f, 's-resolve'),
    ]);
    const run = await runEvalCli([
      'run',
      '--instances',
      file,
      '--endpoint',
      `local=${local.url},gpu_hour_cost=2.5`,
      '--endpoint',
      `hosted=${hosted.url},model=hosted-model,input_cost=0.5,output_cost=2`,
      '--workers',
      '2',
      '--out',
      out,
    ]);
    // Bad lines: reported one by one, the rest ran; the exit code says not everything was clean.
    assert.equal(run.code, 1, run.stderr + run.stdout);
    assert.match(run.stderr, /line 2: not valid JSON.*this instance is skipped/);
    assert.match(run.stderr, /line 5 \(c-no-cmd\): test_command: missing; this instance is skipped/);
    assert.match(run.stdout, /^local: resolve rate 40\.0% \(2\/5 attempts\)/m);
    assert.match(run.stdout, /^hosted: resolve rate 0\.0% \(0\/5 attempts\)/m);
    // Plain progress lines when stderr is not a terminal, each with an ETA.
    assert.match(run.stderr, /^\[\d+\/10\] local#1\/c-wrong: not resolved \(FAIL_TO_PASS 0\/1, PASS_TO_PASS 1\/1\) \((elapsed .*ETA|done in)/m);

    // The model saw the problem statement and nothing else.
    const firstCalc = local.chatRequests().find((r) => String(r.messages[1]!.content).includes('[c-resolve]'))!;
    assert.equal(firstCalc.messages[1]!.content, 'add() returns the wrong result [c-resolve]\nadd(2, 3) gives -1 instead of 5.');
    assert.equal(firstCalc.messages.length, 2);

    const report = (endpoint: string, id: string) => {
      const parsed = instanceReportSchema.parse(readJsonFile(path.join(out, 'runs', endpoint, 'attempt-1', id, 'report.json')));
      assert.deepEqual(Object.keys(parsed), [id]);
      return parsed[id]!;
    };
    const resolved = report('local', 'c-resolve');
    assert.equal(resolved.resolved, true);
    assert.deepEqual(resolved.tests_status.FAIL_TO_PASS, { success: ['test_calc.CalcTest.test_add'], failure: [] });
    assert.deepEqual(resolved.tests_status.PASS_TO_PASS, { success: ['test_calc.CalcTest.test_mul'], failure: [] });
    const wrong = report('local', 'c-wrong');
    assert.equal(wrong.patch_successfully_applied, true);
    assert.equal(wrong.resolved, false);
    assert.deepEqual(wrong.tests_status.FAIL_TO_PASS.failure, ['test_calc.CalcTest.test_add']);
    const breaks = report('local', 'c-breaks');
    assert.equal(breaks.resolved, false);
    assert.deepEqual(breaks.tests_status.FAIL_TO_PASS.success, ['test_calc.CalcTest.test_add']);
    assert.deepEqual(breaks.tests_status.PASS_TO_PASS.failure, ['test_calc.CalcTest.test_mul']);
    const nothing = report('local', 'c-nothing');
    assert.deepEqual([nothing.patch_is_None, nothing.patch_exists, nothing.patch_successfully_applied, nothing.resolved], [false, false, false, false]);
    // The tests after an empty change do not run (they would be the tests before); the record says so.
    const nothingDir = path.join(out, 'runs/local/attempt-1/c-nothing');
    const nothingResult = JSON.parse(readFileSync(path.join(nothingDir, 'result.json'), 'utf8')) as { tests: { before: unknown; after: unknown; after_not_run: string | null } };
    assert.ok(nothingResult.tests.before, 'the tests before ran');
    assert.deepEqual([nothingResult.tests.after, nothingResult.tests.after_not_run], [null, 'no change']);
    assert.equal((JSON.parse(readFileSync(path.join(nothingDir, 'agent.json'), 'utf8')) as { tests_after_passed: boolean | null }).tests_after_passed, null);
    const node = report('local', 's-resolve');
    assert.equal(node.resolved, true, readFileSync(path.join(out, 'runs/local/attempt-1/s-resolve/test_output.txt'), 'utf8'));
    assert.deepEqual(node.tests_status.PASS_TO_PASS.success, ['test/sum.test.js::negates']);
    assert.equal(report('hosted', 'c-resolve').resolved, false);

    // predictions.jsonl: one line per instance and endpoint, SWE-bench's three fields.
    const predictions = readFileSync(path.join(out, 'predictions.jsonl'), 'utf8').trim().split('\n').map((l) => predictionSchema.parse(JSON.parse(l)));
    assert.equal(predictions.length, 10);
    const p = predictions.find((x) => x.instance_id === 'c-resolve' && x.model_name_or_path === 'local')!;
    assert.match(p.model_patch, /^\+    return a \+ b$/m);
    assert.equal(predictions.find((x) => x.instance_id === 'c-nothing' && x.model_name_or_path === 'local')!.model_patch, '');

    // The run report: SWE-bench's counts and id lists per model_name_or_path, plus the metrics.
    const runReport = readJsonFile(path.join(out, 'run-report.json')) as { models: Record<string, unknown>; complete: boolean; endpoints: Array<Record<string, unknown>>; instance_problems: unknown[] };
    const localRun = runReportSchema.parse(runReport.models['local']);
    assert.deepEqual(localRun.resolved_ids, ['c-resolve', 's-resolve']);
    assert.deepEqual(localRun.unresolved_ids, ['c-breaks', 'c-wrong']);
    assert.deepEqual(localRun.empty_patch_ids, ['c-nothing']);
    assert.equal(localRun.total_instances, 5);
    assert.equal(runReportSchema.parse(runReport.models['hosted']).resolved_instances, 0);
    // The same reports in the files SWE-bench's harness writes: <model>.<run_id>.json, counts at the top.
    const { run_id } = readJsonFile(path.join(out, 'eval-run.json')) as { run_id: string };
    assert.deepEqual(runReportSchema.parse(readJsonFile(path.join(out, `local.${run_id}.json`))), localRun);
    assert.equal(runReportSchema.parse(readJsonFile(path.join(out, `hosted.${run_id}.json`))).resolved_instances, 0);
    assert.equal(runReport.complete, true);
    assert.equal(runReport.instance_problems.length, 2);
    const [lm, hm] = runReport.endpoints as Array<{ endpoint: string; model: string; avg_at_k: number; cost_kind: string; total_cost: number; gpu_seconds: number; cost_per_resolved: number | null; mean_prompt_tokens: number }>;
    assert.equal(lm!.model, 'frognano-4b');
    assert.equal(hm!.model, 'hosted-model');
    assert.equal(lm!.avg_at_k, 0.4);
    assert.ok(Math.abs(lm!.total_cost - (lm!.gpu_seconds / 3600) * 2.5) < 1e-12);
    assert.equal(hm!.cost_per_resolved, null, 'nothing resolved: no cost per resolved issue');
    assert.ok(hm!.total_cost > 0 && hm!.mean_prompt_tokens > 0);

    // Human reports: a row per endpoint, the formulas, the plot.
    const md = readFileSync(path.join(out, 'report.md'), 'utf8');
    assert.match(md, /^\| local \| frognano-4b \| 5\/5 \| 40\.0% \(2 resolved\) \|/m);
    // Lilypad's evidence, as the app computes it: these patches add no test of their own and the
    // hidden FAIL_TO_PASS tests are not in the repository, so nothing is verified; nobody got stuck.
    assert.match(md, /\| verified \(of them resolved\) \| stuck \|/);
    assert.match(md, /^\| local \| .*\| – \| 0 \(0\) \| 0\.0% \|/m);
    const evidence = JSON.parse(readFileSync(path.join(out, 'runs/local/attempt-1/c-resolve/attempt.json'), 'utf8')).evidence;
    assert.equal(evidence.verdict, 'unverified');
    assert.match(md, /^\| hosted \| hosted-model \| 5\/5 \| 0\.0% \(0 resolved\) \|/m);
    assert.match(md, /GPU-seconds \/ 3600 × 2\.5 per GPU-hour/);
    assert.match(md, /line 5 \(c-no-cmd\): test_command: missing/);
    const html = readFileSync(path.join(out, 'report.html'), 'utf8');
    assert.match(html, /<svg xmlns="http:\/\/www.w3.org\/2000\/svg"[\s\S]*<circle [\s\S]*<\/svg>/);
    assert.ok(existsSync(path.join(out, 'runs/local/attempt-1/c-resolve/trajectory.jsonl')));
    assert.equal(await containersOfEval(out), 0);

    // Running again into the same directory without --resume is refused, with what to do.
    const again = await runEvalCli(['run', '--instances', file, '--endpoint', `local=${local.url}`, '--out', out]);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /already holds results of an eval run; add --resume to continue it, or choose another --out/);
  });

  test('judging: a patch that does not apply, a test patch that does not apply, and the gold patch', async () => {
    const docker = createDockerClient();
    const repos = new RepoCache(mkdtempSync(path.join(os.tmpdir(), 'lilypad-eval-repos-')), { protocol: 'https' });
    const [inst] = parseInstances(JSON.stringify(calcInstance(f, 'c-judge'))).instances;
    const sandbox = { image: 'lilypad-sandbox:latest', workdir: '/testbed', memoryMb: 512, cpus: 1, pids: 256, testTimeoutSeconds: 60 };
    const common = { instance: inst!, repos, docker, sandbox, runId: `eval-judge-test-${process.pid}`, labels: {} };
    // A patch made against other content (as from a model that wrote its diff by hand): its lines are not in calc.py.
    const stale = 'diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(x, y):\n-    return x - y\n+    return x + y\n';
    const noApply = await judgePatch({ ...common, patch: stale });
    assert.equal(noApply.report.patch_exists, true);
    assert.equal(noApply.report.patch_successfully_applied, false);
    assert.equal(noApply.report.resolved, false);
    assert.match(noApply.applyError ?? '', /patch does not apply|corrupt patch|while searching/);

    const gold = await judgePatch({ ...common, patch: f.calcGold });
    assert.equal(gold.report.resolved, true, gold.output);
    assert.equal(gold.command, 'python3 -m unittest -v test_calc.CalcTest.test_add test_calc.CalcTest.test_mul');
    assert.equal(gold.unreadOutput, undefined);

    // A runner eval cannot read per test (here one that prints what `go test` prints for a pytest-style id):
    // the judgement says so instead of only "FAIL_TO_PASS tests fail".
    const [goLike] = parseInstances(JSON.stringify({ ...calcInstance(f, 'c-unread'), test_command: `sh -c 'echo "malformed import path"; exit 1'` })).instances;
    const unread = await judgePatch({ ...common, instance: goLike!, patch: f.calcGold });
    assert.equal(unread.report.resolved, false);
    assert.match(unread.unreadOutput ?? '', /no per-test result could be read from `sh -c .*` \(exit 1; runner: not recognised from test_command\); lilypad eval reads pytest, unittest -v, node --test .* set test_framework .*the output starts: malformed import path/);

    const [badTests] = parseInstances(JSON.stringify({ ...calcInstance(f, 'c-bad-tp'), test_patch: f.calcTestPatch.replace('class CalcTest', 'class Other') })).instances;
    const tp = await judgePatch({ ...common, instance: badTests!, patch: f.calcGold });
    assert.match(tp.error ?? '', /the instance's test_patch does not apply/);
    assert.equal(tp.report.resolved, false);
  });

  test('bad command lines get a clear error and exit 2', async () => {
    let run = await runEvalCli(['run']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /--instances FILE.jsonl is required/);
    run = await runEvalCli(['run', '--instances', '/nonexistent.jsonl']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /cannot read --instances \/nonexistent.jsonl: no such file/);
    run = await runEvalCli(['run', '--instances', 'x.jsonl', '--select']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /--select chooses among attempts: give --attempts 2 or more/);
    run = await runEvalCli(['run', '--instances', 'x.jsonl', '--endpoint', 'local=http://127.0.0.1:1/v1,gpu_hour_cost=lots']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /--endpoint local: gpu_hour_cost must be a number/);
    run = await runEvalCli(['frobnicate']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /unknown eval command "frobnicate"/);
    // An endpoint that is down: the error names the --endpoint to check, not environment variables eval does not read.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-eval-down-'));
    const file = writeInstances(dir, [calcInstance(f, 'c-down')]);
    run = await runEvalCli(['run', '--instances', file, '--out', path.join(dir, 'out'), '--endpoint', 'down=http://127.0.0.1:9/v1'], { LILYPAD_MODEL_RETRIES: '0' });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /could not list models at http:\/\/127\.0\.0\.1:9\/v1\/models: .*Check the URL of --endpoint down \(it should end in \/v1\) and that the server is running, or set model= in --endpoint down\./);
    assert.match(run.stdout, /^down: resolve rate – \(0\/1 attempts, 1 not run or not judged: see the lines above and report\.md\)$/m);
  });
});
