import { html as diffToHtml } from 'diff2html';
import type { LoadedRun, RunView } from '../observability/run-store.ts';
import { renderChart, type ChartPoint } from './chart.ts';
import { esc, formatCount, formatMs, formatTime, page, type PageFrame } from './html.ts';

type Step = RunView['steps'][number];
type Tests = RunView['tests']['before'];

export interface RunPageContext {
  /** The GitHub web origin (https://github.com or the GHE host), for issue and user links. */
  githubWeb: string;
  user?: PageFrame['user'];
  /**
   * The full view, for people with write access to the repository. Readers get the reader view:
   * no merged configuration (it can come from a private organisation `.github` repository) and
   * no worker host.
   */
  full: boolean;
}

/** The whole run page. Live runs carry the live script and the resume point for its event stream. */
export function renderRunPage(run: LoadedRun, ctx: RunPageContext): string {
  const v = run.view;
  const s = v.summary;
  const live = run.live;
  const body =
    `<article class="run" id="run" data-run="${esc(s.runId)}"${live ? ` data-live="1" data-events="/runs/${encodeURIComponent(s.runId)}/events?after=${encodeURIComponent(run.lastEventId)}"` : ''}>` +
    `<h1>${esc(`${s.owner}/${s.repo}`)} <a href="${esc(`${ctx.githubWeb}/${s.owner}/${s.repo}/issues/${s.issueNumber}`)}">#${s.issueNumber}</a> ${outcomeBadge(s.outcome, live)}</h1>` +
    `<section id="stats" class="stats">${renderStats(v, live, ctx.full)}</section>` +
    `<section id="finish">${renderFinish(v)}</section>` +
    `<section><h2>Context and step time</h2><div id="chart">${renderChart(chartPoints(v.steps))}</div></section>` +
    `<section><h2>Task, as the model got it</h2>${renderTask(v)}</section>` +
    `<section><h2>Configuration</h2>${ctx.full ? renderConfig(v) : '<p class="muted" id="config-hidden">Shown to people with write access to the repository.</p>'}</section>` +
    `<section id="tests">${renderTests(v)}</section>` +
    `<section id="warnings">${renderWarnings(v)}</section>` +
    `<section><h2>Timeline</h2><ol class="timeline" id="timeline">${v.steps.map(renderStep).join('')}</ol>${live ? '<p class="live-note" id="live-note">Live: new steps appear as the agent takes them.</p>' : ''}</section>` +
    `<section id="diff-section"><h2>Diff</h2>${renderDiff(v)}</section>` +
    `<section id="phases">${renderPhases(v)}</section>` +
    '</article>';
  return page(
    { title: `Lilypad run ${s.runId} · ${s.owner}/${s.repo}#${s.issueNumber}`, user: ctx.user, styles: ['/assets/diff2html.css'], scripts: live ? ['/assets/live.js'] : [] },
    body,
  );
}

export function outcomeBadge(outcome: string | null, live: boolean): string {
  const label = outcome ?? (live ? 'running' : 'unknown');
  return `<span class="badge badge-${esc(label)}">${esc(label.replace('_', ' '))}</span>`;
}

function chartPoints(steps: Step[]): ChartPoint[] {
  let context = 0;
  return steps.map((st) => {
    if (st.usage) context = st.usage.total_tokens;
    return { step: st.step, context, ms: st.model_ms + st.tools.reduce((a, t) => a + t.duration_ms, 0) };
  });
}

