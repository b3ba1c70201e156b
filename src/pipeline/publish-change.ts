import type { Redis } from 'ioredis';
import { z } from 'zod';
import { git } from '../workspace/git.ts';
import { gitAuthEnv } from '../workspace/mirror.ts';
import { pushBranch } from '../workspace/publish.ts';

/** Branch names tried in order: lilypad/issue-N, then -2, -3, ... when someone else owns one. */
export const branchFor = (issueNumber: number, n = 1): string => `lilypad/issue-${issueNumber}${n > 1 ? `-${n}` : ''}`;
const MAX_BRANCHES = 9;

/** What Lilypad last pushed to a branch (and what it was about to push, should it crash meanwhile). */
const pushRecordSchema = z.object({ sha: z.string().nullable(), pending: z.string().nullable() });
type PushRecord = z.infer<typeof pushRecordSchema>;

export interface PushTarget {
  redis: Redis;
  prefix: string;
  repoId: number;
  issueNumber: number;
  cloneUrl: string;
  /** Asked for right before each git call: tokens expire during long jobs. */
  authHeader: () => Promise<string>;
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
    const key = `${target.prefix}:pushed:${target.repoId}:${branch}`;
    const record = await readRecord(target.redis, key);
    const tip = await remoteTip(target.cloneUrl, branch, await target.authHeader());
    const ours = tip === null || tip === record.sha || tip === record.pending || tip === headSha;
    if (!ours) {
      skipped.push(branch);
      continue;
    }
    await target.redis.set(key, JSON.stringify({ sha: record.sha, pending: headSha }), 'EX', RECORD_TTL_S);
    const pushed = await pushBranch(dir, target.cloneUrl, branch, await target.authHeader(), { expected: tip });
    if (pushed === 'pushed') {
      await target.redis.set(key, JSON.stringify({ sha: headSha, pending: null }), 'EX', RECORD_TTL_S);
      return { branch, skipped };
    }
    skipped.push(branch); // someone pushed between the look and the push
  }
  throw new Error(`every branch from ${branchFor(target.issueNumber)} to ${branchFor(target.issueNumber, MAX_BRANCHES)} holds someone else's commits; delete the ones no longer needed and run Lilypad again`);
}

const RECORD_TTL_S = 365 * 24 * 3600;

async function readRecord(redis: Redis, key: string): Promise<PushRecord> {
  const raw = await redis.get(key);
  if (!raw) return { sha: null, pending: null };
  try {
    const parsed = pushRecordSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : { sha: null, pending: null };
  } catch {
    return { sha: null, pending: null };
  }
}

/** The branch's current commit on the server, or null when it does not exist. */
export async function remoteTip(cloneUrl: string, branch: string, authHeader: string): Promise<string | null> {
  const out = await git(['ls-remote', '--heads', cloneUrl, `refs/heads/${branch}`], { env: gitAuthEnv(authHeader) });
  const line = out.split('\n').find((l) => l.endsWith(`\trefs/heads/${branch}`));
  return line ? line.split('\t')[0]! : null;
}
