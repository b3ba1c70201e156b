/**
 * `/lilypad ci` (github/ci-release.ts) through the real release code, real git over HTTP against
 * the GitHub stand-in and real Redis: a bare `/lilypad ci` releases the tip only if Lilypad's own
 * push record says the tip was the branch's head before the command was written. A commit's
 * committer date is whatever its pusher wrote, so it never decides.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { GitHubApp } from '../../src/github/app-auth.ts';
import { releaseCi } from '../../src/github/ci-release.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { pushWithoutOverwriting } from '../../src/pipeline/publish-change.ts';
import { readHeadPush } from '../../src/store/push-records.ts';
import { startGitHubStandin, type GitHubStandin } from '../support/github-standin/index.ts';

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const OWNER = 'acme';
const BRANCH = 'lilypad/issue-1';
/** An hour before the test: a committer date anyone can write. */
const BACKDATED = new Date(Date.now() - 3_600_000).toISOString();

let gh: GitHubStandin;
let github: GitHubApp;
let redis: Redis;
let installationId: number;
let scratch: string;
const prefix = `lilypad-test-cirel-${process.pid}-${Date.now().toString(36)}`;

const git = (cwd: string, args: string[], env: Record<string, string> = {}) =>
  execFileSync('git', ['-c', 'user.name=Someone', '-c', 'user.email=someone@localhost', ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', ...env },
  }).trim();
const bare = (repo: string) => path.join(gh.gitRoot, OWNER, `${repo}.git`);
const tip = (repo: string) => gh.branchSha(OWNER, repo, BRANCH);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Now, in whole seconds, as GitHub gives a comment's `created_at`. */
const commentTime = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
/** Comparisons are to the second (GitHub's resolution): what is "after" is a second later. */
const A_SECOND_LATER = 1100;

/** A clone of `repo` on `branch` (or the default branch) with one more empty commit, dated `at` if given. */
function commitIn(repo: string, message: string, opts: { branch?: string; at?: string } = {}): { dir: string; sha: string } {
  const dir = mkdtempSync(path.join(scratch, `${repo}-`));
  git(scratch, ['clone', '--quiet', bare(repo), dir]);
  if (opts.branch) git(dir, ['checkout', '--quiet', opts.branch]);
  const dates = opts.at ? { GIT_AUTHOR_DATE: opts.at, GIT_COMMITTER_DATE: opts.at } : {};
  git(dir, ['commit', '--quiet', '--allow-empty', '-m', message], dates);
  return { dir, sha: git(dir, ['rev-parse', 'HEAD']) };
}

/** Lilypad pushes a commit to the branch as its pipeline does (publish-change.ts), which records the push. */
async function lilypadPushes(repo: string, repoId: number, commit: { dir: string; sha: string }): Promise<void> {
  const token = await github.mintRepoToken(installationId, repo);
  try {
    const cloneUrl = `${gh.origin}/${OWNER}/${repo}.git`;
    const pushed = await pushWithoutOverwriting(commit.dir, commit.sha, { redis, prefix, repoId, issueNumber: 1, cloneUrl, authHeader: async () => token.gitAuthHeader() });
    assert.equal(pushed.branch, BRANCH);
  } finally {
    await token.revoke();
  }
}

/** A repository whose Lilypad pull request's branch Lilypad pushed; returns the pull request's number and the repository's id. */
async function lilypadPull(repo: string): Promise<{ pr: number; repoId: number }> {
  const created = gh.createRepo(OWNER, repo, { files: { 'calc.py': 'def add(a, b):\n    return a - b\n' } });
  gh.addCollaborator(OWNER, repo, 'alice', 'maintain');
  await lilypadPushes(repo, created.id, commitIn(repo, 'Fix add [skip ci]'));
  const pr = gh.createPullRequest(OWNER, repo, { head: BRANCH, title: 'Fix add', author: 'lilypad[bot]' }).number;
  return { pr, repoId: created.id };
}

async function release(repo: string, repoId: number, pr: number, commandAt: string, sha?: string): Promise<string> {
  const octokit = await github.installation(installationId);
  return releaseCi(octokit, { github, redis, prefix, repoId, installationId, owner: OWNER, repo, pullNumber: pr, requestedBy: 'alice', commandAt, ...(sha ? { sha } : {}) });
}

before(async () => {
  gh = await startGitHubStandin({ appSlug: 'lilypad' });
  installationId = gh.createInstallation({ login: OWNER, type: 'Organization' }).id;
  gh.createUser('alice');
  github = new GitHubApp({ appId: gh.appId, privateKey: gh.privateKeyPem, endpoints: { apiUrl: gh.apiUrl }, log: createLogger({ level: 'silent' }), writeSpacingMs: 20 });
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  scratch = mkdtempSync(path.join(os.tmpdir(), 'lilypad-cirel-'));
});

after(async () => {
  const found = await redis.keys(`${prefix}:*`);
  if (found.length > 0) await redis.del(...found);
  redis.disconnect();
  await gh.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a bare /lilypad ci goes by when the tip became the head, not by its committer date', () => {
  test('a commit someone pushed after the command, dated before it, is not released; its sha releases it', async () => {
    const { pr, repoId } = await lilypadPull('late-push');
    const commandAt = commentTime();
    await pause(A_SECOND_LATER);
    const late = commitIn('late-push', 'A late commit nobody read', { branch: BRANCH, at: BACKDATED });
    git(late.dir, ['push', '--quiet', 'origin', BRANCH]);
    assert.equal(tip('late-push'), late.sha);

    const outcome = await release('late-push', repoId, pr, commandAt);
    assert.equal(tip('late-push'), late.sha, `nothing was released on top of the late commit: ${outcome}`);
    assert.match(outcome, /nothing was released/);
    assert.ok(outcome.includes(`/lilypad ci ${late.sha.slice(0, 7)}`), `it says how to release exactly that commit: ${outcome}`);

    assert.match(await release('late-push', repoId, pr, commandAt, late.sha.slice(0, 7)), /released CI/);
    assert.equal(git(bare('late-push'), ['rev-parse', `${tip('late-push')}^`]), late.sha, 'released on top of the named commit');
  });

  test('Lilypad’s own push after the command, its commit dated before it, is not released; the reply says when it became the head', async () => {
    const { pr, repoId } = await lilypadPull('late-lilypad');
    const commandAt = commentTime();
    await pause(A_SECOND_LATER);
    const followup = commitIn('late-lilypad', 'Address review [skip ci]', { branch: BRANCH, at: BACKDATED });
    await lilypadPushes('late-lilypad', repoId, followup);

    const outcome = await release('late-lilypad', repoId, pr, commandAt);
    assert.equal(tip('late-lilypad'), followup.sha, `nothing was released: ${outcome}`);
    assert.match(outcome, /became the head of lilypad\/issue-1 at .*, after @alice's command/);
  });

  test('Lilypad’s own push before the command is released, and the release commit is on record as the head', async () => {
    const { pr, repoId } = await lilypadPull('in-time');
    const commandAt = commentTime(); // the same second as the push, as a quick reader's comment may be
    assert.match(await release('in-time', repoId, pr, commandAt), /released CI on lilypad\/issue-1/);
    const head = tip('in-time');
    assert.deepEqual((await readHeadPush(redis, prefix, repoId, BRANCH))?.sha, head);
  });
});
