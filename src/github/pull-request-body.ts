import { escapeMentions } from '../shared/escape-mentions.ts';
import type { TestOutcome } from '../test-results/test-outcome.ts';
import { groupLeftOut, type LeftOutPath } from '../workspace/leftovers.ts';
import { whyUnfinished } from './status-comment.ts';
import { fenceFor } from '../shared/markdown.ts';

export interface PullRequestBodyInput {
  issueNumber: number;
  issueTitle: string;
  summary: string;
  files: Array<{ path: string; added: number | null; removed: number | null }>;
  dropped: Array<{ path: string; reason: string }>;
  /** Files in the sandbox's working tree that were not taken into the patch (build leftovers, setup output). */
  leftOut?: readonly LeftOutPath[];
  tests: { before: TestOutcome | null; after: TestOutcome | null; perTest?: PerTestChanges | null | undefined } | null;
  /** What shows the change fixes the issue: computed by Lilypad from the tests, never by the model. */
  evidence?: EvidenceSummary | null | undefined;
  /** Where setup and tests came from when inferred ("Tests inferred from `pyproject.toml`; write ..."). */
  origin?: string | null | undefined;
  /** What setup did that a reviewer should know (an inferred command failed, a kept environment reused). */
  setupNotes?: string[] | undefined;
  run: { model: string; steps: number; promptTokens: number; completionTokens: number; seconds: number; exitReason: string; image: string; runId: string; runUrl?: string | undefined };
  incomplete: boolean;
  warnings: string[];
  /** Lilypad's commits carry [skip ci] until a writer releases them. */
  ciHeld?: boolean;
  /** Best of k: every attempt, the chosen one marked, and the rule that chose it. */
  attempts?: { rows: Array<{ attempt: number; exitReason: string; evidence?: string | null; testsAfter: string; steps: number; tokens: number; changedFiles: number; chosen: boolean; note: string }>; summary: string };
}

export interface EvidenceSummary {
  verdict: 'verified' | 'unverified' | 'failing';
  reproduction: string[];
  fixed: string[];
  broken: string[];
  weakened: Array<{ file: string; test?: string | undefined; what: string }>;
  notes: string[];
  /** The change's own test files, and the command that ran just them on the base code and with the change. */
  changeTests: { files: string[]; command: string } | null;
  /** Where a reproduction test came from (`reproduce: true`), said right after the verdict. */
  reproductionRun?: string | null | undefined;
  /** Tests that passed in the agent's own sandbox and fail on this change in a fresh one, and what the agent wrote outside the change. */
  disagreement?: { tests: string[]; outside: string[]; outsideMore: number } | null | undefined;
}

/** What changed per test between the tests on the untouched code and on the change. */
export interface PerTestChanges {
  fixed: string[];
  broken: string[];
  stillFailing: number;
  passing: number;
  /** Why the runs could not be compared per test (the exit codes judge then). */
  fallback: string | null;
}

const MAX_BODY = 60_000;
/** Tests named in the body, per list; the rest are counted. */
const MAX_NAMED = 30;

export const MACHINE_WRITTEN_NOTICE =
  '**This change was written by a machine.** It may be incorrect or insecure even when the tests pass. ' +
  'It needs review by a qualified person and independent regression and security testing before it is merged. ' +
  'Lilypad never marks its pull requests ready, approves or merges them.';

