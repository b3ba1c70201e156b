import type { EndpointMetrics } from './metrics.ts';
import type { InstanceProblem } from './instance.ts';
import type { AttemptRecord, GoldRecord } from './store.ts';

/** SWE-bench's run report for one model_name_or_path (schema_version 2 fields). */
export interface SweBenchRunReport {
  total_instances: number;
  submitted_instances: number;
  completed_instances: number;
  resolved_instances: number;
  unresolved_instances: number;
  empty_patch_instances: number;
  error_instances: number;
  completed_ids: string[];
  incomplete_ids: string[];
  empty_patch_ids: string[];
  submitted_ids: string[];
  resolved_ids: string[];
  unresolved_ids: string[];
  error_ids: string[];
  schema_version: 2;
}

export interface ReportedAttempt {
  record: AttemptRecord;
  patchExists: boolean;
}

/** Counts and id lists as SWE-bench's `make_run_report` writes them, for one set of predictions. */
export function sweBenchRunReport(instanceIds: string[], attempts: Map<string, ReportedAttempt>): SweBenchRunReport {
  const sorted = (xs: string[]) => [...xs].sort();
  const submitted: string[] = [];
  const completed: string[] = [];
  const resolved: string[] = [];
  const unresolved: string[] = [];
  const emptyPatch: string[] = [];
  const errors: string[] = [];
  for (const id of instanceIds) {
    const a = attempts.get(id);
    if (!a) continue;
    if (a.record.infra_error || a.record.judge_error) {
      errors.push(id);
      if (!a.record.infra_error) submitted.push(id);
      continue;
    }
    submitted.push(id);
    if (!a.patchExists) {
      emptyPatch.push(id);
      continue;
    }
    completed.push(id);
    (a.record.resolved ? resolved : unresolved).push(id);
  }
  const accounted = new Set([...completed, ...emptyPatch, ...errors]);
  return {
    total_instances: instanceIds.length,
    submitted_instances: submitted.length,
    completed_instances: completed.length,
    resolved_instances: resolved.length,
    unresolved_instances: unresolved.length,
    empty_patch_instances: emptyPatch.length,
    error_instances: errors.length,
    completed_ids: sorted(completed),
    incomplete_ids: sorted(instanceIds.filter((id) => !accounted.has(id))),
    empty_patch_ids: sorted(emptyPatch),
    submitted_ids: sorted(submitted),
    resolved_ids: sorted(resolved),
    unresolved_ids: sorted(unresolved),
    error_ids: sorted(errors),
    schema_version: 2,
  };
}

export interface RunSummary {
  run_id: string;
  instances_file: string;
  started_at: string;
  finished_at: string;
  complete: boolean;
  interrupted: boolean;
  attempts: number;
  select: boolean;
  workers: number;
  endpoints: EndpointMetrics[];
  instance_problems: InstanceProblem[];
  validation: GoldRecord[] | null;
  /** Per instance and endpoint: the attempts' outcomes, for the tables. */
  outcomes: Array<{ instance_id: string; endpoint: string; resolved: boolean[]; selected: number | null; errors: number }>;
}

const pct = (x: number | null) => (x === null ? '–' : `${(x * 100).toFixed(1)}%`);
const num = (x: number | null, digits = 0) => (x === null ? '–' : x.toFixed(digits));
const money = (x: number | null) => (x === null ? '–' : x < 0.01 && x > 0 ? x.toExponential(2) : x.toFixed(4));
const duration = (s: number) => (s >= 3600 ? `${(s / 3600).toFixed(1)} h` : s >= 60 ? `${(s / 60).toFixed(1)} min` : `${s.toFixed(1)} s`);

function costCell(m: EndpointMetrics): string {
  const gpu = num(m.gpu_seconds, m.gpu_seconds < 10 ? 2 : 0);
  if (m.cost_kind === 'gpu_hour') return `${gpu} GPU-s = ${money(m.total_cost)}`;
  if (m.cost_kind === 'tokens') return money(m.total_cost);
  return `${gpu} GPU-s (no price)`;
}

export const COST_FORMULAS = [
  '- **GPU-hour price** (`gpu_hour_cost=X`): GPU-seconds of an attempt = the time the endpoint spent answering its model requests (the sum of the model-call times in its trajectory); cost = GPU-seconds / 3600 × X. Requests that overlapped on one server (`--workers` > 1) are each counted in full, so this is an upper bound for a single-GPU server.',
  '- **Token price** (`input_cost=X,output_cost=Y`, per million tokens): cost = prompt tokens / 10⁶ × X + completion tokens / 10⁶ × Y (cached prompt tokens are charged in full).',
  '- **Cost per resolved issue** = total cost of all attempts / resolved attempts; with `--select`, also total cost of all k attempts / issues whose selected attempt resolved (what the app delivers with `attempts: k`).',
  '- **Avg@k** = mean over instances of (resolved attempts / k); **pass@k** = share of instances with at least one resolved attempt; **selected** = share of instances whose attempt chosen by best-of-k selection (tests after → agreement → smallest diff) resolved.',
];

