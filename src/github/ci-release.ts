import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { readHeadPush, recordHeadPush } from '../store/push-records.ts';
import { git } from '../workspace/git.ts';
import { gitAuthEnv } from '../workspace/mirror.ts';
import { pushBranch, remoteTip } from '../workspace/publish.ts';
import type { GitHubApp } from './app-auth.ts';
import type { GitHubClient } from './client.ts';

const LILYPAD_BRANCH = /^lilypad\/issue-\d+(?:-\d+)?$/;

export interface CiReleaseInput {
  github: GitHubApp;
  /** Where Lilypad's own push records are (push-records.ts): when the tip became the branch's head. */
  redis: Redis;
  prefix: string;
  repoId: number;
  installationId: number;
  owner: string;
  repo: string;
  pullNumber: number;
  requestedBy: string;
  /** When the command was written (ISO): a tip that became the head after it is one the writer cannot have read. */
  commandAt: string;
  /** `/lilypad ci <sha>`: release only if the tip is this commit (a prefix of at least 7 hex digits). */
  sha?: string;
}

/**
 * `/lilypad ci` on a Lilypad pull request: a writer has looked at the change and lets CI run it.
 * Lilypad's commits carry [skip ci]; an empty commit without the marker on top of the branch makes
 * the next push run CI. Pushed with a lease: if someone pushed meanwhile, their push stands.
 * Only a tip the writer can have read is released: `/lilypad ci <sha>` names it; a bare
 * `/lilypad ci` releases the tip only if Lilypad's own push record says it became the branch's
 * head before the command was written. A tip that became the head later (a follow-up that landed
 * meanwhile), or that Lilypad did not push (someone else's push: when it happened is not known),
 * is refused with how to release exactly that commit once it has been read. A commit's dates
 * never decide: its pusher writes them.
 */
export async function releaseCi(octokit: GitHubClient, input: CiReleaseInput): Promise<string> {
  const pr = (await octokit.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: input.owner, repo: input.repo, pull_number: input.pullNumber })).data;
  const sameRepo = pr.head.repo?.full_name?.toLowerCase() === `${input.owner}/${input.repo}`.toLowerCase();
  if (!sameRepo || !LILYPAD_BRANCH.test(pr.head.ref)) return `not a Lilypad pull request (branch ${pr.head.ref}): nothing to release`;
  if (pr.state !== 'open') return 'the pull request is closed: nothing to release';
  const token = await input.github.mintRepoToken(input.installationId, input.repo);
  const parent = await mkdtemp(path.join(os.tmpdir(), 'lilypad-ci-'));
  try {
    const env = gitAuthEnv(token.gitAuthHeader());
    const url = (await octokit.request('GET /repos/{owner}/{repo}', { owner: input.owner, repo: input.repo })).data.clone_url;
    const tip = await remoteTip(url, pr.head.ref, token.gitAuthHeader());
    if (!tip) return `the branch ${pr.head.ref} is gone: nothing to release`;
    const short = tip.slice(0, 7);
    if (input.sha && !tip.toLowerCase().startsWith(input.sha.toLowerCase())) {
      return `the tip of ${pr.head.ref} is \`${short}\`, not \`${input.sha}\`, so nothing was released. Look at \`${short}\`, then comment \`/lilypad ci ${short}\` to release it`;
    }
    const dir = path.join(parent, 'repo');
    await git(['init', '--quiet', dir]);
    await git(['fetch', '--quiet', '--no-tags', url, `refs/heads/${pr.head.ref}`], { cwd: dir, env });
    if (!input.sha) {
      const how = `Look at \`${short}\`, then comment \`/lilypad ci ${short}\` to release exactly that commit`;
      const pushed = await readHeadPush(input.redis, input.prefix, input.repoId, pr.head.ref);
      if (pushed?.sha !== tip) {
        return (
          `the tip of ${pr.head.ref}, \`${short}\`, is not a push Lilypad has on record (someone else pushed it), so Lilypad cannot tell whether it was there ` +
          `when @${input.requestedBy} wrote the command, and nothing was released. ${how}`
        );
      }
      // To the second: GitHub gives a comment's time in whole seconds (a push in the same second passes).
      if (Math.floor(Date.parse(pushed.at) / 1000) > Math.floor(Date.parse(input.commandAt) / 1000)) {
        return (
          `the tip \`${short}\` became the head of ${pr.head.ref} at ${pushed.at}, after @${input.requestedBy}'s command (${new Date(input.commandAt).toISOString()}), ` +
          `so it may hold changes nobody has read, and nothing was released. ${how}`
        );
      }
    }
    await git(['checkout', '--quiet', '--detach', tip], { cwd: dir });
    const who = await input.github.commitAuthor(pr.html_url);
    const author = ['-c', `user.name=${who.name}`, '-c', `user.email=${who.email}`];
    await git([...author, 'commit', '--quiet', '--allow-empty', '--no-verify', '-m', `Run CI on Lilypad's change\n\nReleased by @${input.requestedBy} with \`/lilypad ci\`.`], { cwd: dir });
    const released = (await git(['rev-parse', 'HEAD'], { cwd: dir })).trim();
    const pushed = await pushBranch(dir, url, pr.head.ref, token.gitAuthHeader(), { expected: tip });
    if (pushed === 'lease-failed') return `someone pushed to ${pr.head.ref} meanwhile; that push decides whether CI runs`;
    await recordHeadPush(input.redis, input.prefix, input.repoId, pr.head.ref, released);
    return `released CI on ${pr.head.ref}`;
  } finally {
    await token.revoke();
    await rm(parent, { recursive: true, force: true });
  }
}