/** The draft pull request's body: what changed, how it was tested, how it was made, and a warning. */
export function renderPullRequestBody(input: PullRequestBodyInput): string {
  const parts: string[] = [];
  if (input.incomplete) {
    parts.push(
      `> [!WARNING]\n> **Incomplete.** The run stopped because ${whyUnfinished(input.run.exitReason)} before the agent finished. This draft keeps the work done so far; it is not a finished fix.`,
    );
  }
  parts.push(`### Summary\n\n${quoteUntrusted(input.summary) || '_The agent gave no summary._'}`);

  const fileLines = input.files.map((f) => `- \`${f.path}\`${f.added !== null ? ` (+${f.added} −${f.removed ?? 0})` : ' (binary)'}`);
  parts.push(`### Files changed\n\n${fileLines.join('\n') || '_none_'}`);
  if (input.leftOut && input.leftOut.length > 0) parts.push(renderLeftOut(input.leftOut));
  if (input.dropped.length > 0) {
    parts.push(
      `### Left out of this pull request\n\n${input.dropped.map((d) => `- \`${d.path}\`: ${d.reason}`).join('\n')}\n\nThe agent changed these files, but Lilypad does not publish such changes; apply them by hand if they are wanted.`,
    );
  }

  if (input.evidence) parts.push(renderEvidence(input.evidence));
  parts.push(renderTests(input));

  const r = input.run;
  parts.push(
    `### Run\n\n| model | steps | tokens (prompt / completion) | time | exit reason | image |\n|---|---|---|---|---|---|\n` +
      `| \`${r.model}\` | ${r.steps} | ${r.promptTokens} / ${r.completionTokens} | ${formatSeconds(r.seconds)} | \`${r.exitReason}\` | \`${r.image}\` |` +
      (r.runUrl ? `\n\nEvery step the agent took, what it ran and what the tests said: [the run page](${r.runUrl}).` : ''),
  );
  if (input.attempts) {
    const rows = input.attempts.rows.map(
      (a) => `| ${a.attempt}${a.chosen ? ' ✔ chosen' : ''} | \`${a.exitReason}\` | ${a.evidence ?? '—'} | ${a.testsAfter} | ${a.steps} | ${a.tokens} | ${a.changedFiles} | ${escapeMentions(a.note).replace(/\|/g, '\\|')} |`,
    );
    parts.push(
      `### Attempts\n\nLilypad ran ${input.attempts.rows.length} attempts in parallel and published one. ${escapeMentions(input.attempts.summary)} The other attempts' patches are kept with the run.\n\n` +
        `| attempt | exit reason | evidence | tests after | steps | tokens | files changed | note |\n|---|---|---|---|---|---|---|---|\n${rows.join('\n')}`,
    );
  }
  if (input.ciHeld) {
    parts.push(
      '### CI is on hold\n\nLilypad\'s commits carry `[skip ci]`, so no CI workflow has run this machine-written code (CI runs with the repository\'s secrets). ' +
        'After reading the change, someone with write access can release it by commenting `/lilypad ci` on this pull request (Lilypad then pushes an empty commit without the marker), or by pushing a commit of their own.',
    );
  }
  if (input.warnings.length > 0) parts.push(`<details><summary>Warnings (${input.warnings.length})</summary>\n\n${input.warnings.map((w) => `- ${escapeMentions(w)}`).join('\n')}\n\n</details>`);
  parts.push(`---\n\n${MACHINE_WRITTEN_NOTICE}`);
  parts.push(`Closes #${input.issueNumber}`);

  let body = parts.join('\n\n');
  if (body.length > MAX_BODY) body = `${body.slice(0, MAX_BODY - 200)}\n\n… (cut to fit GitHub's limit)\n\nCloses #${input.issueNumber}`;
  return body;
}

/** By rule: a node_modules/ can hold thousands of files, so each rule shows its count and a few paths. */
function renderLeftOut(leftOut: readonly LeftOutPath[]): string {
  const lines = groupLeftOut(leftOut).map((g) => {
    const shown = g.examples.map((p) => `\`${p}\``).join(', ');
    const more = g.count > g.examples.length ? ` and ${g.count - g.examples.length} more` : '';
    return `- ${g.count} file(s), ${g.reason}: ${shown}${more}`;
  });
  return (
    `### Left out as by-products\n\n${lines.join('\n')}\n\n` +
    'These files appeared in the sandbox while the agent or the setup commands ran (caches, bytecode, installed packages, build output); they are not part of the change and were never in the patch.'
  );
}

const VERDICT_TEXT: Record<EvidenceSummary['verdict'], string> = {
  verified: '✅ **Verified**: a test fails without this change and passes with it, nothing else broke, and no test was weakened.',
  unverified: '➖ **Unverified**: the tests pass, but no test shows that this change fixes the issue.',
  failing: '❌ **Failing**: with this change, tests fail that did not before.',
};

/** The evidence, verdict first, tests by name: what a reviewer should weigh before reading the diff. */
export function renderEvidence(e: EvidenceSummary): string {
  const code = (id: string) => `\`${id.replace(/`/g, "'")}\``;
  const named = (ids: string[]) => `${ids.slice(0, MAX_NAMED).map(code).join(', ')}${ids.length > MAX_NAMED ? ` and ${ids.length - MAX_NAMED} more` : ''}`;
  const lines = [VERDICT_TEXT[e.verdict], '', ...(e.reproductionRun ? [escapeMentions(e.reproductionRun), ''] : []), ...(e.disagreement ? [disagreementLine(e.disagreement, named, code), ''] : [])];
  if (e.reproduction.length) lines.push(`- **Reproduction** (the change's tests fail on the base code, pass with the change): ${named(e.reproduction)}`);
  if (e.fixed.length) lines.push(`- **Fixed** (failed before the change, pass after): ${named(e.fixed)}`);
  if (e.broken.length) lines.push(`- **Broken** (passed before, fail with the change): ${named(e.broken)}`);
  for (const w of e.weakened.slice(0, MAX_NAMED)) lines.push(`- **Weakened**: ${code(w.file)}${w.test ? ` ${code(w.test)}` : ''}: ${escapeMentions(w.what)}`);
  if (e.changeTests) lines.push(`- The change's test files (${e.changeTests.files.map(code).join(', ')}) ran on the base code and with the change: ${code(e.changeTests.command)}`);
  const notes = e.notes.map((n) => `- ${escapeMentions(n)}`);
  return `### Evidence\n\n${lines.join('\n')}${notes.length ? `\n\n<details><summary>How it was judged</summary>\n\n${notes.join('\n')}\n\n</details>` : ''}`;
}

