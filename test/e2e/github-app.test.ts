import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDockerClient } from '../../src/sandbox/sandbox.ts';
import { Redis } from 'ioredis';
import { RunStore } from '../../src/observability/run-store.ts';
import { CALC_REPO } from '../support/fixture-repo.ts';
import { startApp, titleOf, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';

const docker = createDockerClient();
const runsRedis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 3 });
const OWNER = 'acme';
const CONFIG = 'test: python3 -m unittest -q\n';

const FIX_CALC = [
  { reasoning: 'Read the code.', toolCalls: [{ name: 'Read', arguments: '{"file_path": "calc.py"}' }] },
  {
    toolCalls: [
      { name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } },
      // What a prompt-injected model would try: dump everything it can reach.
      { name: 'Bash', arguments: { command: 'env; cat /proc/1/environ | tr "\\0" "\\n"; cat .git/config; git remote -v; ls -la ~ /; cat ~/.git-credentials 2>&1' } },
    ],
  },
  { content: 'Fixed `add()` so it returns the sum. @everyone please review.' },
];

const book: ScriptBook = {
  'add() returns the wrong result': FIX_CALC,
  'Rerun me': FIX_CALC,
  'Also touch CI': [
    {
      toolCalls: [
        { name: 'Write', arguments: { file_path: '.github/workflows/ci.yml', content: 'on: push\njobs: {}\n' } },
        { name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } },
      ],
    },
    { content: 'Fixed add and tuned CI.' },
  ],
  'Docs only': [{ toolCalls: [{ name: 'Write', arguments: { file_path: 'NOTES.md', content: 'notes\n' } }] }, { content: 'Wrote notes.' }],
  'Runs out of steps': [
    { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
    { toolCalls: [{ name: 'Bash', arguments: { command: 'true' } }] },
    { content: 'never reached' },
  ],
  'Slow one': (turn) => (turn === 0 ? { delayMs: 2500, toolCalls: [{ name: 'Bash', arguments: { command: 'true' } }] } : { content: 'ok, nothing to change' }),
  'Hangs forever': () => ({ hang: true }),
  'Leaks a token': [
    { toolCalls: [{ name: 'Write', arguments: { file_path: 'config.py', content: `TOKEN = "ghp_${'a1B2'.repeat(9)}"\n` } }] },
    { content: 'Added the token.' },
  ],
  'Needs setup': [
    { toolCalls: [{ name: 'Read', arguments: { file_path: 'net-during-setup.txt' } }, { name: 'Bash', arguments: { command: 'ls /sys/class/net' } }] },
    { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
    { content: 'Fixed.' },
  ],
  'Org default config': [{ toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] }, { content: 'Fixed.' }],
  'Closed while queued': () => ({ hang: true }),
};

