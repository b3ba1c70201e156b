import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { CALC_REPO } from '../support/fixture-repo.ts';
import { startApp, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';
import type { ChatRequestBody, ScriptedReply } from '../support/model-server.ts';
import { FIX_ADD, LoopScript, followupReplies, idIn, parentOf, userText } from '../support/review-loop.ts';

/**
 * A follow-up's setup commands run with network (through the egress proxy), so they must only ever
 * run code a human owns: the pull request's base, never Lilypad's own unreviewed commit on its head.
 * End to end (the real `lilypad start`, the GitHub stand-in, the scripted model server, Docker,
 * Redis): the repository's setup runs `sh ./setup.sh`; the issue run's agent rewrites setup.sh (and
 * fixes add()); a changes-requested review starts a follow-up. Its setup must run the base's
 * setup.sh, with the setup network; its agent must still see the pull request's head (the rewritten
 * setup.sh, the fixed add()) and the setup's output, and its commit must land on top of the head
 * with only the agent's change.
 */
const OWNER = 'acme';
const REPO = 'setupfollow';
const RUN_DEADLINE = 180_000;

/**
 * The base's setup: says it ran and whether it had the setup network, builds a tracked file, makes
 * an untracked one, and touches two files the pull request changes (README.md, which the issue run
 * deletes, and setup.sh itself): the head's version of those must win.
 */
const BASE_SETUP = [
  '#!/bin/sh',
  'echo "base setup ran" >> /tmp/lilypad-setup-log',
  'echo "proxy ${HTTPS_PROXY:+set}" >> /tmp/lilypad-setup-log',
  'ls /sys/class/net | tr "\\n" " " >> /tmp/lilypad-setup-log',
  'echo >> /tmp/lilypad-setup-log',
  'echo built > stamp.txt',
  'echo made > setup-output.txt',
  'echo "# built" >> README.md',
  'echo "# touched by setup" >> setup.sh',
  '',
].join('\n');
/** What the issue run's agent writes instead: it must never run with network. */
const AGENT_SETUP = '#!/bin/sh\necho "AGENT SETUP RAN as $(id -u)" >> /tmp/lilypad-setup-log\necho agent > stamp.txt\n';
const CONFIG = 'test: python3 -m unittest -q\nsetup:\n  - sh ./setup.sh\n';

const TITLE = 'Follow-up setup: add() should sum';
const ISSUE_BODY = 'add() subtracts. Also make setup.sh say hello.';
const PROBE = 'cat /tmp/lilypad-setup-log; echo "stamp: $(cat stamp.txt)"; ls README.md 2>&1; git branch --show-current; git status --short; git log --format=%s -n 3';

/** The issue run: rewrite setup.sh, delete README.md, fix add(), finish. */
const ORIGINAL: ScriptedReply[] = [
  { toolCalls: [{ name: 'Write', arguments: { file_path: 'setup.sh', content: AGENT_SETUP } }, { name: 'Bash', arguments: { command: 'rm README.md' } }] },
  ...FIX_ADD,
];

/** The follow-up: look at what setup left and at setup.sh, add a docstring, finish. */
const followUp = (turn: number): ScriptedReply => {
  if (turn === 0) return { toolCalls: [{ name: 'Bash', arguments: { command: PROBE } }] };
  if (turn === 1) return { toolCalls: [{ name: 'Read', arguments: { file_path: 'setup.sh' } }] };
  if (turn === 2) return { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'def add(a, b):\n', new_string: 'def add(a, b):\n    """Return the sum of a and b."""\n' } }] };
  return { content: 'Added a docstring to `add()`.' };
};

/** The tool observations a request carries, oldest first. */
const observations = (body: ChatRequestBody): string[] => body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));

