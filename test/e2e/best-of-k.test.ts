import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CALC_REPO } from '../support/fixture-repo.ts';
import { startApp, titleOf, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';
import type { ChatRequestBody, ScriptedReply } from '../support/model-server.ts';

/**
 * Best of k in the app: the real `lilypad start` against the GitHub stand-in and the scripted
 * model server. The administrator allows 2 attempts; one repository asks for 3 (cut to 2), the
 * other for none. The model's answer depends on the request's sampling seed: seed 1 writes a wrong
 * fix (the tests fail), seed 2 the right one, so the tests must choose attempt 2.
 */
const OWNER = 'acme';
const edit = (to: string): ScriptedReply => ({ toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: to } }] });
const bySeed = (turn: number, body: ChatRequestBody): ScriptedReply => {
  if (turn > 0) return { content: `Done (seed ${String(body['seed'])}).` };
  return body['seed'] === 1 ? edit('return a * b') : edit('return a + b');
};
const book: ScriptBook = { 'Pick the best attempt': bySeed, 'One attempt only': bySeed };

let app: AppHarness;
const status = (repo: string, n: number) => app.gh.comments(OWNER, repo, n).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? '';
const requests = (title: string) => app.model.chatRequests().filter((b) => titleOf(b) === title);

before(async () => {
  app = await startApp({ book, env: { LILYPAD_MAX_ATTEMPTS: '2' } });
  app.gh.createInstallation({ login: OWNER, type: 'Organization' });
  app.gh.createUser('alice');
  app.gh.createRepo(OWNER, 'calc', { files: { ...CALC_REPO, '.github/lilypad.yml': 'test: python3 -m unittest -q\nattempts: 3\n' } });
  app.gh.createRepo(OWNER, 'single', { files: { ...CALC_REPO, '.github/lilypad.yml': 'test: python3 -m unittest -q\n' } });
  for (const repo of ['calc', 'single']) app.gh.addCollaborator(OWNER, repo, 'alice', 'maintain');
});
after(async () => {
  await app?.stop();
});

test('attempts: 3 under LILYPAD_MAX_ATTEMPTS=2: two attempts with seeds 1 and 2 in parallel sandboxes; the tests choose; the PR lists both', async () => {
  const n = app.gh.createIssue(OWNER, 'calc', { title: 'Pick the best attempt', body: 'add is wrong', author: 'alice' }).number;
  await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
  await waitFor(() => /Done|Failed|No change/.test(status('calc', n)), 'the job to finish', 180_000);
  assert.match(status('calc', n), /Done/);

  const seeds = [...new Set(requests('Pick the best attempt').map((b) => b['seed']))].sort();
  assert.deepEqual(seeds, [1, 2], 'two attempts (the repository asked for 3; the administrator allows 2), each with its own seed');

  const pr = app.gh.pulls(OWNER, 'calc').find((p) => p.head.ref === `lilypad/issue-${n}`)!;
  assert.equal(app.gh.readFile(OWNER, 'calc', pr.head.ref, 'calc.py'), 'def add(a, b):\n    return a + b\n', 'the attempt whose tests passed is published');
  const body = pr.body ?? '';
  assert.match(body, /### Attempts/);
  assert.match(body, /\| 2 ✔ chosen \| `agent` \| verified \| ✅ passed \|/);
  assert.match(body, /\| 1 \| `agent` \| [a-z]+ \| ❌ failed \|/);
  // Both attempts' patches are kept with the run.
  const { readdirSync } = await import('node:fs');
  const path = await import('node:path');
  const runs = readdirSync(path.join(app.dataDir, 'runs'));
  const kept = runs.flatMap((r) => readdirSync(path.join(app.dataDir, 'runs', r)).filter((f) => /^attempt-\d\.diff$/.test(f)));
  assert.deepEqual(kept.sort(), ['attempt-1.diff', 'attempt-2.diff']);
});

test('without `attempts`, one run that sends no seed (the trained request settings)', async () => {
  const n = app.gh.createIssue(OWNER, 'single', { title: 'One attempt only', body: 'add is wrong', author: 'alice' }).number;
  await app.send('issues', app.gh.labelIssue(OWNER, 'single', n, 'lilypad', 'alice'));
  await waitFor(() => /Done|Failed|No change/.test(status('single', n)), 'the job to finish', 180_000);
  const reqs = requests('One attempt only');
  assert.ok(reqs.length >= 1);
  assert.ok(reqs.every((b) => !('seed' in b)), 'no seed in a single run');
  const pr = app.gh.pulls(OWNER, 'single').find((p) => p.head.ref === `lilypad/issue-${n}`)!;
  assert.doesNotMatch(pr.body ?? '', /### Attempts/);
});
