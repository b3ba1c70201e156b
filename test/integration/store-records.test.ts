import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { clearFinishing, isFinishing, markFinishing } from '../../src/store/finishing-marks.ts';
import {
  appendRequest,
  clearCurrentFollowup,
  countFollowupRun,
  currentFollowup,
  dropPendingRequests,
  firstPendingRequest,
  followupRunCount,
  forgetTakenRequests,
  lastFollowupSeq,
  resetFollowupCount,
  setCurrentFollowup,
  takeRequests,
  type FollowupRequest,
} from '../../src/store/followup-requests.ts';
import { installationId } from '../../src/store/installation-id.ts';
import { forgetIssueEdits, readIssueEdits, recordIssueEdit } from '../../src/store/issue-edits.ts';
import { pinText } from '../../src/store/jobs.ts';
import { keys } from '../../src/store/keys.ts';
import { readPublished, recordPublished, type Published } from '../../src/store/published.ts';
import { addRevision, readPrRecord, type Revision } from '../../src/store/pull-records.ts';
import { forgetPush, readPushRecord, writePushRecord } from '../../src/store/push-records.ts';
import { markRecoveredOnce } from '../../src/store/recovery-marks.ts';
import { markRepliedOnce } from '../../src/store/reply-marks.ts';
import { readStatusCommentId, withStatusCommentLock, writeStatusCommentId } from '../../src/store/status-comment-ids.ts';
import { readTextConfirmation, writeTextConfirmation } from '../../src/store/text-confirmations.ts';
import { deleteWebSession, readWebSession, writeWebSession } from '../../src/store/web-sessions.ts';

// Real Redis on the loopback; every test has a prefix of its own, and its keys are removed after.
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

let redis: Redis;
const prefixes: string[] = [];

before(() => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
});
after(async () => {
  for (const prefix of prefixes) {
    const found = await redis.keys(`${prefix}:*`);
    if (found.length > 0) await redis.del(...found);
  }
  redis.disconnect();
});

function uniquePrefix(): string {
  const prefix = `lilypad-test:store:${process.pid}:${randomBytes(4).toString('hex')}`;
  prefixes.push(prefix);
  return prefix;
}

/** Seconds until the key expires (-1: no expiry, -2: no key). */
const ttl = (key: string) => redis.ttl(key);

describe('issue edits', () => {
  test('edits come back in the order recorded, and expire', async () => {
    const p = uniquePrefix();
    await recordIssueEdit(redis, p, 'run-1-2', { login: 'mallory', writer: false, at: '2025-01-01T00:00:00Z' });
    await recordIssueEdit(redis, p, 'run-1-2', { login: 'alice', writer: true, at: '2025-01-01T00:01:00Z' });
    assert.deepEqual(await readIssueEdits(redis, p, 'run-1-2'), [
      { login: 'mallory', writer: false, at: '2025-01-01T00:00:00Z' },
      { login: 'alice', writer: true, at: '2025-01-01T00:01:00Z' },
    ]);
    assert.ok((await ttl(keys.edits(p, 'run-1-2'))) > 29 * 86400);
    await forgetIssueEdits(redis, p, 'run-1-2');
    assert.deepEqual(await readIssueEdits(redis, p, 'run-1-2'), []);
  });

  test('an entry that is not JSON or not an edit is left out; the others are kept', async () => {
    const p = uniquePrefix();
    await redis.rpush(keys.edits(p, 'run-1-2'), 'not json', JSON.stringify({ login: 'x' }), JSON.stringify({ login: 'bob', writer: false, at: 't' }));
    assert.deepEqual(await readIssueEdits(redis, p, 'run-1-2'), [{ login: 'bob', writer: false, at: 't' }]);
  });

  test('a malformed edit is refused before it is written', async () => {
    const p = uniquePrefix();
    await assert.rejects(recordIssueEdit(redis, p, 'run-1-2', { login: 'x', writer: 'yes', at: 't' } as never), /writer/);
    assert.equal(await redis.exists(keys.edits(p, 'run-1-2')), 0);
  });
});

describe('finishing marks', () => {
  test('marked, seen, cleared; the mark lapses on its own after ten minutes', async () => {
    const p = uniquePrefix();
    assert.equal(await isFinishing(redis, p, 'run-1-2'), false);
    await markFinishing(redis, p, 'run-1-2');
    assert.equal(await isFinishing(redis, p, 'run-1-2'), true);
    const left = await ttl(keys.finishing(p, 'run-1-2'));
    assert.ok(left > 590 && left <= 600, `ttl ${left}`);
    await clearFinishing(redis, p, 'run-1-2');
    assert.equal(await isFinishing(redis, p, 'run-1-2'), false);
  });
});

