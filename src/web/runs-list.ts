import type { QueueSummary } from '../observability/metrics.ts';
import { RUN_OUTCOMES, type RunSummary } from '../observability/run-store.ts';
import { esc, formatCount, formatMs, formatTime, page, type PageFrame } from './html.ts';
import { outcomeBadge } from './run-page.ts';

export const LIST_OUTCOMES = ['running', ...RUN_OUTCOMES] as const;

export interface RunsListInput {
  runs: RunSummary[];
  /** Repositories the user may read among the stored runs (for the filter). */
  repos: string[];
  filter: { repo: string; outcome: string };
  /** Null when Redis could not be read; 'hidden' for viewers without write access anywhere. */
  queue: QueueSummary | null | 'hidden';
  /** Why some runs may be missing (an installation GitHub did not list), shown above the table. */
  notices?: string[];
  githubWeb: string;
  user?: PageFrame['user'];
}

export function renderRunsList(input: RunsListInput): string {
  const q = input.queue;
  const queue = q === 'hidden'
    ? ''
    : q
    ? `<section><h2>Queue</h2><dl class="queue" id="queue"><dt>Waiting</dt><dd>${q.waiting}</dd><dt>Active</dt><dd>${q.active}</dd><dt>Delayed</dt><dd>${q.delayed}</dd><dt>Failed</dt><dd>${q.failed}</dd><dt>Oldest waiting</dt><dd>${q.oldestWaitingSeconds === null ? '—' : esc(formatMs(q.oldestWaitingSeconds * 1000))}</dd></dl></section>`
    : '<section><h2>Queue</h2><p class="error">The queue could not be read from Redis.</p></section>';
  const notices = (input.notices ?? []).map((n) => `<p class="error notice">${esc(n)}</p>`).join('');
  const option = (value: string, label: string, selected: string) => `<option value="${esc(value)}"${value === selected ? ' selected' : ''}>${esc(label)}</option>`;
  const filters =
    `<form class="filters" method="get" action="/runs"><label>Repository <select name="repo">${option('', 'all', input.filter.repo)}${input.repos.map((r) => option(r, r, input.filter.repo)).join('')}</select></label>` +
    `<label>Outcome <select name="outcome">${option('', 'all', input.filter.outcome)}${LIST_OUTCOMES.map((o) => option(o, o.replace('_', ' '), input.filter.outcome)).join('')}</select></label><button type="submit">Filter</button></form>`;
  const rows = input.runs
    .map((r) => {
      const end = r.finishedAt ? Date.parse(r.finishedAt) : Date.now();
      const pr = r.pr ? ` · <a href="${esc(r.pr.url)}">PR #${r.pr.number}</a>` : '';
      return (
        `<tr class="run-row"><td><a href="/runs/${encodeURIComponent(r.runId)}">${esc(formatTime(r.startedAt))}</a></td><td>${esc(`${r.owner}/${r.repo}`)}</td>` +
        `<td><a href="${esc(`${input.githubWeb}/${r.owner}/${r.repo}/issues/${r.issueNumber}`)}">#${r.issueNumber}</a>${pr}</td><td>${outcomeBadge(r.outcome, r.finishedAt === null)}</td>` +
        `<td>${esc(formatMs(end - Date.parse(r.startedAt)))}</td><td>${r.steps}</td><td>${esc(formatCount(r.promptTokens + r.completionTokens))} <span class="muted">(${esc(formatCount(r.cachedTokens))} cached)</span></td></tr>`
      );
    })
    .join('');
  const table = rows
    ? `<table class="runs" id="runs"><thead><tr><th>started</th><th>repository</th><th>issue / PR</th><th>outcome</th><th>duration</th><th>steps</th><th>tokens</th></tr></thead><tbody>${rows}</tbody></table>`
    : '<p class="muted" id="runs">No runs you can see match.</p>';
  return page({ title: 'Lilypad runs', user: input.user }, `<h1>Runs</h1>${queue}<section>${notices}${filters}${table}</section>`);
}
