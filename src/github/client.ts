import type { Octokit } from '@octokit/rest';
import type { ProbotOctokit } from 'probot';

/** The one thing Lilypad needs from an Octokit: `request`. Probot's and @octokit/rest's both fit. */
export type GitHubClient = Pick<Octokit, 'request'>;

/** An installation's client: `request`, plus Probot's `config` (the repository config with org `.github` fallback and `_extends`). */
export type InstallationClient = GitHubClient & Pick<ProbotOctokit, 'config'>;

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

/** Where GraphQL lives for this client: `/graphql` on github.com, `/api/graphql` (not `/api/v3/graphql`) on Enterprise Server, as Octokit's own graphql() has it. */
export function graphqlBaseUrl(client: GitHubClient): string {
  return String(client.request.endpoint.DEFAULTS.baseUrl).replace(/\/api\/v3\/?$/, '/api');
}