function renderStats(v: RunView, live: boolean, full: boolean): string {
  const s = v.summary;
  const end = s.finishedAt ? Date.parse(s.finishedAt) : Date.now();
  const pairs: Array<[string, string]> = [
    ['State', live ? 'running' : (s.outcome ?? 'unknown').replace('_', ' ')],
    ['Exit reason', s.exitReason ?? '—'],
    ['Started', formatTime(s.startedAt)],
    ['Duration', formatMs(end - Date.parse(s.startedAt))],
    ['Steps', String(s.steps)],
    ['Prompt tokens', formatCount(s.promptTokens)],
    ['Cached tokens', formatCount(s.cachedTokens)],
    ['Completion tokens', formatCount(s.completionTokens)],
    ['Triggered by', `@${s.triggeredBy}`],
    full ? ['Worker', `${s.workerId} (attempt ${s.attempt})`] : ['Attempt', String(s.attempt)],
  ];
  const pr = s.pr ? `<dt>Pull request</dt><dd><a href="${esc(s.pr.url)}">#${s.pr.number}</a></dd>` : '';
  return `<dl>${pairs.map(([k, val]) => `<dt>${esc(k)}</dt><dd>${esc(val)}</dd>`).join('')}${pr}</dl>`;
}

function renderFinish(v: RunView): string {
  const f = v.finish;
  if (!f) return '';
  return (f.why ? `<p class="why">${esc(f.why)}</p>` : '') + (f.error ? `<p class="error">${esc(f.error)}</p>` : '');
}

function renderTask(v: RunView): string {
  if (!v.task) return '<p class="muted">Not recorded yet.</p>';
  return `<details><summary>System message</summary><pre class="text">${esc(v.task.system)}</pre></details><h3>User message</h3><pre class="text" id="task-user">${esc(v.task.user)}</pre>`;
}

function renderConfig(v: RunView): string {
  if (!v.config) return '<p class="muted">Not recorded yet.</p>';
  return `<pre class="text config">${esc(JSON.stringify(v.config, null, 2))}</pre>`;
}

export function renderTests(v: RunView): string {
  const one = (label: string, t: Tests, notRun: string | undefined) => {
    if (!t) return `<div class="test"><h3>${label}</h3><p class="muted">Not run${notRun ? `: ${esc(notRun)}` : ''}.</p></div>`;
    const counts = t.counts ? Object.entries(t.counts).map(([k, n]) => `${n} ${k}`).join(', ') : '';
    return (
      `<div class="test test-${esc(t.outcome)}"><h3>${label}: <span class="badge badge-${esc(t.outcome)}">${esc(t.outcome.replace('_', ' '))}</span></h3>` +
      `<p><code>${esc(t.command)}</code> · exit ${esc(t.exitCode ?? '—')} · ${esc(formatMs(t.durationMs))}${counts ? ` · ${esc(counts)}` : ''}</p>` +
      renderChanges(t) +
      `<details><summary>Output (tail)</summary><pre class="text">${esc(t.outputTail)}</pre></details></div>`
    );
  };
  return `<h2>Tests</h2><div class="tests">${one('Before', v.tests.before, v.tests.notRun?.before)}${one('After', v.tests.after, v.tests.notRun?.after)}</div>`;
}

/** What changed per test, on the run after the change: fixed and broken by name, the rest counted. */
function renderChanges(t: NonNullable<Tests>): string {
  const c = t.changes;
  if (!c) return t.perTest && !t.perTest.parsed ? `<p class="muted">Per test: ${esc(t.perTest.reason)}</p>` : '';
  if (c.fallback) return `<p class="muted">Per test: ${esc(c.fallback)}</p>`;
  const names = (ids: string[]) => (ids.length ? ids.map((id) => `<code>${esc(id)}</code>`).join(', ') : 'none');
  return `<p class="per-test">Fixed: ${names(c.fixed)} · Broken: ${names(c.broken)} · still failing ${esc(c.stillFailing)} · passing ${esc(c.passing)}</p>`;
}

