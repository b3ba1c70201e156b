import { statusOf, type GitHubClient } from './client.ts';

export interface PullRequestSpec {
  owner: string;
  repo: string;
  branch: string;
  base: string;
  title: string;
  body: string;
  draft: boolean;
  labels: string[];
  /** Labels to take off the pull request if it has them (an evidence label an earlier revision earned). */
  removeLabels?: string[] | undefined;
  reviewers: string[];
  /** A cancel aborts the request in flight; nothing after it is sent. */
  signal?: AbortSignal | undefined;
}

export interface PullRequestResult {
  number: number;
  url: string;
  updated: boolean;
  warnings: string[];
}

/**
 * Opens the draft pull request for the branch, or updates the one already open (a re-run or a
 * retried job never makes a second one). Never marks it ready, approves or merges.
 */
export async function upsertPullRequest(client: GitHubClient, spec: PullRequestSpec): Promise<PullRequestResult> {
  const warnings: string[] = [];
  const { owner, repo } = spec;
  let pr = await findOpen(client, spec);
  let updated = false;
  if (pr) {
    await client.request('PATCH /repos/{owner}/{repo}/pulls/{pull_number}', { owner, repo, pull_number: pr.number, title: spec.title, body: spec.body, request: abortable(spec) });
    updated = true;
  } else {
    try {
      const res = await client.request('POST /repos/{owner}/{repo}/pulls', {
        owner,
        repo,
        title: spec.title,
        head: spec.branch,
        base: spec.base,
        body: spec.body,
        draft: spec.draft,
        maintainer_can_modify: true,
        request: abortable(spec),
      });
      pr = { number: res.data.number, url: res.data.html_url };
    } catch (err) {
      // Another attempt won the race: "A pull request already exists for owner:branch." is success.
      if (statusOf(err) !== 422) throw err;
      pr = await findOpen(client, spec);
      if (!pr) throw err;
      await client.request('PATCH /repos/{owner}/{repo}/pulls/{pull_number}', { owner, repo, pull_number: pr.number, title: spec.title, body: spec.body, request: abortable(spec) });
      updated = true;
    }
  }
  if (spec.labels.length > 0) {
    try {
      await client.request('POST /repos/{owner}/{repo}/issues/{issue_number}/labels', { owner, repo, issue_number: pr.number, labels: spec.labels, request: abortable(spec) });
    } catch (err) {
      warnings.push(`could not add the labels ${spec.labels.join(', ')} (HTTP ${statusOf(err) ?? '?'})`);
    }
  }
  for (const name of (spec.removeLabels ?? []).filter((l) => !spec.labels.includes(l))) {
    await client
      .request('DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}', { owner, repo, issue_number: pr.number, name, request: abortable(spec) })
      .catch((err: unknown) => {
        if (statusOf(err) !== 404) warnings.push(`could not remove the label ${name} (HTTP ${statusOf(err) ?? '?'})`);
      });
  }
  if (spec.reviewers.length > 0) {
    try {
      await client.request('POST /repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers', { owner, repo, pull_number: pr.number, reviewers: spec.reviewers, request: abortable(spec) });
    } catch (err) {
      warnings.push(`could not request review from ${spec.reviewers.map((r) => `@${r}`).join(', ')} (HTTP ${statusOf(err) ?? '?'})`);
    }
  }
  return { number: pr.number, url: pr.url, updated, warnings };
}

async function findOpen(client: GitHubClient, spec: PullRequestSpec): Promise<{ number: number; url: string } | null> {
  const res = await client.request('GET /repos/{owner}/{repo}/pulls', {
    owner: spec.owner,
    repo: spec.repo,
    state: 'open',
    head: `${spec.owner}:${spec.branch}`,
    per_page: 10,
    request: abortable(spec),
  });
  const hit = res.data.find((p) => p.head.ref === spec.branch);
  return hit ? { number: hit.number, url: hit.html_url } : null;
}

/** Octokit's per-request options carrying the spec's AbortSignal, when it has one. */
function abortable(spec: PullRequestSpec): { signal?: AbortSignal } {
  return spec.signal ? { signal: spec.signal } : {};
}
