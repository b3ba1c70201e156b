import type { RepoConfig } from '../config/repo-config.ts';

/**
 * What Lilypad does about failing CI on the current head of one of its pull requests, decided once
 * per head. Pure: ci-triggers.ts gathers the facts and carries the decision out.
 *
 * - `ci_fix: off`: nothing. `command`: a hint naming the failing checks and `/lilypad fix-ci`.
 * - `auto`: a fix, unless (in this order) the head is not Lilypad's own commit (a person pushed:
 *   they are working on the branch, Lilypad does not push under them by itself), `ci_fix_attempts`
 *   automatic fixes were made already (said once per pull request), or every failing check fails
 *   the same way as a check an earlier fix addressed (that fix did not help; another attempt on
 *   the same failure would not either). Each of those gets the hint with its reason instead, so a
 *   writer can still ask with `/lilypad fix-ci`.
 * - A follow-up running or waiting is checked when the fix is requested (under the follow-up lock);
 *   then the automatic fix is skipped, not coalesced: that follow-up pushes a new head, whose own
 *   CI decides again, and a fix folded into it would read the checks of a head that is already
 *   being replaced.
 */

export interface FailingCheckFact {
  name: string;
  signature: string;
}

export interface CiFixFacts {
  mode: RepoConfig['ci_fix'];
  attemptsAllowed: number;
  autoFixesSoFar: number;
  /** The head is the last commit Lilypad pushed (or the empty commit `/lilypad ci` put on it). */
  headIsLilypads: boolean;
  failing: readonly FailingCheckFact[];
  /** Signatures earlier fixes on this pull request addressed. */
  addressed: ReadonlySet<string>;
}

export type HintReason = 'command' | 'person_pushed' | 'same_failure' | 'busy';

export type CiFixDecision =
  | { kind: 'nothing'; why: string }
  | { kind: 'start'; checks: FailingCheckFact[] }
  | { kind: 'hint'; reason: HintReason }
  | { kind: 'cap' };

export function decideCiFix(f: CiFixFacts): CiFixDecision {
  if (f.mode === 'off') return { kind: 'nothing', why: 'ci_fix is off' };
  if (f.failing.length === 0) return { kind: 'nothing', why: 'no CI check fails on the head' };
  if (f.mode === 'command') return { kind: 'hint', reason: 'command' };
  if (!f.headIsLilypads) return { kind: 'hint', reason: 'person_pushed' };
  if (f.autoFixesSoFar >= f.attemptsAllowed) return { kind: 'cap' };
  const fresh = f.failing.filter((c) => !f.addressed.has(c.signature));
  if (fresh.length === 0) return { kind: 'hint', reason: 'same_failure' };
  return { kind: 'start', checks: fresh };
}

/** A check name as inline code in a comment or a table: one line, no backticks or pipes to break out of it. */
export function codeName(name: string): string {
  return `\`${name.replace(/[\r\n]+/g, ' ').replace(/[`|]/g, "'").slice(0, 100)}\``;
}

const REASONS: Record<HintReason, string> = {
  command: 'This repository asks for CI fixes on command (`ci_fix: command`, the default).',
  person_pushed: 'Lilypad does not fix CI by itself once someone else has pushed to the branch.',
  same_failure: 'They fail the same way as before Lilypad’s last CI fix, so it does not try the same fix again by itself.',
  busy: 'Another follow-up on this pull request was running or waiting, so Lilypad did not start a CI fix by itself; its commit gets a CI run of its own.',
};

/** The one comment per head commit when Lilypad does not start a fix by itself. */
export function ciHintBody(headSha: string, failing: readonly FailingCheckFact[], reason: HintReason): string {
  const names = failing.map((c) => codeName(c.name)).join(', ');
  return (
    `**Lilypad**: CI fails on \`${headSha.slice(0, 7)}\`: ${names}. ${REASONS[reason]} ` +
    'Someone with write access can comment `/lilypad fix-ci` (optionally with instructions) to have Lilypad fix it.'
  );
}

/** Said once per pull request when the automatic fixes are used up. */
export function ciCapBody(done: number, allowed: number): string {
  return (
    `**Lilypad** has made ${done} automatic CI fix${done === 1 ? '' : 'es'} on this pull request, the most this repository allows ` +
    `(\`ci_fix_attempts: ${allowed}\` in \`.github/lilypad.yml\`), so it does not start another by itself. ` +
    'Someone with write access can comment `/lilypad fix-ci` to ask for one more, or push a fix.'
  );
}
