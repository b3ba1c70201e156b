import { esc, formatCount, formatMs } from './html.ts';

export interface ChartPoint {
  step: number;
  /** Tokens in the context after the step (prompt + completion). */
  context: number;
  /** Model time plus tool time of the step. */
  ms: number;
}

const W = 720;
const H = 220;
const PAD = { left: 64, right: 64, top: 16, bottom: 34 };

/**
 * A small SVG: context size per step as a line (left axis), step time as bars (right axis).
 * Server-rendered; presentation attributes only (no inline styles, so a strict CSP holds).
 */
export function renderChart(points: ChartPoint[]): string {
  if (points.length === 0) return '<p class="muted">No steps yet.</p>';
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  const maxCtx = niceMax(Math.max(...points.map((p) => p.context), 1));
  const maxMs = niceMax(Math.max(...points.map((p) => p.ms), 1));
  const n = points.length;
  const slot = innerW / n;
  const x = (i: number) => PAD.left + slot * (i + 0.5);
  const yCtx = (v: number) => PAD.top + innerH - (v / maxCtx) * innerH;
  const yMs = (v: number) => PAD.top + innerH - (v / maxMs) * innerH;
  const barW = Math.max(1, Math.min(18, slot * 0.6));
  const bars = points
    .map((p, i) => {
      const y = yMs(p.ms);
      return `<rect class="bar" x="${(x(i) - barW / 2).toFixed(1)}" y="${y.toFixed(1)}" width="${barW.toFixed(1)}" height="${(PAD.top + innerH - y).toFixed(1)}" fill="#c7d7f0"><title>step ${p.step}: ${esc(formatMs(p.ms))}</title></rect>`;
    })
    .join('');
  const line = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${yCtx(p.context).toFixed(1)}`).join(' ');
  const dots =
    n <= 60
      ? points.map((p, i) => `<circle cx="${x(i).toFixed(1)}" cy="${yCtx(p.context).toFixed(1)}" r="2.5" fill="#2e7d32"><title>step ${p.step}: ${formatCount(p.context)} tokens</title></circle>`).join('')
      : '';
  const ticks = [0, 0.5, 1]
    .map((f) => {
      const y = PAD.top + innerH - f * innerH;
      return (
        `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${y}" y2="${y}" stroke="#e3e3e3"/>` +
        `<text x="${PAD.left - 6}" y="${y + 4}" text-anchor="end" font-size="11" fill="#2e7d32">${esc(compact(f * maxCtx))}</text>` +
        `<text x="${W - PAD.right + 6}" y="${y + 4}" font-size="11" fill="#3b6fb6">${esc(formatMs(f * maxMs))}</text>`
      );
    })
    .join('');
  const every = Math.max(1, Math.ceil(n / 15));
  const labels = points
    .map((p, i) => (i % every === 0 || i === n - 1 ? `<text x="${x(i).toFixed(1)}" y="${H - PAD.bottom + 14}" text-anchor="middle" font-size="10" fill="#555">${p.step}</text>` : ''))
    .join('');
  return (
    `<svg class="chart" role="img" aria-label="Context size and step time per step" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" xmlns="http://www.w3.org/2000/svg">` +
    ticks +
    bars +
    `<path class="context-line" d="${line}" fill="none" stroke="#2e7d32" stroke-width="2"/>` +
    dots +
    labels +
    `<text x="${PAD.left}" y="${H - 4}" font-size="11" fill="#2e7d32">— context (tokens)</text>` +
    `<text x="${W - PAD.right}" y="${H - 4}" text-anchor="end" font-size="11" fill="#3b6fb6">▮ step time</text>` +
    `<text x="${W / 2}" y="${H - 4}" text-anchor="middle" font-size="11" fill="#555">step</text>` +
    '</svg>'
  );
}

function niceMax(v: number): number {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function compact(v: number): string {
  if (v >= 1_000_000) return `${(v / 1_000_000).toFixed(1)}M`;
  if (v >= 1000) return `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)}k`;
  return String(Math.round(v));
}