export function renderMarkdown(s: RunSummary, svgFile: string): string {
  const out: string[] = [];
  out.push(`# lilypad eval: ${s.run_id}`, '');
  out.push(
    `${s.complete ? 'Complete' : s.interrupted ? '**Interrupted: partial results**' : '**Incomplete**'}. Instances: \`${s.instances_file}\`; ${s.attempts} attempt(s) per instance and endpoint${s.select ? ', best-of-k selection' : ''}; ${s.workers} worker(s); ${s.started_at} – ${s.finished_at}.`,
    '',
  );
  out.push(
    '| endpoint | model | done | resolve rate (Avg@k) | pass@k | selected | verified (of them resolved) | stuck | mean prompt tokens | mean completion tokens | wall time (sum of attempts) | GPU time / cost | cost per resolved issue |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const m of s.endpoints) {
    const perResolved = s.select ? `${money(m.cost_per_resolved)} (selected: ${money(m.cost_per_resolved_selected)})` : money(m.cost_per_resolved);
    out.push(
      `| ${m.endpoint} | ${m.model ?? '–'} | ${m.attempts_done}/${m.attempts_expected} | ${pct(m.avg_at_k)} (${m.resolved_attempts} resolved) | ${pct(m.pass_at_k)} | ${s.select ? pct(m.selected_resolve_rate) : '–'} | ${m.verified_attempts} (${m.verified_resolved})${m.reproductions_kept !== null ? `, ${m.reproductions_kept} reproduced` : ''} | ${pct(m.stuck_rate)} | ${num(m.mean_prompt_tokens)} | ${num(m.mean_completion_tokens)} | ${duration(m.wall_seconds)} | ${costCell(m)} | ${perResolved} |`,
    );
  }
  out.push('', `![resolve rate against cost](${svgFile})`, '', '## How cost is counted', '');
  for (const m of s.endpoints) out.push(`- \`${m.endpoint}\`: ${m.cost_formula}`);
  out.push('', ...COST_FORMULAS, '', '## Per instance', '');
  out.push('| instance | endpoint | attempts resolved | selected |', '|---|---|---|---|');
  for (const o of s.outcomes) {
    const marks = o.resolved.map((r) => (r ? '✔' : '✘')).join(' ');
    out.push(`| ${o.instance_id} | ${o.endpoint} | ${marks || '–'}${o.errors ? ` (${o.errors} error)` : ''} | ${o.selected === null ? '–' : `#${o.selected + 1}`} |`);
  }
  if (s.validation) {
    out.push('', '## Validation with the gold patch', '', '| instance | valid | problems |', '|---|---|---|');
    for (const v of s.validation) out.push(`| ${v.instance_id} | ${v.valid ? 'yes' : 'no'} | ${v.problems.join('; ').replace(/\|/g, '\\|') || '–'} |`);
  }
  if (s.instance_problems.length > 0) {
    out.push('', '## Instances not run (invalid)', '');
    for (const p of s.instance_problems) out.push(`- line ${p.line}${p.instance_id ? ` (${p.instance_id})` : ''}: ${p.message}`);
  }
  return `${out.join('\n')}\n`;
}

const esc = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Resolve rate against cost per attempted issue: one point per endpoint (and one for best of k). */
export function renderCostPlot(endpoints: EndpointMetrics[], select: boolean): string {
  const points: Array<{ label: string; x: number; y: number }> = [];
  for (const m of endpoints) {
    if (m.avg_at_k === null) continue;
    const x = m.cost_per_attempt ?? 0;
    points.push({ label: m.endpoint, x, y: m.avg_at_k });
    if (select && m.selected_resolve_rate !== null) points.push({ label: `${m.endpoint} best-of-${m.attempts_per_instance}`, x: x * m.attempts_per_instance, y: m.selected_resolve_rate });
  }
  const W = 560;
  const H = 340;
  const left = 64;
  const bottom = 48;
  const top = 20;
  const right = 24;
  const maxX = Math.max(...points.map((p) => p.x), 0) || 1;
  const sx = (x: number) => left + (x / (maxX * 1.1)) * (W - left - right);
  const sy = (y: number) => H - bottom - y * (H - bottom - top);
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  parts.push(`<title>Resolve rate against cost per attempted issue</title>`);
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(`<line x1="${left}" y1="${H - bottom}" x2="${W - right}" y2="${H - bottom}" stroke="black"/>`);
  parts.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${H - bottom}" stroke="black"/>`);
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    parts.push(`<line x1="${left - 4}" y1="${sy(t)}" x2="${W - right}" y2="${sy(t)}" stroke="#ddd"/>`);
    parts.push(`<text x="${left - 8}" y="${sy(t) + 4}" text-anchor="end">${t * 100}%</text>`);
  }
  for (let i = 0; i <= 4; i++) {
    const v = (maxX * 1.1 * i) / 4;
    parts.push(`<text x="${sx(v)}" y="${H - bottom + 16}" text-anchor="middle">${esc(money(v))}</text>`);
  }
  parts.push(`<text x="${(left + W - right) / 2}" y="${H - 10}" text-anchor="middle">cost per attempted issue</text>`);
  parts.push(`<text transform="translate(14 ${(top + H - bottom) / 2}) rotate(-90)" text-anchor="middle">resolve rate</text>`);
  const colours = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
  points.forEach((p, i) => {
    const c = colours[i % colours.length]!;
    parts.push(`<circle cx="${sx(p.x).toFixed(1)}" cy="${sy(p.y).toFixed(1)}" r="5" fill="${c}"><title>${esc(`${p.label}: ${pct(p.y)} at ${money(p.x)}`)}</title></circle>`);
    parts.push(`<text x="${(sx(p.x) + 8).toFixed(1)}" y="${(sy(p.y) - 8).toFixed(1)}" fill="${c}">${esc(`${p.label} (${pct(p.y)})`)}</text>`);
  });
  if (points.length === 0) parts.push(`<text x="${W / 2}" y="${H / 2}" text-anchor="middle">no finished attempts yet</text>`);
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** The same content as report.md as a standalone page, with the plot inline. */
export function renderHtml(s: RunSummary, svg: string): string {
  const rows = s.endpoints
    .map(
      (m) =>
        `<tr><td>${esc(m.endpoint)}</td><td>${esc(m.model ?? '–')}</td><td>${m.attempts_done}/${m.attempts_expected}</td><td>${pct(m.avg_at_k)} (${m.resolved_attempts})</td><td>${pct(m.pass_at_k)}</td><td>${s.select ? pct(m.selected_resolve_rate) : '–'}</td><td>${m.verified_attempts} (${m.verified_resolved})</td><td>${pct(m.stuck_rate)}</td><td>${num(m.mean_prompt_tokens)}</td><td>${num(m.mean_completion_tokens)}</td><td>${duration(m.wall_seconds)}</td><td>${esc(costCell(m))}</td><td>${money(m.cost_per_resolved)}${s.select ? ` (selected: ${money(m.cost_per_resolved_selected)})` : ''}</td></tr>`,
    )
    .join('\n');
  const outcomeRows = s.outcomes
    .map(
      (o) =>
        `<tr><td>${esc(o.instance_id)}</td><td>${esc(o.endpoint)}</td><td>${o.resolved.map((r) => (r ? '✔' : '✘')).join(' ') || '–'}${o.errors ? ` (${o.errors} error)` : ''}</td><td>${o.selected === null ? '–' : `#${o.selected + 1}`}</td></tr>`,
    )
    .join('\n');
  const formulas = [...s.endpoints.map((m) => `<li><code>${esc(m.endpoint)}</code>: ${esc(m.cost_formula)}</li>`), ...COST_FORMULAS.map((f) => `<li>${esc(f.replace(/^- /, '').replace(/\*\*/g, '').replace(/`/g, ''))}</li>`)].join('\n');
  const validation = s.validation
    ? `<h2>Validation with the gold patch</h2><table><tr><th>instance</th><th>valid</th><th>problems</th></tr>${s.validation.map((v) => `<tr><td>${esc(v.instance_id)}</td><td>${v.valid ? 'yes' : 'no'}</td><td>${esc(v.problems.join('; ') || '–')}</td></tr>`).join('')}</table>`
    : '';
  const problems = s.instance_problems.length
    ? `<h2>Instances not run (invalid)</h2><ul>${s.instance_problems.map((p) => `<li>line ${p.line}${p.instance_id ? ` (${esc(p.instance_id)})` : ''}: ${esc(p.message)}</li>`).join('')}</ul>`
    : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>lilypad eval ${esc(s.run_id)}</title>
<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f4f4f4}</style>
</head><body>
<h1>lilypad eval: ${esc(s.run_id)}</h1>
<p>${s.complete ? 'Complete' : s.interrupted ? '<strong>Interrupted: partial results</strong>' : '<strong>Incomplete</strong>'}. Instances: <code>${esc(s.instances_file)}</code>; ${s.attempts} attempt(s) per instance and endpoint${s.select ? ', best-of-k selection' : ''}; ${s.workers} worker(s); ${esc(s.started_at)} – ${esc(s.finished_at)}.</p>
<table><tr><th>endpoint</th><th>model</th><th>done</th><th>resolve rate (Avg@k)</th><th>pass@k</th><th>selected</th><th>verified (of them resolved)</th><th>stuck</th><th>mean prompt tokens</th><th>mean completion tokens</th><th>wall time (sum of attempts)</th><th>GPU time / cost</th><th>cost per resolved issue</th></tr>
${rows}
</table>
${svg}
<h2>How cost is counted</h2><ul>${formulas}</ul>
<h2>Per instance</h2><table><tr><th>instance</th><th>endpoint</th><th>attempts resolved</th><th>selected</th></tr>
${outcomeRows}
</table>
${validation}
${problems}
</body></html>
`;
}
