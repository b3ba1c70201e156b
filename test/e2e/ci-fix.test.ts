import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { CALC_REPO } from '../support/fixture-repo.ts';
import { startApp, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';
import { startGitHubStandin, type GitHubStandin, type ProducedWebhook, type Pull, type WebhookPayload } from '../support/github-standin/index.ts';
import { BOT, FIX_ADD, LoopScript, eventually, followupReplies, idIn, parentOf, revisionRows, userText, type FollowUpReply } from '../support/review-loop.ts';

/**
 * Lilypad fixes the CI it breaks, end to end: the real app (`lilypad start`) against the GitHub
 * stand-in (check runs, annotations, Actions job logs, commit statuses and their webhooks), the
 * scripted model server, Docker and Redis. Each repository opens one Lilypad pull request through
 * the normal issue flow; the test then plays CI on its head and checks what Lilypad does: the hint
 * (`ci_fix: command`), `/lilypad fix-ci`, the automatic fix (`ci_fix: auto`) and its bounds (the
 * cap, a person's push, the same failure twice), checks by other apps, commit statuses.
 */

const OWNER = 'acme';
const CONFIG = 'test: python3 -m unittest -q\n';
const RUN_DEADLINE = 150_000;
const HANDLED_DEADLINE = 30_000;
/** Secret-shaped, and a mention: what a job log may print from an issue or a comment. */
const LEAKED_TOKEN = `ghp_${'Lk7q'.repeat(9)}`;
/** What the app needs for CI results (app.yml); the stand-in's default set has none of them. */
const PERMISSIONS = { metadata: 'read', contents: 'write', issues: 'write', pull_requests: 'write', checks: 'read', actions: 'read', statuses: 'read' } as const;
const EVENTS = ['issues', 'issue_comment', 'pull_request', 'pull_request_review', 'pull_request_review_comment', 'check_suite', 'check_run', 'status'];

describe('Lilypad fixes the CI it breaks', () => {
  const book: ScriptBook = {};
  let gh: GitHubStandin;
  let app: AppHarness;

  /** The follow-up writes a file of its own, so each fix is a commit. */
  const writesNote: FollowUpReply = (turn, _body, run) =>
    turn === 0 ? { toolCalls: [{ name: 'Write', arguments: { file_path: `ci-fix-${run + 1}.txt`, content: `fix ${run + 1}\n` } }] } : { content: `Fixed the CI failure (fix ${run + 1}).` };
  const script = (title: string): LoopScript => {
    const s = new LoopScript(title, `The issue behind "${title}".`, FIX_ADD, writesNote);
    book[title] = s.entry;
    return s;
  };

  const openLilypadPr = async (s: LoopScript, repo: string): Promise<{ pr: Pull; head: string }> => {
    const issue = gh.createIssue(OWNER, repo, { title: s.title, body: s.issueBody, author: 'alice' });
    await app.send('issues', gh.labelIssue(OWNER, repo, issue.number, 'lilypad', 'alice'));
    const status = () => gh.comments(OWNER, repo, issue.number).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? '';
    await waitFor(() => /Done|Failed|No change/.test(status()), `the original run on ${repo}#${issue.number}`, RUN_DEADLINE);
    assert.match(status(), /Done/, 'the original run opened a pull request');
    const pr = gh.pulls(OWNER, repo).find((p) => p.head.ref === `lilypad/issue-${issue.number}`);
    assert.ok(pr);
    return { pr, head: headOf(repo, pr) };
  };
  const headOf = (repo: string, pr: Pull): string => {
    const sha = gh.branchSha(OWNER, repo, pr.head.ref);
    assert.ok(sha);
    return sha;
  };
  const pullNow = (repo: string, n: number): Pull => gh.pulls(OWNER, repo).find((p) => p.number === n)!;
  const replies = (repo: string, pr: Pull) => followupReplies(gh, OWNER, repo, pr.number);
  const followupEnds = async (repo: string, pr: Pull, index: number): Promise<string> => {
    await waitFor(() => /Done|Failed|No change|Cancelled/.test(replies(repo, pr)[index]?.body ?? ''), `follow-up status reply #${index + 1} on ${repo}#${pr.number}`, RUN_DEADLINE);
    return replies(repo, pr)[index]!.body;
  };
  /** Lilypad's other comments on the pull request: hints, the cap, refusals (not status replies). */
  const botNotes = (repo: string, pr: Pull) => gh.comments(OWNER, repo, pr.number).filter((c) => c.user.login === BOT && !c.body.startsWith('<!--'));
  const commitMessage = (repo: string, sha: string): string =>
    execFileSync('git', ['--git-dir', path.join(gh.gitRoot, OWNER, `${repo}.git`), 'log', '-1', '--format=%B', sha], { encoding: 'utf8' });

  /** The worker's outcome for a delivery (its "event handled" log line), once it has handled it. */
  const outcomeOf = async (deliveryId: string): Promise<string> => {
    const line = () => app.logs().split('\n').find((l) => l.includes(`"delivery":"${deliveryId}"`) && l.includes('event handled'));
    await waitFor(() => line() !== undefined, `delivery ${deliveryId} to be handled`, HANDLED_DEADLINE);
    return String((JSON.parse(line()!) as { outcome?: unknown }).outcome);
  };
  /**
   * Delivers CI webhooks as GitHub sends them (a check run's `created` too) and returns the worker's
   * outcome for each one that can matter: a completed check or suite that failed, a failing status.
   */
  const settle = async (webhooks: ProducedWebhook[]): Promise<string[]> => {
    const handled: string[] = [];
    for (const w of webhooks) {
      const res = await app.send(w.event, w.payload);
      assert.equal(res.status, 200, `${w.event} delivery accepted`);
      const action = (w.payload as { action?: unknown }).action;
      if (w.event === 'status' || action === 'completed') handled.push(res.deliveryId);
    }
    return Promise.all(handled.map(outcomeOf));
  };
  const comment = async (repo: string, pr: Pull, body: string, author: string): Promise<WebhookPayload> => {
    const payload = gh.commentOnPullRequest(OWNER, repo, pr.number, body, author);
    const res = await app.send('issue_comment', payload);
    assert.equal(res.status, 200);
    return payload;
  };

  before(async () => {
    gh = await startGitHubStandin({ appSlug: 'lilypad', permissions: { ...PERMISSIONS }, events: EVENTS });
    app = await startApp({ book, share: { gh } });
    gh.createInstallation({ login: OWNER, type: 'Organization' });
    for (const login of ['alice', 'rita', 'jenkins']) gh.createUser(login);
    gh.createRepo(OWNER, 'cicmd', { files: { ...CALC_REPO, '.github/lilypad.yml': CONFIG } });
    gh.createRepo(OWNER, 'ciauto', { files: { ...CALC_REPO, '.github/lilypad.yml': `${CONFIG}ci: run\nci_fix: auto\nci_fix_attempts: 1\n` } });
    gh.createRepo(OWNER, 'cistatus', { files: { ...CALC_REPO, '.github/lilypad.yml': `${CONFIG}ci: run\nci_fix: auto\nci_status_contexts: [ci/jenkins]\n` } });
    for (const repo of ['cicmd', 'ciauto', 'cistatus']) {
      gh.addCollaborator(OWNER, repo, 'alice', 'maintain');
      gh.addCollaborator(OWNER, repo, 'rita', 'read');
    }
  });
  after(async () => {
    await app?.stop();
    await gh?.close();
  });

  test('ci_fix: command: CI released, a failing Actions job: one hint per head, nothing for another app or a non-writer; /lilypad fix-ci by a writer fixes it', async () => {
    const s = script('CI fix: on command');
    const { pr, head: head0 } = await openLilypadPr(s, 'cicmd');
    assert.match(commitMessage('cicmd', head0), /\[skip ci\]/, 'CI is held on the first commit');

    // A writer releases CI: Lilypad pushes an empty commit without the marker, and says so.
    await comment('cicmd', pr, '/lilypad ci', 'alice');
    await waitFor(() => botNotes('cicmd', pr).length === 1, 'the release reply');
    const released = headOf('cicmd', pr);
    assert.notEqual(released, head0, 'the release commit');
    const notesAfter = () => botNotes('cicmd', pr).slice(1);

    // A failing check by an app that is not a CI provider: nothing.
    const other = await gh.addCheckRun(OWNER, 'cicmd', { ref: released, name: 'Code quality', app: 'sonarcloud', conclusion: 'failure', summary: 'Quality gate failed' });
    const ignored = await settle(other.webhooks);
    assert.equal(ignored.length, 2);
    for (const o of ignored) assert.match(o, /not a CI provider/);
    assert.equal(notesAfter().length, 0, 'no hint for a check by another app');

    // The repository's CI fails: an Actions job with an annotation and a log that prints a token and a mention.
    const failing = await gh.addCheckRun(OWNER, 'cicmd', {
      ref: released,
      name: 'test (3.12)',
      conclusion: 'failure',
      annotations: [{ path: 'calc.py', start_line: 2, annotation_level: 'failure', title: 'test_add', message: 'AssertionError: 5 != -1' }],
      log: ['##[group]Run python -m unittest', 'python -m unittest', '##[endgroup]', `echo issue text: thanks @eve, use ${LEAKED_TOKEN}`, 'FAIL: test_add (test_calc.AddTest)', 'AssertionError: 5 != -1'],
      workflow: 'CI',
    });
    const decided = await settle(failing.webhooks);
    assert.deepEqual(decided.map((o) => o.replace(/^#\d+: /, '')).sort(), ['already decided for this head', 'hint: command'], 'a check_run and a check_suite event: one decision');
    // Redelivered, under a new delivery id: still one hint.
    const suite = failing.webhooks.find((w) => w.event === 'check_suite')!;
    assert.match((await settle([suite]))[0]!, /already decided/);
    const hints = notesAfter();
    assert.equal(hints.length, 1, `one hint for the head:\n${hints.map((h) => h.body).join('\n---\n')}`);
    assert.match(hints[0]!.body, /`test \(3\.12\)`/);
    assert.match(hints[0]!.body, /\/lilypad fix-ci/);
    assert.ok(!hints[0]!.body.includes('Code quality'), 'the other app’s check is not named');
    assert.equal(replies('cicmd', pr).length, 0, 'ci_fix: command starts nothing by itself');

    // Someone with read access asks: a polite refusal, no follow-up.
    await comment('cicmd', pr, '/lilypad fix-ci', 'rita');
    await waitFor(() => notesAfter().length === 2, 'the refusal');
    assert.match(notesAfter()[1]!.body, /write, maintain or admin access/);

    // A writer asks.
    const ask = await comment('cicmd', pr, '/lilypad fix-ci', 'alice');
    await waitFor(() => gh.reactions(idIn(ask, 'comment')).some((r) => r.content === 'eyes' && r.user.login === BOT), 'eyes on /lilypad fix-ci');
    const final = await followupEnds('cicmd', pr, 0);
    assert.match(final, /Done/);
    assert.match(final, /`test \(3\.12\)`/, 'the status reply names the check it addressed');
    assert.match(final, /\/lilypad ci/, 'and says CI runs once released');
    assert.equal(replies('cicmd', pr).length, 1, "only the writer's request became a follow-up");
    assert.equal(s.followUpRuns, 1);

    const task = userText(s.task(0)!);
    assert.equal(task.split('\n')[0], s.title, 'the original issue title first');
    assert.ok(task.includes(s.issueBody), 'the original issue text');
    assert.match(task, /## Failing CI checks to fix/);
    assert.ok(task.includes('test (3.12)'), 'the check name');
    assert.match(task, /`calc\.py:2` \(failure\): test_add: AssertionError: 5 != -1/, 'the annotation, file:line: message');
    assert.ok(task.includes('FAIL: test_add (test_calc.AddTest)'), 'the log tail');
    assert.ok(!task.includes('Code quality') && !task.includes('Quality gate'), 'nothing from the other app');
    // The log's secret and mention reach the model redacted and defused.
    assert.ok(!s.everythingSent().includes(LEAKED_TOKEN), 'the token never reaches the model');
    assert.match(task, /use \[REDACTED\]/);
    assert.match(task, /thanks `@eve`/);

    const head1 = headOf('cicmd', pr);
    assert.equal(parentOf(gh, OWNER, 'cicmd', head1), released, 'the fix is a commit on top of the released head');
    assert.match(commitMessage('cicmd', head1), /\[skip ci\]/, 'the fix still holds CI until a writer releases it');
    await eventually(() => {
      const rows = revisionRows(pullNow('cicmd', pr.number).body);
      assert.ok(rows && rows.length === 2, `two revisions:\n${rows?.join('\n')}`);
      assert.ok(rows[1]!.includes(head1.slice(0, 7)));
      assert.match(rows[1]!, /\/lilypad fix-ci` by @alice: fixing CI `test \(3\.12\)`/);
    });
  });

  test('ci_fix: auto: a failing check fixes itself without a command; past ci_fix_attempts Lilypad says so once and starts nothing', async () => {
    const s = script('CI fix: automatic');
    const { pr, head: head0 } = await openLilypadPr(s, 'ciauto');
    assert.doesNotMatch(commitMessage('ciauto', head0), /\[skip ci\]/, 'ci: run');

    const lint = await gh.addCheckRun(OWNER, 'ciauto', { ref: head0, name: 'lint', conclusion: 'failure', log: ['ruff check .', 'calc.py:1:1: E999 SyntaxError: invalid syntax'], workflow: 'Lint' });
    const outcomes = await settle(lint.webhooks);
    assert.equal(outcomes.filter((o) => /automatic CI fix: queued/.test(o)).length, 1, `one fix for two events of one failure:\n${outcomes.join('\n')}`);
    assert.match(await followupEnds('ciauto', pr, 0), /Done.*`lint`/s);
    const task = userText(s.task(0)!);
    assert.ok(task.includes('lint') && task.includes('E999 SyntaxError: invalid syntax'), 'the check and its log tail');
    const head1 = headOf('ciauto', pr);
    assert.equal(parentOf(gh, OWNER, 'ciauto', head1), head0);
    await eventually(() => {
      const rows = revisionRows(pullNow('ciauto', pr.number).body);
      assert.ok(rows && rows.length === 2);
      assert.match(rows[1]!, /automatic CI fix: fixing CI `lint`/);
    });

    // CI fails again on the fix's commit: ci_fix_attempts is 1.
    const again = await gh.addCheckRun(OWNER, 'ciauto', { ref: head1, name: 'test', conclusion: 'failure', log: ['FAIL: test_add'], workflow: 'Tests' });
    assert.ok((await settle(again.webhooks)).some((o) => /ci_fix_attempts \(1\) reached/.test(o)));
    const status = await gh.addCommitStatus(OWNER, 'ciauto', { ref: head1, state: 'error', context: 'ci/other', description: 'Build errored', creator: 'jenkins' });
    await settle(status.webhooks);
    const notes = botNotes('ciauto', pr);
    assert.equal(notes.length, 1, `one cap note:\n${notes.map((n) => n.body).join('\n---\n')}`);
    assert.match(notes[0]!.body, /ci_fix_attempts: 1/);
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(replies('ciauto', pr).length, 1, 'no second fix');
    assert.equal(s.followUpRuns, 1);
  });

  test('a commit status failing (a CI that only posts statuses) fixes itself; the same failure after the fix, and a failure after a person pushed, start nothing', async () => {
    const s = script('CI fix: statuses');
    const { pr, head: head0 } = await openLilypadPr(s, 'cistatus');

    const failed = await gh.addCommitStatus(OWNER, 'cistatus', { ref: head0, state: 'failure', context: 'ci/jenkins', description: 'Build failed: test_add', creator: 'jenkins' });
    assert.match((await settle(failed.webhooks))[0]!, new RegExp(`#${pr.number}: automatic CI fix: queued`));
    assert.match(await followupEnds('cistatus', pr, 0), /Done.*`ci\/jenkins`/s);
    const task = userText(s.task(0)!);
    assert.ok(task.includes('ci/jenkins') && task.includes('Build failed: test_add'), 'the status context and its description');
    const head1 = headOf('cistatus', pr);

    // The same failure on the fix's commit: not retried.
    const same = await gh.addCommitStatus(OWNER, 'cistatus', { ref: head1, state: 'failure', context: 'ci/jenkins', description: 'Build failed: test_add', creator: 'jenkins' });
    assert.match((await settle(same.webhooks))[0]!, /hint: same_failure/);
    assert.match(botNotes('cistatus', pr)[0]?.body ?? '', /fail the same way/);

    // A person pushes; CI fails on their commit: not Lilypad's to fix by itself.
    const pushed = gh.createBranch(OWNER, 'cistatus', pr.head.ref, { 'CHANGELOG.md': '- add() sums\n' }, { author: 'alice', message: 'Add a changelog entry' });
    const theirs = await gh.addCommitStatus(OWNER, 'cistatus', { ref: pushed, state: 'failure', context: 'ci/jenkins', description: 'Build failed: changelog', creator: 'jenkins' });
    assert.match((await settle(theirs.webhooks))[0]!, /hint: person_pushed/);
    const notes = botNotes('cistatus', pr);
    assert.equal(notes.length, 2);
    assert.match(notes[1]!.body, /someone else has pushed/);
    assert.equal(replies('cistatus', pr).length, 1, 'one fix in all');
    assert.equal(s.followUpRuns, 1);
  });
});
