import { getPrivateKey } from '@probot/get-private-key';
import type { Octokit } from '@octokit/rest';
import { z } from 'zod';
import type { Env } from '../config/env.ts';
import { GitHubApp, RepoToken, TOKEN_MIN_VALIDITY_MS, githubEndpoints } from '../github/app-auth.ts';
import { createLogger } from '../observability/logger.ts';

/**
 * GitHub access for `lilypad eval collect`: the GitHub App's own credentials (APP_ID and
 * PRIVATE_KEY / PRIVATE_KEY_PATH, on GHE_HOST over GHE_PROTOCOL), an installation token for the one
 * repository with read permissions only, and the REST replies the collector relies on, checked with
 * zod. The token leaves RepoToken only as a REST client or as git's HTTP header.
 */

export class CollectError extends Error {
  override name = 'CollectError';
}

/** Read is all collecting needs. */
export const COLLECT_PERMISSIONS = { contents: 'read', issues: 'read', pull_requests: 'read', metadata: 'read' } as const;
/** What `lilypad eval run` needs to fetch a repository: its contents, read-only. */
export const FETCH_PERMISSIONS = { contents: 'read', metadata: 'read' } as const;

type ReadPermissions = Readonly<Record<string, 'read'>>;

/** The app is not installed on the repository (or the repository does not exist). */
export class AppNotInstalledError extends CollectError {
  override name = 'AppNotInstalledError';
}

/** The GitHub App's credentials, when APP_ID and PRIVATE_KEY (or PRIVATE_KEY_PATH) are both set. */
export function hasAppCredentials(env: Env): boolean {
  return Boolean(env.APP_ID && (env.PRIVATE_KEY || env.PRIVATE_KEY_PATH));
}

const installationSchema = z.object({ id: z.number().int() }).loose();
const tokenSchema = z.object({ token: z.string().min(1), expires_at: z.string() }).loose();
export const repoSchema = z.object({ full_name: z.string(), default_branch: z.string().min(1), private: z.boolean().optional() }).loose();

export const issueSchema = z
  .object({
    number: z.number().int(),
    title: z.string(),
    body: z.string().nullable().optional(),
    state: z.string(),
    state_reason: z.string().nullable().optional(),
    html_url: z.string(),
    created_at: z.string(),
    closed_at: z.string().nullable().optional(),
    pull_request: z.object({}).loose().optional(),
  })
  .loose();
export type IssueItem = z.infer<typeof issueSchema>;

/** Timeline items of every kind; only `cross-referenced` and `closed` are read. */
export const timelineItemSchema = z
  .object({
    event: z.string().optional(),
    commit_id: z.string().nullable().optional(),
    created_at: z.string().optional(),
    source: z
      .object({
        type: z.string().optional(),
        issue: z
          .object({
            number: z.number().int(),
            title: z.string().optional(),
            body: z.string().nullable().optional(),
            pull_request: z.object({}).loose().optional(),
            repository: z.object({ full_name: z.string() }).loose().optional(),
          })
          .loose()
          .optional(),
      })
      .loose()
      .optional(),
  })
  .loose();
export type TimelineItem = z.infer<typeof timelineItemSchema>;

const refSchema = z.object({ ref: z.string(), sha: z.string().regex(/^[0-9a-f]{40}$/) }).loose();
export const pullSchema = z
  .object({
    number: z.number().int(),
    state: z.string(),
    title: z.string(),
    body: z.string().nullable().optional(),
    html_url: z.string(),
    created_at: z.string(),
    merged: z.boolean().optional(),
    merged_at: z.string().nullable(),
    merge_commit_sha: z.string().nullable().optional(),
    base: refSchema,
    head: refSchema,
  })
  .loose();
export type PullInfo = z.infer<typeof pullSchema>;

/** Parses a REST reply, or says which endpoint answered what it should not have. */
export function parseReply<T>(schema: z.ZodType<T>, data: unknown, what: string): T {
  const parsed = schema.safeParse(data);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new CollectError(`${what} answered in an unexpected shape (${issue ? `${issue.path.join('.') || 'the reply'}: ${issue.message}` : 'invalid'}); is GHE_HOST a GitHub or GitHub Enterprise server?`);
}

function status(err: unknown): number | undefined {
  const s = (err as { status?: unknown }).status;
  return typeof s === 'number' ? s : undefined;
}

/** The app's token for one repository, minted again when it has less than ten minutes left; revoked at the end. */
export class RepoAccess {
  private token: RepoToken | undefined;
  private readonly minted: RepoToken[] = [];

  private constructor(
    private readonly github: GitHubApp,
    private readonly installationId: number,
    readonly owner: string,
    readonly name: string,
    /** Where git fetches from (no credentials in it). */
    readonly cloneUrl: string,
    private readonly permissions: ReadPermissions,
  ) {}

