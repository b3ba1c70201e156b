import type { Revision } from '../store/pull-records.ts';
import type { TestOutcome } from '../test-results/test-outcome.ts';

export type { Revision };

const BEGIN = '<!-- lilypad:revisions -->';
const END = '<!-- /lilypad:revisions -->';

export function testWord(t: TestOutcome | null | undefined, notRun?: string | null): string {
  if (!t) return notRun ? `not run: ${notRun}` : 'not run';
  return t.outcome === 'passed' ? '✅ passed' : t.outcome === 'failed' ? '❌ failed' : `⚠️ ${t.outcome.replace('_', ' ')}`;
}

/** The "Revisions" section of the pull request body: one row per revision, newest last. */
export function renderRevisions(revisions: readonly Revision[], commitUrl: (sha: string) => string): string {
  const rows = revisions.map(
    (r, i) =>
      `| ${i + 1} | ${r.trigger.replace(/\|/g, '\\|')} | [\`${r.sha.slice(0, 7)}\`](${commitUrl(r.sha)}) | ${r.testsBefore} | ${r.testsAfter} | ${r.steps} | ${r.tokens} | ${Math.round(r.seconds)} s |`,
  );
  return `${BEGIN}\n### Revisions\n\n| # | trigger | commit | tests before | tests after | steps | tokens | time |\n|---|---|---|---|---|---|---|---|\n${rows.join('\n')}\n${END}`;
}

/** The body with its Revisions section replaced, or added before the closing notice when it has none. */
export function withRevisions(body: string, section: string): string {
  const start = body.indexOf(BEGIN);
  const end = body.indexOf(END);
  if (start >= 0 && end > start) return `${body.slice(0, start)}${section}${body.slice(end + END.length)}`;
  const notice = body.lastIndexOf('\n---\n');
  if (notice >= 0) return `${body.slice(0, notice)}\n\n${section}\n${body.slice(notice)}`;
  return `${body}\n\n${section}`;
}