describe('GitHub App end to end (lilypad start against the GitHub stand-in)', () => {
  let app: AppHarness;
  let issueNo = 0;
  const newIssue = (title: string, repo = 'calc', body = 'See title.') => {
    const issue = app.gh.createIssue(OWNER, repo, { title, body, author: 'alice' });
    issueNo = issue.number;
    return issue.number;
  };
  const status = (repo: string, n: number) => app.gh.comments(OWNER, repo, n).find((c) => c.body.startsWith('<!-- lilypad:status -->'));
  const statusSays = (repo: string, n: number, re: RegExp) => waitFor(() => re.test(status(repo, n)?.body ?? ''), `status of ${repo}#${n} to match ${re}`, 90_000);
  const containersFor = async (repo: string, n: number) =>
    (await docker.listContainers({ all: true, filters: { label: [`dev.lilypad.issue=${OWNER}/${repo}#${n}`, `dev.lilypad.worker=${app.prefix}`] } })).length;
  const prsFor = (repo: string, n: number) => app.gh.pulls(OWNER, repo).filter((p) => p.head.ref === `lilypad/issue-${n}`);
  const chatsFor = (title: string) => app.model.chatRequests().filter((b) => titleOf(b) === title);
  /** Waits until the worker has handled a delivery (its "event handled" log line): after that, nothing more comes of it. */
  const handled = async (delivery: Promise<{ deliveryId: string }>) => {
    const { deliveryId } = await delivery;
    await waitFor(() => app.logs().split('\n').some((l) => l.includes(`"delivery":"${deliveryId}"`) && l.includes('event handled')), `delivery ${deliveryId} to be handled`, 30_000);
  };

  before(async () => {
    app = await startApp({ book });
    app.gh.createInstallation({ login: OWNER, type: 'Organization' });
    app.gh.createUser('alice');
    app.gh.createUser('bob');
    app.gh.createUser('dependabot[bot]', { type: 'Bot' });
    app.gh.createRepo(OWNER, 'calc', { files: { ...CALC_REPO, '.github/lilypad.yml': CONFIG } });
    app.gh.createRepo(OWNER, 'budget', { files: { ...CALC_REPO, '.github/lilypad.yml': `${CONFIG}max_steps: 2\n` } });
    app.gh.createRepo(OWNER, 'badconf', { files: { ...CALC_REPO, '.github/lilypad.yml': 'max_steps: lots\ntset: pytest\n' } });
    // The organisation-wide fallback: repositories without their own file use acme/.github's.
    app.gh.createRepo(OWNER, '.github', { files: { '.github/lilypad.yml': 'trigger_label: ai-fix\nlabels: [from-org]\n' } });
    app.gh.createRepo(OWNER, 'orgdefault', { files: CALC_REPO });
    app.gh.createRepo(OWNER, 'setup', {
      // The last setup command also changes a file the agent will edit next to.
      files: { ...CALC_REPO, '.github/lilypad.yml': `${CONFIG}setup:\n  - ls /sys/class/net > net-during-setup.txt\n  - echo built > build-info.txt\n  - printf '# built\\n' >> calc.py\n` },
    });
    for (const repo of ['calc', 'budget', 'badconf', 'orgdefault', 'setup']) app.gh.addCollaborator(OWNER, repo, 'alice', 'maintain');
  });
  after(async () => {
    await app?.stop();
    runsRedis.disconnect();
  });

  test('a maintainer labels an issue: a tested draft pull request appears, with the right diff, body, labels and reviewer', async () => {
    const n = newIssue('add() returns the wrong result', 'calc', 'add(2, 3) gives -1.\r\n<!-- secret instructions -->');
    const res = await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    assert.equal(res.status, 200);
    await statusSays('calc', n, /Done/);

    const [pr, ...others] = prsFor('calc', n);
    assert.ok(pr, 'a pull request was opened');
    assert.equal(others.length, 0);
    assert.equal(pr.draft, true);
    assert.equal(pr.base.ref, 'main');
    assert.match(pr.title, /add\(\) returns the wrong result/);
    assert.match(pr.body ?? '', /Fixed `add\(\)` so it returns the sum\. `@everyone` please review\./);
    assert.match(pr.body ?? '', /- `calc.py` \(\+1 −1\)/);
    assert.match(pr.body ?? '', /\*\*Before the change:\*\* ❌ failed/);
    assert.match(pr.body ?? '', /\*\*After the change:\*\* ✅ passed/);
    assert.match(pr.body ?? '', /written by a machine/);
    assert.match(pr.body ?? '', /Closes #\d+$/);
    // The existing test of add() failed before and passes after: Lilypad's evidence verifies the change.
    assert.match(pr.body ?? '', /### Evidence\n\n✅ \*\*Verified\*\*/);
    assert.match(pr.body ?? '', /\*\*Fixed\*\* \(failed before the change, pass after\): `[^`]*test_add[^`]*`/);
    assert.deepEqual(pr.labels.map((l) => l.name).sort(), ['lilypad', 'lilypad:verified', 'needs-human-review']);
    assert.deepEqual(pr.requested_reviewers.map((u) => u.login), ['alice']);
    assert.equal(app.gh.readFile(OWNER, 'calc', `lilypad/issue-${n}`, 'calc.py'), 'def add(a, b):\n    return a + b\n');
    assert.equal(app.gh.readFile(OWNER, 'calc', 'main', 'calc.py'), CALC_REPO['calc.py']);

    // The status comment went through its states, edited in place (one comment).
    const comment = status('calc', n)!;
    const history = [...comment.edits, comment.body].join('\n---\n');
    for (const state of ['Queued', 'Running', 'Testing', 'Done']) assert.match(history, new RegExp(state));
    assert.match(comment.body, new RegExp(`draft pull request #${pr.number}`));
    assert.equal(app.gh.comments(OWNER, 'calc', n).filter((c) => c.body.includes('lilypad:status')).length, 1);

    // The model saw the issue without the hidden comment.
    const first = chatsFor('add() returns the wrong result')[0]!;
    assert.equal(first.messages[1]!.content, 'add() returns the wrong result\nadd(2, 3) gives -1.\r\n');

    // No token anywhere the model, the logs or the disk could show it.
    const tokens = app.gh.tokens().map((t) => t.token);
    assert.ok(tokens.length > 0);
    const observations = JSON.stringify(app.model.chatRequests());
    const disk = filesContaining(app.dataDir, tokens);
    for (const token of tokens) {
      assert.ok(!observations.includes(token), 'no token in anything sent to the model');
      assert.ok(!app.logs().includes(token), 'no token in the logs');
    }
    assert.deepEqual(disk, [], 'no token in files under the data dir (mirrors, runs, trajectories)');
    assert.match(observations, /Exit code: \d+\\nSTDOUT:/);
    assert.equal(await containersFor('calc', n), 0, 'the sandbox is gone');

    // The run's record for the run pages is in Redis: outcome, steps, the pull request, the diff.
    const store = new RunStore(runsRedis, { prefix: app.prefix, retentionDays: 30, maxBytes: 8 << 20 });
    await waitFor(async () => (await store.list()).some((r) => r.issueNumber === n && r.outcome === 'pull_request'), 'the run record', 10_000);
    const summary = (await store.list()).find((r) => r.issueNumber === n)!;
    assert.equal(summary.pr?.number, pr.number);
    assert.ok(summary.steps >= 2);
    const loaded = await store.load(summary.runId);
    assert.ok(loaded, 'the whole record loads');
    assert.match(JSON.stringify(loaded), /return a \+ b/, 'the diff is in the record');

    // The job's tokens were scoped to this one repository, with only what a job needs, and revoked
    // (revocation follows the final status edit, which needs a live token).
    await waitFor(() => app.gh.tokens().filter((t) => t.repositories !== null).every((t) => t.expiresAt.getTime() <= Date.now()), 'the job tokens to be revoked', 10_000);
    const jobTokens = app.gh.tokens().filter((t) => t.repositories !== null);
    assert.ok(jobTokens.length >= 1);
    for (const t of jobTokens) {
      assert.deepEqual(t.repositories, ['calc']);
      assert.deepEqual(t.permissions, { contents: 'write', pull_requests: 'write', issues: 'write', metadata: 'read' });
      assert.ok(t.expiresAt.getTime() <= Date.now(), 'revoked when the job ended');
    }
  });

  test('a re-run force-updates the same branch and pull request', async () => {
    const n = newIssue('Rerun me');
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await statusSays('calc', n, /Done/);
    const firstPr = prsFor('calc', n)[0]!;
    await app.send('issue_comment', app.gh.commentOnIssue(OWNER, 'calc', n, '/lilypad', 'alice'));
    await statusSays('calc', n, /Done.*updated draft pull request/);
    const prs = prsFor('calc', n);
    assert.equal(prs.length, 1);
    assert.equal(prs[0]!.number, firstPr.number);
    assert.equal(chatsFor('Rerun me').filter((b) => b.messages.length === 2).length, 2, 'two runs');
  });

  test('the same delivery twice and two quick labels give one job and one pull request', async () => {
    const n = newIssue('Slow one');
    const payload = app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice');
    await app.send('issues', payload, 'delivery-dup-1');
    await app.send('issues', payload, 'delivery-dup-1');
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => app.gh.comments(OWNER, 'calc', n).some((c) => /already/.test(c.body)), 'the "already" reply');
    await statusSays('calc', n, /No change|Done/);
    assert.equal(chatsFor('Slow one').filter((b) => b.messages.length === 2).length, 1, 'one run');
    assert.ok(prsFor('calc', n).length <= 1);
  });

  test('removing the label mid-run cancels: no container, no pull request, status says cancelled', async () => {
    const n = newIssue('Hangs forever');
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await waitFor(() => chatsFor('Hangs forever').length > 0, 'the agent to call the model', 90_000);
    // The agent's sandbox, and the baseline's beside it when an earlier run kept the environment.
    assert.ok((await containersFor('calc', n)) >= 1, 'the sandbox exists while the agent runs');
    const t = Date.now();
    await app.send('issues', app.gh.unlabelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await statusSays('calc', n, /Cancelled\*\* by @alice/);
    await waitFor(async () => (await containersFor('calc', n)) === 0, 'the sandbox to be removed', 15_000);
    assert.ok(Date.now() - t < 15_000, 'within seconds');
    assert.equal(prsFor('calc', n).length, 0);
    assert.equal(app.gh.branchSha(OWNER, 'calc', `lilypad/issue-${n}`), null);
  });

  test('someone without write access triggers nothing and gets one polite reply', async () => {
    const n = newIssue('Visitor wants a fix');
    await handled(app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'bob')));
    await handled(app.send('issue_comment', app.gh.commentOnIssue(OWNER, 'calc', n, '/lilypad', 'bob')));
    const replies = app.gh.comments(OWNER, 'calc', n).filter((c) => /write, maintain or admin/.test(c.body));
    assert.equal(replies.length, 1);
    assert.match(replies[0]!.body, /@bob/);
    assert.equal(status('calc', n), undefined);
    assert.equal(chatsFor('Visitor wants a fix').length, 0);
  });

  test('a bot is ignored unless the configuration allows it', async () => {
    const n = newIssue('Bot wants a fix');
    app.gh.addCollaborator(OWNER, 'calc', 'dependabot[bot]', 'write');
    await handled(app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'dependabot[bot]')));
    assert.equal(app.gh.comments(OWNER, 'calc', n).filter((c) => c.user.login !== 'alice').length, 0);
  });

  test('a bad configuration file gets one comment listing each problem, and no job', async () => {
    const n = newIssue('Broken config', 'badconf');
    await app.send('issues', app.gh.labelIssue(OWNER, 'badconf', n, 'lilypad', 'alice'));
    await waitFor(() => app.gh.comments(OWNER, 'badconf', n).some((c) => /is not valid/.test(c.body)), 'the config error comment');
    const body = app.gh.comments(OWNER, 'badconf', n).find((c) => /is not valid/.test(c.body))!.body;
    assert.match(body, /`max_steps`/);
    assert.match(body, /unknown setting `tset`/);
    assert.equal(status('badconf', n), undefined);
    assert.equal(chatsFor('Broken config').length, 0);
  });

  test('a change to a workflow file is left out of the pull request and reported', async () => {
    const n = newIssue('Also touch CI');
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await statusSays('calc', n, /Done/);
    const pr = prsFor('calc', n)[0]!;
    assert.match(pr.body ?? '', /### Left out of this pull request\n\n- `.github\/workflows\/ci.yml`: files under `.github\/` \(workflows, [^)]*\) are never published/);
    assert.doesNotMatch(pr.body ?? '', /- `.github\/workflows\/ci.yml` \(\+/);
    assert.equal(app.gh.readFile(OWNER, 'calc', `lilypad/issue-${n}`, '.github/workflows/ci.yml'), null);
    assert.equal(app.gh.readFile(OWNER, 'calc', `lilypad/issue-${n}`, 'calc.py'), 'def add(a, b):\n    return a + b\n');
  });

  test('a failing baseline is reported honestly, before and after', async () => {
    const n = newIssue('Docs only');
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await statusSays('calc', n, /Done/);
    const body = prsFor('calc', n)[0]!.body ?? '';
    assert.match(body, /\*\*Before the change:\*\* ❌ failed \(exit 1/);
    assert.match(body, /\*\*After the change:\*\* ❌ failed \(exit 1/);
  });

  test('a run that exhausts its budget keeps its work in a draft marked incomplete', async () => {
    const n = newIssue('Runs out of steps', 'budget');
    await app.send('issues', app.gh.labelIssue(OWNER, 'budget', n, 'lilypad', 'alice'));
    await statusSays('budget', n, /Done, incomplete/);
    const pr = prsFor('budget', n)[0]!;
    assert.match(pr.title, /^\[incomplete\]/);
    assert.match(pr.body ?? '', /\*\*Incomplete\.\*\* The run stopped because the budget ran out \(`max_turns`\)/);
    assert.match(status('budget', n)!.body, /max_turns/);
    assert.equal(chatsFor('Runs out of steps').length, 2);
  });

  test('a change that contains a token-shaped secret is refused: nothing is pushed or opened', async () => {
    const n = newIssue('Leaks a token');
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await statusSays('calc', n, /Failed/);
    assert.match(status('calc', n)!.body, /looks like a secret .*nothing was published/);
    assert.equal(prsFor('calc', n).length, 0);
    assert.equal(app.gh.branchSha(OWNER, 'calc', `lilypad/issue-${n}`), null);
  });

  test("a repository without its own file uses the organisation's .github configuration", async () => {
    const n = newIssue('Org default config', 'orgdefault');
    await handled(app.send('issues', app.gh.labelIssue(OWNER, 'orgdefault', n, 'lilypad', 'alice')));
    assert.equal(status('orgdefault', n), undefined, 'the default label is not the trigger here');
    await app.send('issues', app.gh.labelIssue(OWNER, 'orgdefault', n, 'ai-fix', 'alice'));
    await statusSays('orgdefault', n, /Done/);
    const pr = prsFor('orgdefault', n)[0]!;
    // The organisation's labels, and the evidence label (the repository's tests are inferred here).
    assert.deepEqual(pr.labels.map((l) => l.name).filter((l) => !l.startsWith('lilypad:')), ['from-org']);
  });

  test('setup commands run with network, the agent runs without, and setup output stays out of the pull request', async () => {
    const n = newIssue('Needs setup', 'setup');
    await app.send('issues', app.gh.labelIssue(OWNER, 'setup', n, 'lilypad', 'alice'));
    await statusSays('setup', n, /Done/);
    const second = chatsFor('Needs setup')[1]!;
    const [duringSetup, duringAgent] = second.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
    assert.match(duringSetup!, /^net-during-setup\.txt\n1\. eth0\n2\. lo$/);
    assert.equal(duringAgent, 'Exit code: 0\nSTDOUT:\nlo\n\nSTDERR:\n');
    const pr = prsFor('setup', n)[0]!;
    assert.doesNotMatch(pr.body ?? '', /build-info|net-during-setup/);
    assert.equal(app.gh.readFile(OWNER, 'setup', `lilypad/issue-${n}`, 'build-info.txt'), null);
    // A file both setup and the agent changed is taken whole against the base, so it applies.
    assert.equal(app.gh.readFile(OWNER, 'setup', `lilypad/issue-${n}`, 'calc.py'), 'def add(a, b):\n    return a + b\n# built\n');
  });

  test('closing the issue removes a queued job', async () => {
    // Occupy the single worker slot, then queue a second job and close its issue.
    const busy = newIssue('Hangs forever');
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', busy, 'lilypad', 'alice'));
    await waitFor(() => status('calc', busy)?.body.includes('Running') ?? false, 'the first job to run', 90_000);
    const n = newIssue('Closed while queued');
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', n, 'lilypad', 'alice'));
    await statusSays('calc', n, /Queued/);
    await app.send('issues', app.gh.closeIssue(OWNER, 'calc', n, 'alice'));
    await statusSays('calc', n, /Cancelled.*the issue was closed/);
    await app.send('issue_comment', app.gh.commentOnIssue(OWNER, 'calc', busy, '/lilypad cancel', 'alice'));
    await statusSays('calc', busy, /Cancelled\*\* by @alice/);
    assert.equal(chatsFor('Closed while queued').length, 0);
    void issueNo;
  });
});

/** Every file under `dir` (recursively) whose bytes contain one of `needles`. */
function filesContaining(dir: string, needles: string[]): string[] {
  const hits: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath ?? entry.path, entry.name);
    const text = readFileSync(file).toString('latin1');
    if (needles.some((n) => text.includes(n))) hits.push(file);
  }
  return hits;
}