describe('a follow-up\'s setup', () => {
  const script = new LoopScript(TITLE, ISSUE_BODY, ORIGINAL, followUp);
  const book: ScriptBook = { [TITLE]: script.entry };
  let app: AppHarness;
  const gitDir = () => path.join(app.gh.gitRoot, OWNER, `${REPO}.git`);
  const git = (...args: string[]) => execFileSync('git', ['--git-dir', gitDir(), ...args], { encoding: 'utf8' });

  before(async () => {
    app = await startApp({ book });
    app.gh.createInstallation({ login: OWNER, type: 'Organization' });
    for (const login of ['alice', 'walt']) app.gh.createUser(login);
    app.gh.createRepo(OWNER, REPO, { files: { ...CALC_REPO, 'setup.sh': BASE_SETUP, 'stamp.txt': 'clean\n', '.github/lilypad.yml': CONFIG } });
    app.gh.addCollaborator(OWNER, REPO, 'alice', 'maintain');
    app.gh.addCollaborator(OWNER, REPO, 'walt', 'write');
  });
  after(async () => {
    await app?.stop();
  });

  test('runs the base\'s setup.sh with the setup network, not the one Lilypad wrote; the agent still works on the pull request\'s head', async () => {
    // The issue run: its setup is the base's (its checkout is the base); the agent rewrites setup.sh.
    const issue = app.gh.createIssue(OWNER, REPO, { title: TITLE, body: ISSUE_BODY, author: 'alice' });
    await app.send('issues', app.gh.labelIssue(OWNER, REPO, issue.number, 'lilypad', 'alice'));
    const status = () => app.gh.comments(OWNER, REPO, issue.number).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? '';
    await waitFor(() => /Done|Failed|No change/.test(status()), 'the issue run', RUN_DEADLINE);
    assert.match(status(), /Done/, `the issue run opened a pull request:\n${status()}`);
    const pr = app.gh.pulls(OWNER, REPO).find((p) => p.head.ref === `lilypad/issue-${issue.number}`);
    assert.ok(pr, 'a pull request on lilypad/issue-N');
    const head0 = app.gh.branchSha(OWNER, REPO, pr.head.ref)!;
    assert.equal(app.gh.readFile(OWNER, REPO, pr.head.ref, 'setup.sh'), AGENT_SETUP, 'the pull request carries the agent\'s setup.sh');
    assert.equal(app.gh.readFile(OWNER, REPO, pr.head.ref, 'stamp.txt'), 'clean\n', 'setup output stayed out of the issue run\'s pull request');
    assert.equal(app.gh.readFile(OWNER, REPO, pr.head.ref, 'README.md'), null, 'the issue run deleted README.md');

    // A review asking for changes starts a follow-up on that head.
    const payload = app.gh.submitReview(OWNER, REPO, pr.number, { author: 'walt', state: 'CHANGES_REQUESTED', body: 'Please give add() a docstring.' });
    idIn(payload, 'review');
    assert.equal((await app.send('pull_request_review', payload)).status, 200);
    const reply = () => followupReplies(app.gh, OWNER, REPO, pr.number)[0]?.body ?? '';
    await waitFor(() => /Done|Failed|No change|Cancelled/.test(reply()), 'the follow-up', RUN_DEADLINE);
    assert.match(reply(), /Done/, `the follow-up revised the pull request:\n${reply()}`);

    // What setup did, as the follow-up's agent saw it right after (its first Bash call).
    assert.equal(script.followUpRuns, 1);
    const calls = script.calls.filter((c) => c.run === 0);
    assert.ok(userText(calls[0]!.body).includes('Please give add() a docstring.'), 'the follow-up\'s task is the review');
    const [probe, read] = observations(calls.at(-1)!.body);
    assert.ok(probe && read, `the follow-up made its Bash and Read calls:\n${JSON.stringify(observations(calls.at(-1)!.body))}`);
    assert.doesNotMatch(probe, /AGENT SETUP RAN/, `the agent's setup.sh never ran in setup:\n${probe}`);
    const log = probe.split('\n');
    // Two runs (the issue run and the follow-up) each ran the base's setup.sh, once, in their own sandbox.
    assert.equal(log.filter((l) => l.includes('base setup ran')).length, 1, `the follow-up's setup ran the base's setup.sh once:\n${probe}`);
    assert.ok(log.includes('proxy set'), `with the setup network's proxy settings:\n${probe}`);
    assert.ok(log.some((l) => /\beth0\b/.test(l)), `with a network interface besides lo:\n${probe}`);
    // Then the sandbox moved to the head: what setup built is kept, the head's deletion too; HEAD
    // is the pull request's branch with setup's commit on top, the worktree clean, as on any run.
    assert.match(
      probe,
      new RegExp(`stamp: built\nls: cannot access 'README.md': No such file or directory\n${pr.head.ref}\nState after the setup commands\nFollow-up setup: add\\(\\) should sum\nInitial commit\n\nSTDERR:\n$`),
      `the agent starts on the head, with what setup built:\n${probe}`,
    );

    // The agent works on the head: it reads the setup.sh Lilypad wrote, and add() as the issue run fixed it.
    assert.match(read, /AGENT SETUP RAN/, `the follow-up's agent reads the head's setup.sh:\n${read}`);
    assert.doesNotMatch(read, /base setup ran|touched by setup/);

    // The new commit is on the pull request's branch, on top of the head, and holds only the agent's change.
    const head1 = app.gh.branchSha(OWNER, REPO, pr.head.ref)!;
    assert.notEqual(head1, head0);
    assert.equal(parentOf(app.gh, OWNER, REPO, head1), head0, 'on top of the head, not forced');
    assert.deepEqual(git('diff', '--name-only', head0, head1).trim().split('\n'), ['calc.py'], 'only the agent\'s edit, nothing setup made or changed');
    assert.equal(app.gh.readFile(OWNER, REPO, pr.head.ref, 'calc.py'), 'def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n');
    assert.equal(app.gh.readFile(OWNER, REPO, pr.head.ref, 'setup.sh'), AGENT_SETUP, 'the head\'s setup.sh is kept, not reverted to the base\'s');
  });
});
