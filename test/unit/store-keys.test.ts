import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { keys } from '../../src/store/keys.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

// The key strings earlier versions wrote. Redis keeps data across upgrades, so a change here is a
// migration, not a refactor: existing pull request records, follow-up queues and sessions would be
// orphaned.
test('every key family builds exactly the string earlier versions wrote', () => {
  const ref = { owner: 'Org', repo: 'Repo', issueNumber: 3 };
  const built: Record<keyof typeof keys, string[]> = {
    triggerLock: [keys.triggerLock('lp', 'run-5-3')],
    edits: [keys.edits('lp', 'run-5-3')],
    finishing: [keys.finishing('lp', 'run-5-3')],
    textConfirm: [keys.textConfirm('lp', 5, 3)],
    cancelChannel: [keys.cancelChannel('lp')],
    cancelled: [keys.cancelled('lp', 'run-5-3')],
    mirrorLock: [keys.mirrorLock('lp', 'github.com_org_repo')],
    publishLock: [keys.publishLock('lp', 'run-5-3')],
    published: [keys.published('lp', 'run-5-3')],
    withheld: [keys.withheld('lp', 5, 3)],
    pushed: [keys.pushed('lp', 5, 'lilypad/issue-3')],
    headPushed: [keys.headPushed('lp', 5, 'lilypad/issue-3')],
    pullRecord: [keys.pullRecord('lp', 5, 9)],
    followupPending: [keys.followupPending('lp', 5, 9)],
    followupCurrent: [keys.followupCurrent('lp', 5, 9)],
    followupSeq: [keys.followupSeq('lp', 5, 9)],
    followupRuns: [keys.followupRuns('lp', 5, 9)],
    followupLock: [keys.followupLock('lp', 5, 9)],
    followupTaken: [keys.followupTaken('lp', 'fu-5-9-2')],
    ciFix: [keys.ciFix('lp', 5, 9)],
    ciFixLock: [keys.ciFixLock('lp', 5, 9)],
    statusComment: [keys.statusComment('LP', ref), keys.statusComment('lp', ref, 'followup-2')],
    statusCommentLock: [keys.statusCommentLock('lp', ref), keys.statusCommentLock('lp', ref, 'followup-2')],
    replied: [keys.replied('lp', ref, 'denied:Alice')],
    recovered: [keys.recovered('lp', 5, 3, '2025-01-02T03:04:05Z')],
    heartbeat: [keys.heartbeat('lp', 'host-42-abc')],
    installation: [keys.installation('lp')],
    run: [keys.run('lp', 'run-5-3-1', 'summary'), keys.run('lp', 'run-5-3-1', 'live'), keys.run('lp', 'run-5-3-1', 'record')],
    runIndex: [keys.runIndex('lp')],
    webSession: [keys.webSession('lp', 'cookie-id')],
  };
  assert.deepEqual(built, {
    triggerLock: ['lp:lock:run-5-3'],
    edits: ['lp:edits:run-5-3'],
    finishing: ['lp:finishing:run-5-3'],
    textConfirm: ['lp:text-confirm:5:3'],
    cancelChannel: ['lp:cancel'],
    cancelled: ['lp:cancelled:run-5-3'],
    mirrorLock: ['lp:mirror:github.com_org_repo'],
    publishLock: ['lp:publish:run-5-3'],
    published: ['lp:published:run-5-3'],
    withheld: ['lp:withheld:5:3'],
    pushed: ['lp:pushed:5:lilypad/issue-3'],
    headPushed: ['lp:head-pushed:5:lilypad/issue-3'],
    pullRecord: ['lp:pr:5:9'],
    followupPending: ['lp:followup:5:9:pending'],
    followupCurrent: ['lp:followup:5:9:current'],
    followupSeq: ['lp:followup:5:9:seq'],
    followupRuns: ['lp:followup:5:9:runs'],
    followupLock: ['lp:followup:5:9:lock'],
    followupTaken: ['lp:followup-taken:fu-5-9-2'],
    ciFix: ['lp:ci-fix:5:9'],
    ciFixLock: ['lp:ci-fix:5:9:lock'],
    statusComment: ['lp:status:org/repo#3', 'lp:status:org/repo#3:followup-2'],
    statusCommentLock: ['lp:status:org/repo#3:lock', 'lp:status:org/repo#3:followup-2:lock'],
    replied: ['lp:replied:org/repo#3:denied:alice'],
    recovered: ['lp:recovered:5:3:2025-01-02T03:04:05Z'],
    heartbeat: ['lp:heartbeat:host-42-abc'],
    installation: ['lp:installation'],
    run: ['lp:run:run-5-3-1:summary', 'lp:run:run-5-3-1:live', 'lp:run:run-5-3-1:record'],
    runIndex: ['lp:runs'],
    webSession: [`lp:websession:${createHash('sha256').update('cookie-id').digest('hex')}`],
  });
});

test('no file outside src/store/ builds a Redis key of its own from the queue prefix', async () => {
  const inline: string[] = [];
  for (const entry of await readdir(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const file = path.relative(ROOT, path.join(entry.parentPath, entry.name)).split(path.sep).join('/');
    if (file.startsWith('src/store/')) continue;
    const lines = (await readFile(path.join(ROOT, file), 'utf8')).split('\n');
    lines.forEach((line, i) => {
      // `${prefix}:…`, `${this.prefix}:…`, `${env.LILYPAD_QUEUE_PREFIX}:…`, or a key grown from a built one (`${key}:lock`, `${base}:seq`).
      if (/\$\{[^}]*(prefix|PREFIX|[kK]ey|base)\}:[\w$]/.test(line)) inline.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(inline, [], 'build the key in src/store/keys.ts and read or write it through a file of src/store/');
});
