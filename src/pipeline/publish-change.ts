import type { Redis } from 'ioredis';
import { readPushRecord, recordHeadPush, writePushRecord } from '../store/push-records.ts';
import { pushBranch, remoteTip } from '../workspace/publish.ts';

/** Branch names tried in order: lilypad/issue-N, then -2, -3, ... when someone else owns one. */
const branchFor = (issueNumber: number, n = 1): string => `lilypad/issue-${issueNumber}${n > 1 ? `-${n}` : ''}`;
const MAX_BRANCHES = 9;

export interface PushTarget {
  redis: Redis;
  prefix: string;
  repoId: number;
  issueNumber: number;
  cloneUrl: string;
  /** Asked for right before each git call: tokens expire during long jobs. */
  authHeader: () => Promise<string>;
  /** Waits before retrying a git call the server failed (5xx, 429); default 1, 3 and 9 s. */
  retryDelaysMs?: readonly number[];
  /** A cancel kills the git call in flight and stops the retries. */
  signal?: AbortSignal | undefined;
}

export interface PushOutcome {
  branch: string;
  /** Branches skipped because someone else pushed to them (their commits are kept). */
  skipped: string[];
}

/**
 * Pushes the prepared commit without ever overwriting anyone's work: a branch is reused only while
 * its tip is what Lilypad itself last pushed there (kept in Redis), and the push is a
 * --force-with-lease against that tip. A branch someone else pushed to is left alone and the next
 * free name is used.
 */
export async function pushWithoutOverwriting(dir: string, headSha: string, target: PushTarget): Promise<PushOutcome> {
  const skipped: string[] = [];
  for (let n = 1; n <= MAX_BRANCHES; n++) {
    const branch = branchFor(target.issueNumber, n);
    // A server error (a 502 from a proxy, a 429) is retried on the same branch, from the look at its
    // tip: a push the server applied before failing shows as our own commit there.
    const result = await retryServerErrors(() => pushIfOurs(dir, headSha, target, branch), target.retryDelaysMs ?? SERVER_RETRY_DELAYS_MS);
    if (result === 'pushed') return { branch, skipped };
    skipped.push(branch); // someone else's commits, or someone pushed between the look and the push
  }
  throw new Error(`every branch from ${branchFor(target.issueNumber)} to ${branchFor(target.issueNumber, MAX_BRANCHES)} holds someone else's commits; delete the ones no longer needed and run Lilypad again`);
}

const SERVER_RETRY_DELAYS_MS = [1000, 3000, 9000];

async function pushIfOurs(dir: string, headSha: string, target: PushTarget, branch: string): Promise<'pushed' | 'theirs'> {
  const { redis, prefix, repoId } = target;
  const record = await readPushRecord(redis, prefix, repoId, branch);
  const tip = await remoteTip(target.cloneUrl, branch, await target.authHeader(), target.signal);
  const ours = tip === null || tip === record.sha || tip === record.pending || tip === headSha;
  if (!ours) return 'theirs';
  await writePushRecord(redis, prefix, repoId, branch, { sha: record.sha, pending: headSha });
  const pushed = await pushBranch(dir, target.cloneUrl, branch, await target.authHeader(), { expected: tip }, target.signal);
  if (pushed !== 'pushed') return 'theirs';
  await writePushRecord(redis, prefix, repoId, branch, { sha: headSha, pending: null });
  await recordHeadPush(redis, prefix, repoId, branch, headSha);
  return 'pushed';
}

/** git's words for an HTTP error status from the server (curl's, through git-remote-http). */
const SERVER_ERROR = /(?:returned error|RPC failed; HTTP):? (5\d\d|429)\b/;

async function retryServerErrors<T>(fn: () => Promise<T>, delaysMs: readonly number[]): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const delay = delaysMs[attempt];
      if (delay === undefined || !SERVER_ERROR.test((err as Error).message)) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