describe('text confirmations', () => {
  test('round trip; an unreadable value reads as none', async () => {
    const p = uniquePrefix();
    assert.equal(await readTextConfirmation(redis, p, 5, 3), null);
    await writeTextConfirmation(redis, p, 5, 3, { mark: '2025|abc', deliveryId: 'd1' });
    assert.deepEqual(await readTextConfirmation(redis, p, 5, 3), { mark: '2025|abc', deliveryId: 'd1' });
    await redis.set(keys.textConfirm(p, 5, 3), '{"mark":1}');
    assert.equal(await readTextConfirmation(redis, p, 5, 3), null);
  });
});

describe('pull request records', () => {
  const revision = (sha: string): Revision => ({ trigger: 'label by @alice', sha, testsBefore: 'failed', testsAfter: 'passed', steps: 4, tokens: 1000, seconds: 12 });
  const base = (title: string) => ({ issueNumber: 3, branch: 'lilypad/issue-3', pinned: pinText(title, 'body') });

  test('revisions accumulate, lastSha follows the newest, and the first pinned text stays', async () => {
    const p = uniquePrefix();
    assert.equal(await readPrRecord(redis, p, 5, 9), null);
    await addRevision(redis, p, 5, 9, base('first'), revision('a'.repeat(40)));
    const second = await addRevision(redis, p, 5, 9, base('edited later'), revision('b'.repeat(40)));
    assert.equal(second.lastSha, 'b'.repeat(40));
    assert.equal(second.pinned.title, 'first');
    assert.deepEqual(await readPrRecord(redis, p, 5, 9), second);
    assert.deepEqual(second.revisions.map((r) => r.sha[0]), ['a', 'b']);
  });

  test('only the newest 50 revisions are kept', async () => {
    const p = uniquePrefix();
    let record;
    for (let i = 0; i < 52; i++) record = await addRevision(redis, p, 5, 9, base('t'), revision(String(i).padStart(40, '0')));
    assert.equal(record!.revisions.length, 50);
    assert.equal(Number(record!.revisions[0]!.sha), 2);
  });

  test('a record in another shape reads as none: the pull request is not treated as Lilypad-owned', async () => {
    const p = uniquePrefix();
    await redis.set(keys.pullRecord(p, 5, 9), JSON.stringify({ issueNumber: 3, branch: 'x' }));
    assert.equal(await readPrRecord(redis, p, 5, 9), null);
    await redis.set(keys.pullRecord(p, 5, 9), 'garbage');
    assert.equal(await readPrRecord(redis, p, 5, 9), null);
  });
});

describe('published records', () => {
  const published: Published = { deliveryId: 'd1', number: 12, url: 'http://127.0.0.1/pr/12', branch: 'lilypad/issue-3', sha: 'c'.repeat(40), updated: false, incomplete: false, exitReason: 'agent', draft: true };

  test("a trigger reads what it published; another trigger's record does not count", async () => {
    const p = uniquePrefix();
    await recordPublished(redis, p, 'run-5-3', published);
    assert.deepEqual(await readPublished(redis, p, 'run-5-3', 'd1'), published);
    assert.equal(await readPublished(redis, p, 'run-5-3', 'd2'), null);
    const left = await ttl(keys.published(p, 'run-5-3'));
    assert.ok(left > 6 * 86400 && left <= 7 * 86400, `ttl ${left}`);
  });

  test('an older record without a sha still reads; a corrupt one reads as none', async () => {
    const p = uniquePrefix();
    const { sha: _sha, ...older } = published;
    await redis.set(keys.published(p, 'run-5-3'), JSON.stringify(older));
    assert.deepEqual(await readPublished(redis, p, 'run-5-3', 'd1'), older);
    await redis.set(keys.published(p, 'run-5-3'), '{');
    assert.equal(await readPublished(redis, p, 'run-5-3', 'd1'), null);
  });
});

