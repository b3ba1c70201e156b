import { CiFeedbackError, fetchCiFeedback, type FailingCheck } from '../github/ci-feedback.ts';
import type { GitHubClient } from '../github/client.ts';
import { addressedSignatures, readCiFixRecord, recordAddressedFix } from '../store/ci-fix-records.ts';
import type { FollowupRequest } from '../store/followup-requests.ts';
import type { FollowupRunJob } from '../store/jobs.ts';
import { codeName } from './ci-fix-policy.ts';
import { buildCiFixTask, DEFAULT_CI_TASK_TOKEN_BUDGET, type CiFixTask } from './ci-fix-task.ts';
import { UserError } from './failures.ts';
import type { JobContext } from './job-context.ts';
import type { ReviewTask } from './review-task.ts';
import { StaleTriggerError } from './validate-trigger.ts';

/**
 * The CI side of a follow-up run (kinds/followup.ts): a request of kind CI carries the head it was
 * made for, but the run reads the failing checks on the head it works on, when it starts, so it
 * fixes what fails now. Review feedback and CI requests taken by the same run make one task and
 * one commit: the review task, then the failing checks as a section of their own (its budget on
 * top of the review's, so neither crowds the other out).
 */

export interface CiWork {
  headSha: string;
  checks: FailingCheck[];
  /** Every CI request of the run was Lilypad's own (`ci_fix: auto`). */
  auto: boolean;
  warnings: string[];
}

/**
 * The failing checks the run's CI requests ask it to fix, read on the pull request's head (only
 * its own branch's suites, and the status contexts the repository names); null without a CI request.
 */
export async function readCiWork(
  ctx: JobContext<FollowupRunJob>,
  client: GitHubClient,
  head: { sha: string; branch: string; statusContexts: readonly string[] },
  requests: readonly FollowupRequest[],
): Promise<CiWork | null> {
  const ci = requests.filter((r) => r.ci);
  if (ci.length === 0) return null;
  const { deps, job } = ctx;
  const headSha = head.sha;
  const auto = ci.every((r) => r.ci?.auto);
  let feedback;
  try {
    feedback = await fetchCiFeedback(client, {
      owner: job.owner,
      repo: job.repo,
      headSha,
      pull: { number: job.pullNumber, branch: head.branch },
      statusContexts: head.statusContexts,
      ownAppSlug: (await deps.github.appIdentity()).slug,
      scanner: ctx.scanner(),
      signal: ctx.signal,
    });
    const { elsewhere, statusContexts } = feedback.ignored;
    if (elsewhere > 0 || statusContexts.length > 0) {
      ctx.log.info({ head: headSha.slice(0, 7), elsewhere, statusContexts: statusContexts.slice(0, 20) }, "CI results on the head that are not the pull request's were left out of the fix");
    }
  } catch (err) {
    if (!(err instanceof CiFeedbackError)) throw err;
    throw new UserError(`the CI results of this pull request could not be read: ${err.message}`, 'give the GitHub App the `checks`, `actions` and `statuses` read permissions (an existing installation accepts them in its settings), then ask again.');
  }
  let checks = feedback.failing;
  // Lilypad's own requests leave out a check failing the same way as one an earlier fix addressed: that fix did not help.
  if (auto) {
    const addressed = addressedSignatures(await readCiFixRecord(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, { repoId: job.repoId, pullNumber: job.pullNumber }));
    checks = checks.filter((c) => !addressed.has(c.signature));
  }
  if (checks.length === 0 && requests.every((r) => r.ci)) {
    const pending = feedback.pending.length > 0 ? ` (${feedback.pending.length} still running)` : '';
    throw new StaleTriggerError(`no CI check that Lilypad would fix fails on the head commit \`${headSha.slice(0, 7)}\`${pending}, so there is nothing to fix; the failure was on an earlier commit, or was fixed meanwhile.`);
  }
  const warnings = [...feedback.warnings, ...(feedback.omitted.length ? [`${feedback.omitted.length} more failing check(s) not read: ${feedback.omitted.join(', ')}`] : [])];
  return { headSha, checks, auto, warnings };
}

/** The task of a run that only fixes CI: the pinned issue, the failing checks, the writers' instructions. */
export function ciOnlyTask(issue: { title: string; body: string }, ci: CiWork, instructions: string, requestedBy: string | undefined): CiFixTask {
  return buildCiFixTask({ issue, headSha: ci.headSha, checks: ci.checks, instructions, ...(requestedBy ? { requestedBy } : {}) });
}

/** A review task with the failing checks after it, when a run took review feedback and CI requests together. */
export function reviewWithCi(review: ReviewTask, ci: CiWork): CiFixTask {
  return buildCiFixTask({
    issue: { title: review.title, body: review.body },
    headSha: ci.headSha,
    checks: ci.checks,
    instructions: 'Besides the review feedback and the instructions above, make the failing CI checks pass.',
    tokenBudget: review.estimatedTokens + DEFAULT_CI_TASK_TOKEN_BUDGET,
  });
}

/** What started a revision, for the Revisions table: each request, then the checks a CI fix addressed. */
export function revisionTrigger(requests: readonly FollowupRequest[], ciAddressed: readonly { name: string }[]): string {
  const who = requests.map((r) => {
    if (r.ci?.auto) return 'automatic CI fix';
    if (r.ci) return `\`/lilypad fix-ci\` by @${r.by}`;
    return `${r.trigger === 'review' ? 'review' : '`/lilypad`'} by @${r.by}`;
  });
  const what = ciAddressed.length > 0 ? `: fixing CI ${ciAddressed.map((c) => codeName(c.name)).join(', ')}` : '';
  return `${[...new Set(who)].join(', ')}${what}`;
}

/** Said in the status reply of a run that fixed CI. */
export function ciStatusNote(ciAddressed: readonly { name: string }[], ciHeld: boolean): string | undefined {
  if (ciAddressed.length === 0) return undefined;
  const names = ciAddressed.map((c) => codeName(c.name)).join(', ');
  return `It addresses the failing CI check${ciAddressed.length === 1 ? '' : 's'} ${names}.${ciHeld ? ' CI runs on it once someone with write access comments `/lilypad ci`.' : ''}`;
}

/** After the push: what the fix addressed, so that the same failure is not fixed again automatically. */
export async function rememberCiFix(ctx: JobContext<FollowupRunJob>, ci: CiWork, addressed: CiFixTask['addressed'], commit: string): Promise<void> {
  const { deps, job } = ctx;
  await recordAddressedFix(deps.redis, deps.env.LILYPAD_QUEUE_PREFIX, { repoId: job.repoId, pullNumber: job.pullNumber }, {
    commit,
    forHead: ci.headSha,
    checks: addressed.map((c) => ({ name: c.name, signature: c.signature })),
    auto: ci.auto,
    at: new Date().toISOString(),
  });
}
