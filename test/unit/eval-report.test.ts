import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { endpointMetrics } from '../../src/eval/metrics.ts';
import { renderCostPlot, sweBenchRunReport } from '../../src/eval/report.ts';
import type { AttemptRecord } from '../../src/eval/store.ts';

const rec = (instance_id: string, attempt: number, resolved: boolean, extra: Partial<AttemptRecord> = {}): AttemptRecord => ({
  fingerprint: 'f',
  instance_id,
  endpoint: 'local',
  attempt,
  model: 'frognano-4b',
  exit_reason: 'agent',
  prompt_tokens: 1000,
  completion_tokens: 100,
  model_seconds: 36,
  agent_ms: 2000,
  steps: 3,
  tests_after_passed: resolved,
  patch_bytes: 10,
  infra_error: false,
  resolved,
  judge_ms: 1000,
  test_command: 'x',
  cost: null,
  ...extra,
});
const patch = (line: string) => `diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -1 +1 @@\n-old\n+${line}\n`;

describe('eval metrics', () => {
  test('Avg@k, pass@k, the selected attempt, and cost per resolved issue', () => {
    // i1: 2 of 3 resolve (same change); i2: none resolve; i3: one of 3 resolves, and it is the one whose tests passed.
    const records = [
      rec('i1', 0, true),
      rec('i1', 1, false),
      rec('i1', 2, true),
      rec('i2', 0, false),
      rec('i2', 1, false),
      rec('i2', 2, false),
      rec('i3', 0, false),
      rec('i3', 1, true),
      rec('i3', 2, false),
    ];
    const patches = new Map<string, string | null>([
      ['i1#0', patch('fix')],
      ['i1#1', patch('wrong')],
      ['i1#2', patch('fix')],
      ['i2#0', null],
      ['i2#1', patch('a')],
      ['i2#2', patch('b')],
      ['i3#0', patch('x')],
      ['i3#1', patch('y')],
      ['i3#2', patch('x')],
    ]);
    const m = endpointMetrics({ endpoint: 'local', cost: { kind: 'gpu_hour', gpuHourCost: 2 }, instanceIds: ['i1', 'i2', 'i3'], k: 3, records: records.map((r) => ({ ...r, cost: 0.02 })), patches, select: true });
    assert.equal(m.resolved_attempts, 3);
    assert.ok(Math.abs(m.avg_at_k! - (2 / 3 + 0 + 1 / 3) / 3) < 1e-9);
    assert.equal(m.pass_at_k, 2 / 3);
    // i1: agreement picks the resolving cluster; i3: tests after pick attempt 2; i2: nothing resolves.
    assert.equal(m.selections!['i1']!.winner, 0);
    assert.equal(m.selections!['i3']!.winner, 1);
    assert.equal(m.selected_resolved, 2);
    assert.equal(m.selected_resolve_rate, 2 / 3);
    assert.ok(Math.abs(m.total_cost! - 0.18) < 1e-9);
    assert.ok(Math.abs(m.cost_per_resolved! - 0.06) < 1e-9);
    assert.ok(Math.abs(m.cost_per_resolved_selected! - 0.09) < 1e-9);
    assert.equal(m.gpu_seconds, 9 * 36);
    assert.equal(m.mean_prompt_tokens, 1000);
  });

  test('attempts Lilypad could not run count as errors, not as unresolved', () => {
    const m = endpointMetrics({ endpoint: 'x', cost: { kind: 'none' }, instanceIds: ['a', 'b'], k: 1, records: [rec('a', 0, true), rec('b', 0, false, { infra_error: true })], select: false });
    assert.equal(m.avg_at_k, 1);
    assert.equal(m.errors, 1);
    assert.equal(m.total_cost, null);
    assert.equal(m.attempts_done, 2);
  });
});

describe("SWE-bench's run report", () => {
  test('counts and id lists', () => {
    const attempts = new Map([
      ['r', { record: rec('r', 0, true), patchExists: true }],
      ['u', { record: rec('u', 0, false), patchExists: true }],
      ['e', { record: rec('e', 0, false), patchExists: false }],
      ['x', { record: rec('x', 0, false, { judge_error: 'test_patch does not apply' }), patchExists: true }],
    ]);
    const r = sweBenchRunReport(['u', 'r', 'e', 'x', 'missing'], attempts);
    assert.deepEqual(
      { ...r },
      {
        total_instances: 5,
        submitted_instances: 4,
        completed_instances: 2,
        resolved_instances: 1,
        unresolved_instances: 1,
        empty_patch_instances: 1,
        error_instances: 1,
        completed_ids: ['r', 'u'],
        incomplete_ids: ['missing'],
        empty_patch_ids: ['e'],
        submitted_ids: ['e', 'r', 'u', 'x'],
        resolved_ids: ['r'],
        unresolved_ids: ['u'],
        error_ids: ['x'],
        schema_version: 2,
      },
    );
  });

  test('the cost plot has one point per endpoint and one for best of k, with escaped labels', () => {
    const m = endpointMetrics({ endpoint: 'a<b', cost: { kind: 'tokens', inputCost: 1, outputCost: 1 }, instanceIds: ['i'], k: 2, records: [rec('i', 0, true, { cost: 1 }), rec('i', 1, false, { cost: 1 })], patches: new Map([['i#0', patch('x')], ['i#1', null]]), select: true });
    const svg = renderCostPlot([m], true);
    assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.equal((svg.match(/<circle /g) ?? []).length, 2);
    assert.match(svg, /a&lt;b best-of-2 \(100\.0%\)/);
    assert.doesNotMatch(svg, /a<b/);
  });
});