function renderWarnings(v: RunView): string {
  const retries = v.steps.flatMap((st) => st.retries.map((r) => ({ step: st.step, ...r })));
  const items = v.warnings.map((w) => `<li>${esc(w)}</li>`).join('');
  const notes = v.notes.map((n) => `<li class="note">${esc(n)}</li>`).join('');
  const rows = retries
    .map((r) => `<tr><td>${r.step}</td><td>${r.attempt}</td><td>${esc(r.status ?? '—')}</td><td>${esc(formatMs(r.waitMs))}</td><td>${esc(r.error)}</td></tr>`)
    .join('');
  return (
    `<h2>Retries and warnings</h2>` +
    (items || notes ? `<ul class="warnings">${items}${notes}</ul>` : '<p class="muted">No warnings.</p>') +
    (rows
      ? `<table class="retries"><thead><tr><th>step</th><th>attempt</th><th>HTTP</th><th>waited</th><th>error</th></tr></thead><tbody>${rows}</tbody></table>`
      : '<p class="muted">No model retries.</p>')
  );
}

export function renderStep(st: Step): string {
  const toolMs = st.tools.reduce((a, t) => a + t.duration_ms, 0);
  const u = st.usage;
  const tokens = u ? `${formatCount(u.prompt_tokens)} prompt (${formatCount(u.cached_tokens ?? 0)} cached) · ${formatCount(u.completion_tokens)} completion` : 'no usage reported';
  const reasoning = st.assistant.reasoning_content
    ? `<details class="reasoning"><summary>Reasoning (${formatCount(st.assistant.reasoning_content.length)} characters)</summary><pre class="text">${esc(st.assistant.reasoning_content)}</pre></details>`
    : '';
  const content = st.assistant.content ? `<pre class="text assistant">${esc(st.assistant.content)}</pre>` : '';
  const tools = st.tools
    .map(
      (t) =>
        `<div class="tool"><div class="tool-head"><span class="tool-name">${esc(t.name)}</span> <span class="muted">${esc(formatMs(t.duration_ms))}</span></div>` +
        `<pre class="text args">${esc(t.arguments)}</pre>` +
        `<details open><summary>Observation (${formatCount(t.observation.length)} characters)</summary><pre class="text observation">${esc(t.observation)}</pre></details></div>`,
    )
    .join('');
  const extras =
    (st.retries.length ? `<p class="retry-note">${st.retries.length} model retr${st.retries.length === 1 ? 'y' : 'ies'} before this answer</p>` : '') +
    st.warnings.map((w) => `<p class="warning">${esc(w)}</p>`).join('') +
    (st.rescued_tool_calls ? '<p class="warning">Tool calls were parsed from text by Lilypad (server parser off).</p>' : '') +
    (st.error ? `<p class="error">${esc(st.error)}</p>` : '');
  return (
    `<li class="step" id="step-${st.step}"><div class="step-head"><strong>Step ${st.step}</strong> <span class="muted">${esc(formatTime(st.started_at))}</span>` +
    ` · model ${esc(formatMs(st.model_ms))} · tools ${esc(formatMs(toolMs))} · <span class="tokens">${esc(tokens)}</span> · finish ${esc(st.finish_reason || '—')}</div>` +
    reasoning +
    content +
    tools +
    extras +
    '</li>'
  );
}

function renderDiff(v: RunView): string {
  const diff = v.finish?.diff;
  if (diff === undefined || diff === null) return `<p class="muted">${v.finish ? 'No change was taken from the sandbox.' : 'The diff is shown when the run has finished.'}</p>`;
  if (diff.trim() === '') return '<p class="muted">The agent changed nothing.</p>';
  return `<div class="diff">${diffToHtml(diff, { drawFileList: true, outputFormat: 'line-by-line', matching: 'none' })}</div>`;
}

function renderPhases(v: RunView): string {
  if (v.phases.length === 0) return '';
  return `<h2>Phases</h2><table class="phases"><tbody>${v.phases.map((p) => `<tr><td>${esc(p.name)}</td><td>${esc(formatMs(p.ms))}</td></tr>`).join('')}</tbody></table>`;
}

/** What the live page replaces after an event: section id → inner HTML. */
export function liveSections(v: RunView, full: boolean): Record<string, string> {
  return { stats: renderStats(v, true, full), chart: renderChart(chartPoints(v.steps)), tests: renderTests(v), warnings: renderWarnings(v) };
}
