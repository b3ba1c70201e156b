import type { Octokit } from '@octokit/rest';
import { TOKEN_MIN_VALIDITY_MS, type GitHubApp, type RepoToken } from './app-auth.ts';

/**
 * The tokens of one job for its one repository. Installation tokens live an hour and a job can
 * outlast one, so a token is minted when first needed and again whenever the one in hand is close
 * to expiring: right before the push, the pull request, and any call after a long phase. Every
 * token minted is revoked at the end.
 */
export class RepoTokens {
  private current: RepoToken | undefined;
  private readonly minted: RepoToken[] = [];

  constructor(
    private readonly github: GitHubApp,
    private readonly installationId: number,
    private readonly repo: string,
  ) {}

  /** A token with at least ten minutes left (minted now if needed). */
  async fresh(): Promise<RepoToken> {
    const left = this.current ? Date.parse(this.current.expiresAt) - Date.now() : -1;
    if (!this.current || !(left > TOKEN_MIN_VALIDITY_MS)) {
      this.current = await this.github.mintRepoToken(this.installationId, this.repo);
      this.minted.push(this.current);
    }
    return this.current;
  }

  async rest(): Promise<Octokit> {
    return (await this.fresh()).rest();
  }

  async gitAuthHeader(): Promise<string> {
    return (await this.fresh()).gitAuthHeader();
  }

  /** Every token value minted so far, for the secret scanner. */
  secretValues(): string[] {
    return this.minted.map((t) => t.secretValue());
  }

  /** Revokes every token this job minted; never throws. */
  async revokeAll(): Promise<void> {
    await Promise.all(this.minted.map((t) => t.revoke()));
  }
}