/** Said right after the verdict: the agent saw these tests pass, but not on this change alone. */
function disagreementLine(d: NonNullable<EvidenceSummary['disagreement']>, named: (ids: string[]) => string, code: (s: string) => string): string {
  const outside = d.outside.length > 0 ? ` Outside the change it wrote ${d.outside.map(code).join(', ')}${d.outsideMore > 0 ? ` and ${d.outsideMore} more` : ''}.` : '';
  return (
    `⚠️ **The agent's sandbox disagrees**: ${named(d.tests)} passed in the sandbox the agent worked in, but ${d.tests.length === 1 ? 'fails' : 'fail'} here, ` +
    `in a fresh sandbox with only this change. Something the agent left outside the change made ${d.tests.length === 1 ? 'it' : 'them'} pass there; ` +
    `that is not part of this pull request, and the verdict above is the fresh sandbox's.${outside}`
  );
}

function renderTests(input: PullRequestBodyInput): string {
  const notes = [...(input.origin ? [`_${input.origin}_`] : []), ...(input.setupNotes ?? [])];
  const head = notes.length > 0 ? `${notes.join('\n\n')}\n\n` : '';
  if (!input.tests) {
    return `### Tests\n\n${head}_No test command is configured (\`test\` in \`.github/lilypad.yml\`) and none could be inferred from the repository's files, so nothing was run._`;
  }
  const rows = [renderTest('Before the change', input.tests.before), renderTest('After the change', input.tests.after)];
  const command = input.tests.after?.command ?? input.tests.before?.command ?? '';
  const perTest = input.tests.perTest ? `${renderPerTest(input.tests.perTest)}\n\n` : '';
  return `### Tests\n\n${head}Command: \`${command.replace(/`/g, "'")}\`\n\n${perTest}${rows.join('\n\n')}`;
}

function renderPerTest(p: PerTestChanges): string {
  if (p.fallback) return `_Per test: ${p.fallback}._`;
  const named = (ids: string[]) => `${ids.slice(0, MAX_NAMED).map((id) => `\`${id.replace(/`/g, "'")}\``).join(', ')}${ids.length > MAX_NAMED ? ` and ${ids.length - MAX_NAMED} more` : ''}`;
  const lines = [
    `- **Fixed** (failed before, pass after): ${p.fixed.length ? named(p.fixed) : 'none'}`,
    `- **Broken** (passed before, fail after): ${p.broken.length ? named(p.broken) : 'none'}`,
    `- Still failing: ${p.stillFailing}; passing before and after: ${p.passing}`,
  ];
  return lines.join('\n');
}

function renderTest(label: string, t: TestOutcome | null): string {
  if (!t) return `**${label}:** not run`;
  const icon = t.outcome === 'passed' ? '✅' : t.outcome === 'failed' ? '❌' : '⚠️';
  const counts = t.counts ? ` — ${Object.entries(t.counts).map(([k, v]) => `${v} ${k}`).join(', ')}` : '';
  const exit = t.exitCode !== null ? `exit ${t.exitCode}` : t.outcome === 'timed_out' ? 'timed out' : 'did not run';
  const tail = t.outputTail.split('\n').slice(-40).join('\n');
  return `**${label}:** ${icon} ${t.outcome} (${exit}, ${formatSeconds(t.durationMs / 1000)})${counts}\n\n<details><summary>Output (last lines)</summary>\n\n${fence(tail)}\n\n</details>`;
}

/** A fenced block that the content cannot break out of. */
export function fence(text: string): string {
  const f = fenceFor(text);
  return `${f}text\n${text}\n${f}`;
}

/** Model-written text: no HTML comments, no @mentions that would ping people. */
export function quoteUntrusted(text: string): string {
  return escapeMentions(text.replace(/<!--[\s\S]*?(-->|$)/g, '').trim()).slice(0, 20_000);
}

function formatSeconds(s: number): string {
  if (s < 60) return `${s.toFixed(0)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}