describe('push records', () => {
  test('a branch without a record has nothing of Lilypad on it; pending then pushed; forgotten', async () => {
    const p = uniquePrefix();
    assert.deepEqual(await readPushRecord(redis, p, 5, 'lilypad/issue-3'), { sha: null, pending: null });
    await writePushRecord(redis, p, 5, 'lilypad/issue-3', { sha: null, pending: 'a'.repeat(40) });
    assert.deepEqual(await readPushRecord(redis, p, 5, 'lilypad/issue-3'), { sha: null, pending: 'a'.repeat(40) });
    await writePushRecord(redis, p, 5, 'lilypad/issue-3', { sha: 'a'.repeat(40), pending: null });
    assert.deepEqual(await readPushRecord(redis, p, 5, 'lilypad/issue-3'), { sha: 'a'.repeat(40), pending: null });
    await forgetPush(redis, p, 5, 'lilypad/issue-3');
    assert.deepEqual(await readPushRecord(redis, p, 5, 'lilypad/issue-3'), { sha: null, pending: null });
  });

  test('a corrupt record counts as none: the branch is then only reused if its tip is the commit being pushed', async () => {
    const p = uniquePrefix();
    await redis.set(keys.pushed(p, 5, 'lilypad/issue-3'), JSON.stringify({ sha: 42 }));
    assert.deepEqual(await readPushRecord(redis, p, 5, 'lilypad/issue-3'), { sha: null, pending: null });
  });
});

describe('follow-up requests', () => {
  const pull = { repoId: 5, pullNumber: 9 };
  const request = (by: string): FollowupRequest => ({ by, instructions: `do it, ${by}`, trigger: 'comment', commentId: 1, deliveryId: `d-${by}`, at: '2025-01-01T00:00:00Z', maxFollowups: 3 });

  test('waiting requests are taken once by a job; a retry of that job gets the same ones', async () => {
    const p = uniquePrefix();
    await appendRequest(redis, p, pull, request('alice'));
    await appendRequest(redis, p, pull, request('bob'));
    assert.deepEqual(await firstPendingRequest(redis, p, pull), request('alice'));
    assert.deepEqual(await takeRequests(redis, p, pull, 'fu-5-9-1'), [request('alice'), request('bob')]);
    assert.equal(await firstPendingRequest(redis, p, pull), undefined, 'the waiting list is empty');
    await appendRequest(redis, p, pull, request('carol'));
    assert.deepEqual(await takeRequests(redis, p, pull, 'fu-5-9-1'), [request('alice'), request('bob'), request('carol')], 'a retry also takes what arrived meanwhile');
    await forgetTakenRequests(redis, p, 'fu-5-9-1');
    assert.deepEqual(await takeRequests(redis, p, pull, 'fu-5-9-1'), []);
  });

  test('an unreadable request is skipped, not thrown', async () => {
    const p = uniquePrefix();
    await redis.rpush(keys.followupPending(p, 5, 9), 'nope', JSON.stringify({ by: 'x', trigger: 'push' }));
    await appendRequest(redis, p, pull, request('alice'));
    assert.deepEqual(await takeRequests(redis, p, pull, 'fu-5-9-1'), [request('alice')]);
  });

  test('dropping says how many were waiting', async () => {
    const p = uniquePrefix();
    assert.equal(await dropPendingRequests(redis, p, pull), 0);
    await appendRequest(redis, p, pull, request('alice'));
    await appendRequest(redis, p, pull, request('bob'));
    assert.equal(await dropPendingRequests(redis, p, pull), 2);
    assert.equal(await firstPendingRequest(redis, p, pull), undefined);
  });

  test('the current job, the run count and the job numbers', async () => {
    const p = uniquePrefix();
    assert.equal(await currentFollowup(redis, p, pull), null);
    assert.equal(await lastFollowupSeq(redis, p, pull), '0');
    assert.equal(await countFollowupRun(redis, p, pull), 1);
    assert.equal(await countFollowupRun(redis, p, pull), 2);
    await setCurrentFollowup(redis, p, pull, 'fu-5-9-2');
    assert.equal(await currentFollowup(redis, p, pull), 'fu-5-9-2');
    assert.equal(await followupRunCount(redis, p, pull), 2);
    await resetFollowupCount(redis, p, 5, 9);
    assert.equal(await followupRunCount(redis, p, pull), 0, 'a full run starts the count again');
    assert.equal(await countFollowupRun(redis, p, pull), 3, 'job numbers never repeat');
    await clearCurrentFollowup(redis, p, pull);
    assert.equal(await currentFollowup(redis, p, pull), null);
  });
});

