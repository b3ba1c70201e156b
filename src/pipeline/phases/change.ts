import type { SecretScanner } from '../../observability/secrets.ts';
import { prepareChange, type PreparedChange } from '../../workspace/publish.ts';
import { UserError } from '../failures.ts';
import type { RunContext } from '../run-context.ts';

export interface ChangeInput {
  /** A git repository holding the base commit (the mirror, the user's repository, eval's cache). */
  source: string;
  baseCommit: string;
  patch: Buffer;
  excludePaths: string[];
  /** The commit the change becomes (its message says what it is and that it needs review). */
  commit: { message: string; author: { name: string; email: string } };
}

/**
 * Phase 4, the change. The diff left the container as data: it is applied to a fresh clone on the
 * host, filtered (everything under .github/, `exclude_paths`), and committed; the agent's patch is
 * scanned for secrets. The same for every kind of run, so that what `lilypad run` writes and what
 * `lilypad eval` judges is exactly what the app would publish.
 */
export async function takeChange(ctx: RunContext, input: ChangeInput): Promise<PreparedChange> {
  const change = await ctx.step('apply', () =>
    prepareChange({ mirrorDir: input.source, baseCommit: input.baseCommit, patch: input.patch, excludePaths: input.excludePaths, message: input.commit.message, author: input.commit.author }),
  );
  ctx.cleanups.push(() => change.dispose());
  return change;
}

/** Refuses to publish when the patch's added lines or a text to be published hold a secret. */
export function refuseSecrets(scanner: SecretScanner, patch: Buffer, texts: string[]): void {
  const added = patch
    .toString('utf8')
    .split('\n')
    .filter((l) => l.startsWith('+') && !l.startsWith('+++'))
    .join('\n');
  const findings = [...scanner.findings(added), ...texts.flatMap((t) => scanner.findings(t))];
  if (findings.length > 0) {
    throw new UserError(
      `the change or its description contains what looks like a secret (${[...new Set(findings)].join(', ')}), so nothing was published.`,
      'look at the run (its trajectory is kept under LILYPAD_DATA_DIR/runs) and make sure no secret is in the repository or the issue, then run Lilypad again.',
    );
  }
}

/** The message of the commit a change becomes; `[skip ci]` holds CI until a writer releases it. */
export function commitMessage(title: string, what: string, holdCi: boolean): string {
  return `${title.slice(0, 120)}\n\n${what}; needs human review.${holdCi ? '\n\n[skip ci]' : ''}`;
}
