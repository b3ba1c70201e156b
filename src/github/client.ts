import type { Octokit } from '@octokit/rest';

/** The one thing Lilypad needs from an Octokit: `request`. Probot's and @octokit/rest's both fit. */
export type GitHubClient = Pick<Octokit, 'request'>;

export interface IssueRef {
  owner: string;
  repo: string;
  issueNumber: number;
}

/** HTTP status of an Octokit error, if it has one. */
export function statusOf(err: unknown): number | undefined {
  const s = (err as { status?: unknown }).status;
  return typeof s === 'number' ? s : undefined;
}