  /**
   * The app's access to owner/name: its installation there, and a first token restricted to that
   * repository with `permissions` (read-only; COLLECT_PERMISSIONS unless given).
   */
  static async connect(env: Env, owner: string, name: string, permissions: ReadPermissions = COLLECT_PERMISSIONS): Promise<RepoAccess> {
    let privateKey: string | null = null;
    if (env.APP_ID) {
      try {
        privateKey = getPrivateKey({ env: { PRIVATE_KEY: env.PRIVATE_KEY, PRIVATE_KEY_PATH: env.PRIVATE_KEY_PATH } });
      } catch (err) {
        throw new CollectError(`could not read the GitHub App's private key: ${(err as Error).message}; check PRIVATE_KEY or PRIVATE_KEY_PATH`);
      }
    }
    if (!env.APP_ID || !privateKey) {
      throw new CollectError(
        'lilypad eval collect reads the repository as the GitHub App: set APP_ID and PRIVATE_KEY (or PRIVATE_KEY_PATH) as for `lilypad start`, and GHE_HOST/GHE_PROTOCOL for GitHub Enterprise',
      );
    }
    const endpoints = githubEndpoints(env);
    const github = new GitHubApp({ appId: Number(env.APP_ID), privateKey, endpoints, log: createLogger({ level: 'silent', secrets: [privateKey] }) });
    const app = await github.probot.auth();
    let installationId: number;
    try {
      const res = await app.request('GET /repos/{owner}/{repo}/installation', { owner, repo: name });
      installationId = parseReply(installationSchema, res.data, `GET /repos/${owner}/${name}/installation`).id;
    } catch (err) {
      if (err instanceof CollectError) throw err;
      const s = status(err);
      if (s === 404) throw new AppNotInstalledError(`the GitHub App ${env.APP_ID} is not installed on ${owner}/${name} (or the repository does not exist) at ${endpoints.apiUrl}: install it on the repository`);
      if (s === 401) throw new CollectError(`${endpoints.apiUrl} refused the app's credentials (401): check APP_ID and PRIVATE_KEY belong to the same GitHub App on that server`);
      throw new CollectError(`could not look up the app's installation on ${owner}/${name} at ${endpoints.apiUrl}: ${(err as Error).message}`);
    }
    const host = env.GHE_HOST ?? 'github.com';
    const protocol = env.GHE_HOST ? env.GHE_PROTOCOL : 'https';
    const access = new RepoAccess(github, installationId, owner, name, `${protocol}://${host}/${owner}/${name}.git`, permissions);
    await access.fresh();
    return access;
  }

  private async fresh(): Promise<RepoToken> {
    const left = this.token ? Date.parse(this.token.expiresAt) - Date.now() : -1;
    if (this.token && left > TOKEN_MIN_VALIDITY_MS) return this.token;
    const app = await this.github.probot.auth();
    try {
      const res = await app.request('POST /app/installations/{installation_id}/access_tokens', {
        installation_id: this.installationId,
        repositories: [this.name],
        permissions: this.permissions,
      });
      const t = parseReply(tokenSchema, res.data, 'POST /app/installations/{id}/access_tokens');
      this.token = new RepoToken(t.token, t.expires_at, this.github.opts.endpoints.apiUrl);
      this.minted.push(this.token);
      return this.token;
    } catch (err) {
      if (err instanceof CollectError) throw err;
      const needs = Object.keys(this.permissions)
        .filter((p) => p !== 'metadata')
        .map((p) => p.replace(/_/g, ' '));
      const list = needs.length > 1 ? `${needs.slice(0, -1).join(', ')} and ${needs.at(-1)}` : (needs[0] ?? 'metadata');
      throw new CollectError(`could not get a token for ${this.owner}/${this.name} (${(err as Error).message}): the app needs read access to ${list} on it`);
    }
  }

  async rest(): Promise<Octokit> {
    return (await this.fresh()).rest();
  }

  /** `Authorization` header for git over HTTPS; see gitAuthEnv. */
  async gitAuthHeader(): Promise<string> {
    return (await this.fresh()).gitAuthHeader();
  }

  async revokeAll(): Promise<void> {
    await Promise.all(this.minted.map((t) => t.revoke()));
  }

  // ---------------------------------------------------------------- REST

  async repository(): Promise<z.infer<typeof repoSchema>> {
    const res = await (await this.rest()).request('GET /repos/{owner}/{repo}', { owner: this.owner, repo: this.name });
    return parseReply(repoSchema, res.data, `GET /repos/${this.owner}/${this.name}`);
  }

  /** Closed issues (pull requests left out), newest first, updated at or after `since`. */
  async *closedIssues(since: string | undefined): AsyncGenerator<IssueItem> {
    const octokit = await this.rest();
    const pages = octokit.paginate.iterator('GET /repos/{owner}/{repo}/issues', {
      owner: this.owner,
      repo: this.name,
      state: 'closed',
      sort: 'created',
      direction: 'desc',
      per_page: 100,
      ...(since ? { since } : {}),
    });
    for await (const page of pages) {
      const items = parseReply(z.array(issueSchema), page.data, `GET /repos/${this.owner}/${this.name}/issues`);
      for (const item of items) if (!item.pull_request) yield item;
    }
  }

  async timeline(issue: number): Promise<TimelineItem[]> {
    const octokit = await this.rest();
    const items = await octokit.paginate('GET /repos/{owner}/{repo}/issues/{issue_number}/timeline', { owner: this.owner, repo: this.name, issue_number: issue, per_page: 100 });
    return parseReply(z.array(timelineItemSchema), items, `GET /repos/${this.owner}/${this.name}/issues/${issue}/timeline`);
  }

  async pull(number: number): Promise<PullInfo> {
    const res = await (await this.rest()).request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: this.owner, repo: this.name, pull_number: number });
    return parseReply(pullSchema, res.data, `GET /repos/${this.owner}/${this.name}/pulls/${number}`);
  }
}
