import { describeCost, type CostModel } from './endpoint.ts';
import { rankAttempts, type RankCandidate, type Ranking } from '../evidence/rank.ts';
import type { AttemptRecord } from './store.ts';

export interface EndpointMetrics {
  endpoint: string;
  model: string | null;
  cost_formula: string;
  cost_kind: CostModel['kind'];
  instances: number;
  attempts_per_instance: number;
  attempts_done: number;
  attempts_expected: number;
  resolved_attempts: number;
  /** Mean over instances of (resolved attempts / attempts): the resolve rate of one attempt. */
  avg_at_k: number | null;
  /** Share of instances with at least one resolved attempt among k. */
  pass_at_k: number | null;
  /** Share of instances whose selected attempt (evidence/select-attempt.ts) resolved; null without --select. */
  selected_resolve_rate: number | null;
  selected_resolved: number | null;
  mean_prompt_tokens: number | null;
  mean_completion_tokens: number | null;
  /** Sum over attempts of agent plus judging time, in seconds. */
  wall_seconds: number;
  mean_attempt_seconds: number | null;
  /** Sum over attempts of the time the endpoint spent answering their requests. */
  gpu_seconds: number;
  total_cost: number | null;
  cost_per_attempt: number | null;
  /** Total cost / resolved attempts (each attempt delivered on its own). */
  cost_per_resolved: number | null;
  /** Total cost of all k attempts / instances the selected attempt resolved (best of k delivered). */
  cost_per_resolved_selected: number | null;
  errors: number;
  /** Attempts whose change Lilypad's evidence verified (the app's `lilypad:verified`), and how many of those resolved the instance. */
  verified_attempts: number;
  verified_resolved: number;
  /** Attempts that ended as `stuck` (going nowhere), of the attempts judged. */
  stuck_rate: number | null;
  /** With --reproduce: attempts whose reproduction run left a test that was kept (null: no reproduction runs). */
  reproductions_kept: number | null;
  selections: Record<string, Ranking> | null;
}

/** A record's evidence as the ranking reads it (counts stand in for the lists). */
function evidenceOf(r: AttemptRecord): RankCandidate['evidence'] {
  if (!r.evidence) return null;
  return { verdict: r.evidence.verdict, broken: Array.from({ length: r.evidence.broken }, () => ''), weakened: Array.from({ length: r.evidence.weakened }, () => ({ file: '', what: '' })) };
}

const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);

export function endpointMetrics(opts: {
  endpoint: string;
  cost: CostModel;
  instanceIds: string[];
  k: number;
  records: AttemptRecord[];
  /** Patches by `${instance_id}#${attempt}`, for selection. */
  patches?: Map<string, string | null>;
  select: boolean;
}): EndpointMetrics {
  const { records, k } = opts;
  const byInstance = new Map<string, AttemptRecord[]>();
  for (const r of records) byInstance.set(r.instance_id, [...(byInstance.get(r.instance_id) ?? []), r]);
  const judged = records.filter((r) => !r.infra_error);
  const perInstance = [...byInstance.values()].map((rs) => rs.filter((r) => !r.infra_error)).filter((rs) => rs.length > 0);
  const costs = judged.map((r) => r.cost).filter((c): c is number => c !== null);
  const total = opts.cost.kind === 'none' ? null : costs.reduce((a, b) => a + b, 0);
  const resolvedAttempts = judged.filter((r) => r.resolved).length;

  let selections: Record<string, Ranking> | null = null;
  let selectedResolved: number | null = null;
  let selectedOver = 0;
  if (opts.select) {
    selections = {};
    selectedResolved = 0;
    for (const [id, rs] of byInstance) {
      const done = rs.filter((r) => !r.infra_error).sort((a, b) => a.attempt - b.attempt);
      if (done.length === 0) continue;
      // The app's rule: evidence first (verified, nothing broken or weakened), then the tests, agreement, size.
      const sel = rankAttempts(done.map((r) => ({ index: r.attempt, patch: opts.patches?.get(`${id}#${r.attempt}`) ?? null, testsPassed: r.tests_after_passed, evidence: evidenceOf(r) })));
      selections[id] = sel;
      selectedOver++;
      if (sel.winner !== null && done.find((r) => r.attempt === sel.winner)?.resolved) selectedResolved++;
    }
  }
  return {
    endpoint: opts.endpoint,
    model: records.find((r) => r.model)?.model ?? null,
    cost_formula: describeCost(opts.cost),
    cost_kind: opts.cost.kind,
    instances: opts.instanceIds.length,
    attempts_per_instance: k,
    attempts_done: records.length,
    attempts_expected: opts.instanceIds.length * k,
    resolved_attempts: resolvedAttempts,
    avg_at_k: mean(perInstance.map((rs) => rs.filter((r) => r.resolved).length / rs.length)),
    pass_at_k: perInstance.length === 0 ? null : perInstance.filter((rs) => rs.some((r) => r.resolved)).length / perInstance.length,
    selected_resolve_rate: selectedResolved === null || selectedOver === 0 ? null : selectedResolved / selectedOver,
    selected_resolved: selectedResolved,
    mean_prompt_tokens: mean(judged.map((r) => r.prompt_tokens)),
    mean_completion_tokens: mean(judged.map((r) => r.completion_tokens)),
    wall_seconds: records.reduce((a, r) => a + (r.agent_ms + r.judge_ms) / 1000, 0),
    mean_attempt_seconds: mean(records.map((r) => (r.agent_ms + r.judge_ms) / 1000)),
    gpu_seconds: judged.reduce((a, r) => a + r.model_seconds, 0),
    total_cost: total,
    cost_per_attempt: total === null || judged.length === 0 ? null : total / judged.length,
    cost_per_resolved: total === null || resolvedAttempts === 0 ? null : total / resolvedAttempts,
    cost_per_resolved_selected: total === null || !selectedResolved ? null : total / selectedResolved,
    errors: records.filter((r) => r.infra_error || r.judge_error).length,
    verified_attempts: judged.filter((r) => r.evidence?.verdict === 'verified').length,
    verified_resolved: judged.filter((r) => r.evidence?.verdict === 'verified' && r.resolved).length,
    stuck_rate: judged.length === 0 ? null : judged.filter((r) => r.exit_reason === 'stuck').length / judged.length,
    reproductions_kept: judged.some((r) => r.reproduction_kept != null) ? judged.filter((r) => r.reproduction_kept === true).length : null,
    selections,
  };
}