describe('status comment ids', () => {
  const ref = { owner: 'Org', repo: 'Repo', issueNumber: 3 };

  test('the issue and each follow-up slot keep their own id; what is not an id reads as none', async () => {
    const p = uniquePrefix();
    await writeStatusCommentId(redis, p, ref, undefined, 1001);
    await writeStatusCommentId(redis, p, ref, 'followup-1', 2002);
    assert.equal(await readStatusCommentId(redis, p, ref), 1001);
    assert.equal(await readStatusCommentId(redis, p, { ...ref, owner: 'org' }, 'followup-1'), 2002, 'owner and repo are case-insensitive');
    await redis.set(keys.statusComment(p, ref), 'abc');
    assert.equal(await readStatusCommentId(redis, p, ref), null);
  });

  test('the lock lets one writer in at a time', async () => {
    const p = uniquePrefix();
    const order: string[] = [];
    const held = (name: string) =>
      withStatusCommentLock(redis, p, ref, undefined, async () => {
        order.push(`${name} in`);
        await new Promise((r) => setTimeout(r, 100));
        order.push(`${name} out`);
      });
    await Promise.all([held('a'), held('b')]);
    assert.deepEqual(order.map((s) => s.split(' ')[1]), ['in', 'out', 'in', 'out']);
  });
});

describe('one-time marks', () => {
  test('a reply is marked once per person and issue, case-insensitively', async () => {
    const p = uniquePrefix();
    const ref = { owner: 'Org', repo: 'Repo', issueNumber: 3 };
    assert.equal(await markRepliedOnce(redis, p, ref, 'denied:Alice'), true);
    assert.equal(await markRepliedOnce(redis, p, { ...ref, repo: 'repo' }, 'denied:alice'), false);
    assert.equal(await markRepliedOnce(redis, p, ref, 'denied:bob'), true);
  });

  test('a lost job is recovered once per status update', async () => {
    const p = uniquePrefix();
    assert.equal(await markRecoveredOnce(redis, p, 5, 3, '2025-01-01T00:00:00Z'), true);
    assert.equal(await markRecoveredOnce(redis, p, 5, 3, '2025-01-01T00:00:00Z'), false);
    assert.equal(await markRecoveredOnce(redis, p, 5, 3, '2025-01-02T00:00:00Z'), true);
  });
});

describe('web sessions', () => {
  test('round trip under a digest of the id, with the ttl given; deleted on sign-out', async () => {
    const p = uniquePrefix();
    const record = { login: 'alice', token: 'sealed', csrf: 'c', expiresAt: Date.now() + 60_000 };
    await writeWebSession(redis, p, 'secret-session-id', record, 120);
    assert.deepEqual(await readWebSession(redis, p, 'secret-session-id'), record);
    assert.ok(!(await redis.keys(`${p}:*`)).some((k) => k.includes('secret-session-id')), 'the id itself is not in the key');
    const left = await ttl(keys.webSession(p, 'secret-session-id'));
    assert.ok(left > 110 && left <= 120, `ttl ${left}`);
    await deleteWebSession(redis, p, 'secret-session-id');
    assert.equal(await readWebSession(redis, p, 'secret-session-id'), null);
  });

  test('a session that is not JSON or not a session reads as signed out, not as an error', async () => {
    const p = uniquePrefix();
    await redis.set(keys.webSession(p, 'id'), 'not json');
    assert.equal(await readWebSession(redis, p, 'id'), null);
    await redis.set(keys.webSession(p, 'id'), JSON.stringify({ login: 'alice' }));
    assert.equal(await readWebSession(redis, p, 'id'), null);
  });
});

describe('installation id', () => {
  test('made once, kept in Redis and remembered on disk, so a Redis that lost it gets the same one back', async () => {
    const p = uniquePrefix();
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lilypad-store-'));
    try {
      const first = await installationId(redis, p, { dataDir, redisUrl: REDIS_URL });
      assert.match(first, /^inst-[0-9a-f]{16}$/);
      assert.equal(await installationId(redis, p, { dataDir, redisUrl: REDIS_URL }), first);
      await redis.del(keys.installation(p));
      assert.equal(await installationId(redis, p, { dataDir, redisUrl: REDIS_URL }), first);
      assert.equal(await redis.get(keys.installation(p)), first);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  test('a value Lilypad did not make stops the worker with the key to delete', async () => {
    const p = uniquePrefix();
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lilypad-store-'));
    try {
      await redis.set(keys.installation(p), 'hand-made');
      await assert.rejects(installationId(redis, p, { dataDir, redisUrl: REDIS_URL }), (err: Error) => {
        assert.match(err.message, new RegExp(`the installation id in Redis \\(${keys.installation(p).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\) is "hand-made", not one Lilypad made; delete that key`));
        return true;
      });
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
