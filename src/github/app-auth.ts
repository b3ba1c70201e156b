import { retry } from '@octokit/plugin-retry';
import { throttling } from '@octokit/plugin-throttling';
import { Octokit } from '@octokit/rest';
import { Probot, ProbotOctokit } from 'probot';
import type { Logger } from '../observability/logger.ts';
import { abortWithoutRetry } from './abort-without-retry.ts';
import type { InstallationClient } from './client.ts';
import { writePacing, type WritePacing } from './write-pacing.ts';

export interface GitHubEndpoints {
  /** REST base, e.g. https://api.github.com or https://ghe.example.com/api/v3 */
  apiUrl: string;
}

export function githubEndpoints(env: { GHE_HOST?: string | undefined; GHE_PROTOCOL: string }): GitHubEndpoints {
  return { apiUrl: env.GHE_HOST ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}/api/v3` : 'https://api.github.com' };
}

/**
 * An installation token for exactly one repository, with only the permissions a job needs. The
 * value is held in a private field so that it cannot be logged or serialised by accident; it
 * leaves this object only as an HTTP header for git or inside a REST client.
 */
export class RepoToken {
  readonly #value: string;
  constructor(
    value: string,
    readonly expiresAt: string,
    private readonly apiUrl: string,
    private readonly pacing: WritePacing = writePacing(),
  ) {
    this.#value = value;
  }

  /** `Authorization` header value for git over HTTPS (Basic x-access-token). */
  gitAuthHeader(): string {
    return `Authorization: Basic ${Buffer.from(`x-access-token:${this.#value}`).toString('base64')}`;
  }

  /** The raw value, only for the secret scanner. */
  secretValue(): string {
    return this.#value;
  }

  /** A REST client with this token that retries 5xx and waits out rate limits (a few times). */
  rest(): Octokit {
    return new JobOctokit({
      auth: this.#value,
      baseUrl: this.apiUrl,
      log: quietLog,
      throttle: {
        write: this.pacing.write,
        notifications: this.pacing.notifications,
        onRateLimit: (_after: number, _options: object, _octokit: unknown, retryCount: number) => retryCount < 2,
        onSecondaryRateLimit: (_after: number, _options: object, _octokit: unknown, retryCount: number) => retryCount < 2,
      },
    });
  }

  /** Revokes the token (DELETE /installation/token); never throws. */
  async revoke(): Promise<void> {
    await this.rest()
      .request('DELETE /installation/token')
      .catch(() => undefined);
  }

  toJSON(): string {
    return '[RepoToken]';
  }
}

const JobOctokit = Octokit.plugin(retry, throttling, abortWithoutRetry);

/**
 * The cache interface of @octokit/auth-app, whose entries are `token|createdAt|expiresAt|…`: an
 * entry close to its expiry reads as missing, so a new token is minted.
 */
class ExpiryAwareTokenCache {
  private readonly entries = new Map<string, string>();

  get(key: string): string | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    const expiresAt = Date.parse(value.split('|')[2] ?? '');
    if (!(expiresAt - Date.now() > TOKEN_MIN_VALIDITY_MS)) {
      this.entries.delete(key);
      return undefined;
    }
    return value;
  }

  set(key: string, value: string): void {
    this.entries.set(key, value);
  }
}

const quietLog = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

/** A token with less time left than this is replaced before use. */
export const TOKEN_MIN_VALIDITY_MS = 10 * 60_000;

const JOB_PERMISSIONS = { contents: 'write', pull_requests: 'write', issues: 'write', metadata: 'read' } as const;

/** The app's identity with GitHub: app JWT, installation clients, per-repository tokens. */
export class GitHubApp {
  readonly probot: Probot;
  private readonly pacing: WritePacing;
  private identity: Promise<{ slug: string; id: number; botUserId: number | null }> | undefined;

  constructor(
    readonly opts: {
      appId: number;
      privateKey: string;
      secret?: string | undefined;
      endpoints: GitHubEndpoints;
      log: Logger;
      /** Milliseconds between two writes to GitHub, for every client of this app (LILYPAD_GITHUB_WRITE_SPACING_MS). */
      writeSpacingMs?: number | undefined;
    },
  ) {
    this.pacing = writePacing(opts.writeSpacingMs);
    this.probot = new Probot({
      appId: opts.appId,
      privateKey: opts.privateKey,
      secret: opts.secret ?? 'development',
      baseUrl: opts.endpoints.apiUrl,
      log: opts.log,
    });
  }

  /**
   * A client authenticated as the installation (all its repositories). Probot's own token cache
   * keeps a token 59 minutes whatever its expiry says; this one drops a token with less than ten
   * minutes left, so a client used late in a long job (or against a server with short-lived
   * tokens) never sends a dead one.
   */
  async installation(installationId: number): Promise<InstallationClient> {
    // Token requests go to the configured server, never to a default host.
    const request = new Octokit({ baseUrl: this.opts.endpoints.apiUrl }).request;
    // Probot's Octokit and @octokit/rest's share `request`; the one typed view of it is GitHubClient.
    return new (ProbotOctokit.plugin(abortWithoutRetry))({
      baseUrl: this.opts.endpoints.apiUrl,
      log: quietLog,
      auth: { appId: this.opts.appId, privateKey: this.opts.privateKey, installationId, cache: this.tokenCache, request },
      // Probot's own rate-limit handlers retry every time; the types want them spelled out here.
      throttle: { write: this.pacing.write, notifications: this.pacing.notifications, onRateLimit: () => true, onSecondaryRateLimit: () => true },
    });
  }

  private readonly tokenCache = new ExpiryAwareTokenCache();

  /** Mints a token for one repository with only contents, pull requests and issues write. */
  async mintRepoToken(installationId: number, repo: string): Promise<RepoToken> {
    const app = await this.probot.auth();
    const res = await app.request('POST /app/installations/{installation_id}/access_tokens', {
      installation_id: installationId,
      repositories: [repo],
      permissions: JOB_PERMISSIONS,
    });
    return new RepoToken(res.data.token, res.data.expires_at, this.opts.endpoints.apiUrl, this.pacing);
  }

  /** The login of the app's bot user, `<slug>[bot]`: the author of its comments. */
  async botLogin(): Promise<string> {
    return `${(await this.appIdentity()).slug}[bot]`;
  }

  /** The identity the app commits as, with GitHub's no-reply address on the repository's host. */
  async commitAuthor(repositoryHtmlUrl: string): Promise<{ name: string; email: string }> {
    const identity = await this.appIdentity();
    const host = new URL(repositoryHtmlUrl).host;
    return { name: `${identity.slug}[bot]`, email: `${identity.botUserId ?? identity.id}+${identity.slug}[bot]@users.noreply.${host}` };
  }

  /** The app's slug and id (GET /app), for its bot login and commit identity. */
  async appIdentity(): Promise<{ slug: string; id: number; botUserId: number | null }> {
    this.identity ??= (async () => {
      const app = await this.probot.auth();
      const res = await app.request('GET /app');
      const slug = res.data?.slug ?? 'lilypad';
      let botUserId: number | null = null;
      try {
        const user = await app.request('GET /users/{username}', { username: `${slug}[bot]` });
        botUserId = Number(user.data.id);
      } catch {
        /* not every server exposes the bot user */
      }
      return { slug, id: res.data?.id ?? this.opts.appId, botUserId };
    })();
    this.identity.catch(() => (this.identity = undefined));
    return this.identity;
  }
}
