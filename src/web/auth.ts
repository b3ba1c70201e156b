import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { deleteWebSession, readWebSession, writeWebSession } from '../store/web-sessions.ts';

/**
 * Sign-in with GitHub (the app's own OAuth client: user-to-server tokens), sessions in Redis
 * behind a signed HttpOnly SameSite cookie (`__Host-` prefixed and Secure when the public URL is
 * https), CSRF tokens for forms, and the access rule: a user sees a run only when GitHub, asked
 * with the user's own token, says they can read its repository, looked up by the repository's id
 * (names move with renames, ids do not). Write access (push) is what the full view needs.
 */

export interface GitHubOAuthConfig {
  clientId: string;
  clientSecret: string;
  /** https://github.com, or the Enterprise Server's origin. */
  webOrigin: string;
  /** https://api.github.com, or <origin>/api/v3. */
  apiUrl: string;
}

const SESSION_COOKIE = 'lilypad_session';
const STATE_COOKIE = 'lilypad_oauth';
const SESSION_MAX_S = 8 * 3600;
const STATE_MAX_S = 600;
const ACCESS_TTL_MS = 60_000;
const GITHUB_TIMEOUT_MS = 10_000;
const PER_PAGE = 100;
/** 10,000 repositories per installation; beyond that the page says the list is cut. */
const MAX_PAGES = 100;
const LISTING_CONCURRENCY = 4;
const DEFAULT_NEXT = '/runs';

/** What a viewer may see of a repository's runs: everything (push access), the reader view, or nothing. */
export type AccessLevel = 'write' | 'read' | 'none';

/** The repositories a viewer can reach through the app's installations, by repository id. */
export interface ViewerRepos {
  repos: Map<number, { fullName: string; write: boolean }>;
  /** Installations whose repositories could not be listed (their runs are hidden), in words. */
  problems: string[];
}

export interface Session {
  id: string;
  login: string;
  token: string;
  csrf: string;
}

const tokenResponseSchema = z.union([
  z.object({ access_token: z.string().min(1), token_type: z.string().optional(), expires_in: z.coerce.number().optional() }),
  z.object({ error: z.string(), error_description: z.string().optional() }),
]);
const userSchema = z.object({ login: z.string().min(1), id: z.number() });
const permissionsSchema = z.object({ admin: z.boolean().optional(), maintain: z.boolean().optional(), push: z.boolean().optional() }).optional();
const repoSchema = z.object({ id: z.number(), full_name: z.string(), permissions: permissionsSchema });
const installationsSchema = z.object({ installations: z.array(z.object({ id: z.number(), account: z.object({ login: z.string() }).nullable() })) });
const installationReposSchema = z.object({ repositories: z.array(repoSchema) });
const canWrite = (p: z.infer<typeof permissionsSchema>) => Boolean(p && (p.push || p.maintain || p.admin));

/** GitHub answered in a way that says the user's token is no longer good: sign in again. */
export class SignInAgain extends Error {
  override name = 'SignInAgain';
}

/** GitHub rate-limited an access check: no answer about access (never taken, or kept, as a denial). */
export class GitHubRateLimited extends Error {
  override name = 'GitHubRateLimited';
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/** GitHub could not be asked (network error, timeout, 5xx): no answer about access either. */
export class GitHubUnavailable extends Error {
  override name = 'GitHubUnavailable';
}

export interface WebAuthOptions {
  /** How long GitHub's answer about one session's access is reused (default 60 s). */
  accessTtlMs?: number;
}

export class WebAuth {
  private readonly signKey: Buffer;
  private readonly sealKey: Buffer;
  private readonly access = new Map<string, { level: AccessLevel; until: number }>();
  private readonly listings = new Map<string, { value: ViewerRepos; until: number }>();
  private readonly listingsInFlight = new Map<string, Promise<ViewerRepos>>();
  private readonly accessTtlMs: number;
  private readonly sessionCookie: string;
  private readonly stateCookie: string;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    readonly oauth: GitHubOAuthConfig,
    readonly publicUrl: string,
    opts: WebAuthOptions = {},
  ) {
    this.accessTtlMs = opts.accessTtlMs ?? ACCESS_TTL_MS;
    // `__Host-` cookies must be Secure, Path=/ and without Domain: a sibling host cannot set or
    // shadow them. Browsers take Secure cookies only from secure origins, so plain-http public URLs
    // (development) keep unprefixed, non-Secure cookies.
    const hostPrefix = this.secureCookies ? '__Host-' : '';
    this.sessionCookie = hostPrefix + SESSION_COOKIE;
    this.stateCookie = hostPrefix + STATE_COOKIE;
    // Every web role derives the same keys from the app's client secret: no extra setting to share.
    const derive = (label: string) => Buffer.from(hkdfSync('sha256', oauth.clientSecret, 'lilypad-web', label, 32));
    this.signKey = derive('cookie-signing');
    this.sealKey = derive('token-sealing');
  }

  get secureCookies(): boolean {
    return this.publicUrl.startsWith('https:');
  }

  get callbackUrl(): string {
    return `${this.publicUrl}/auth/callback`;
  }

  // ------------------------------------------------------------ cookies

  private sign(value: string): string {
    return `${value}.${createHmac('sha256', this.signKey).update(value).digest('base64url')}`;
  }

  private unsign(signed: string | undefined): string | null {
    if (!signed) return null;
    const dot = signed.lastIndexOf('.');
    if (dot <= 0) return null;
    const value = signed.slice(0, dot);
    const expected = Buffer.from(this.sign(value));
    const given = Buffer.from(signed);
    return expected.length === given.length && timingSafeEqual(expected, given) ? value : null;
  }

  /** Always Path=/ and never Domain (what `__Host-` requires). */
  private cookie(name: string, value: string, maxAge: number): string {
    return `${name}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${this.secureCookies ? '; Secure' : ''}`;
  }

  // ------------------------------------------------------------ sessions

  private seal(token: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.sealKey, iv);
    const data = Buffer.concat([c.update(token, 'utf8'), c.final()]);
    return Buffer.concat([iv, c.getAuthTag(), data]).toString('base64');
  }

  private unseal(sealed: string): string {
    const raw = Buffer.from(sealed, 'base64');
    const d = createDecipheriv('aes-256-gcm', this.sealKey, raw.subarray(0, 12));
    d.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
  }

  /** The signed-in user of this request, or null. */
  async session(req: IncomingMessage): Promise<Session | null> {
    const id = this.unsign(readCookie(req, this.sessionCookie));
    if (!id) return null;
    const stored = await readWebSession(this.redis, this.prefix, id);
    if (!stored || stored.expiresAt <= Date.now()) return null;
    try {
      return { id, login: stored.login, token: this.unseal(stored.token), csrf: stored.csrf };
    } catch {
      return null; // sealed with another client secret
    }
  }

  async endSession(session: Session, res: ServerResponse): Promise<void> {
    await deleteWebSession(this.redis, this.prefix, session.id);
    res.setHeader('set-cookie', this.cookie(this.sessionCookie, '', 0));
  }

  /** A form's CSRF token must be the session's (constant-time compare). */
  csrfValid(session: Session, given: string | undefined): boolean {
    if (!given) return false;
    const a = createHash('sha256').update(given).digest();
    const b = createHash('sha256').update(session.csrf).digest();
    return timingSafeEqual(a, b);
  }

  // ------------------------------------------------------------ the OAuth dance

  /** Redirects to GitHub's authorize page; `next` (checked: a local path) is where the user returns. */
  beginSignIn(res: ServerResponse, next: string | null): void {
    const state = randomBytes(24).toString('base64url');
    const url = new URL(`${this.oauth.webOrigin}/login/oauth/authorize`);
    url.searchParams.set('client_id', this.oauth.clientId);
    url.searchParams.set('redirect_uri', this.callbackUrl);
    url.searchParams.set('state', state);
    const payload = Buffer.from(JSON.stringify({ state, next: this.nextPath(next) })).toString('base64url');
    res.writeHead(302, { location: url.toString(), 'set-cookie': this.cookie(this.stateCookie, this.sign(payload), STATE_MAX_S), 'cache-control': 'no-store' }).end();
  }

  /**
   * The callback: the state must match the one in this browser's cookie (no login CSRF), the code is
   * exchanged for the user's token, and a session is made. Returns where to send the user next.
   */
  async completeSignIn(req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<string> {
    const payload = this.unsign(readCookie(req, this.stateCookie));
    const saved = payload ? z.object({ state: z.string(), next: z.string() }).safeParse(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'))) : null;
    const state = query.get('state');
    if (!saved?.success || !state || state !== saved.data.state) throw new SignInRefused('the sign-in could not be matched to this browser (it expired or came from elsewhere); start again');
    const code = query.get('code');
    if (!code) throw new SignInRefused(`GitHub did not authorize the sign-in${query.get('error') ? ` (${query.get('error')})` : ''}`);
    const tokenRes = await fetch(`${this.oauth.webOrigin}/login/oauth/access_token`, {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json' },
      body: JSON.stringify({ client_id: this.oauth.clientId, client_secret: this.oauth.clientSecret, code, redirect_uri: this.callbackUrl }),
      signal: AbortSignal.timeout(GITHUB_TIMEOUT_MS),
    });
    const parsed = tokenResponseSchema.safeParse(await tokenRes.json().catch(() => null));
    if (!tokenRes.ok || !parsed.success) throw new Error(`GitHub's token endpoint answered HTTP ${tokenRes.status} without a token; check GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET`);
    if ('error' in parsed.data) {
      throw new SignInRefused(`GitHub refused the sign-in: ${parsed.data.error_description ?? parsed.data.error}${parsed.data.error === 'incorrect_client_credentials' ? ' (check GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET)' : ''}`);
    }
    const token = parsed.data.access_token;
    const user = await this.github(token, '/user', userSchema);
    if (!user) throw new SignInAgain('GitHub did not accept the new token');
    const id = randomBytes(32).toString('base64url');
    const ttl = Math.min(SESSION_MAX_S, parsed.data.expires_in && parsed.data.expires_in > 60 ? parsed.data.expires_in - 60 : SESSION_MAX_S);
    const record = { login: user.body.login, token: this.seal(token), csrf: randomBytes(24).toString('base64url'), expiresAt: Date.now() + ttl * 1000 };
    await writeWebSession(this.redis, this.prefix, id, record, ttl);
    res.setHeader('set-cookie', [this.cookie(this.sessionCookie, this.sign(id), ttl), this.cookie(this.stateCookie, '', 0)]);
    return this.nextPath(saved.data.next);
  }

  /** `next` as a path on the public origin (see safeRedirectPath). */
  nextPath(next: string | null | undefined): string {
    return safeRedirectPath(next, this.publicUrl);
  }

  // ------------------------------------------------------------ access

  /**
   * What GitHub says this user may do with the repository of this id (asked with their token,
   * reused for accessTtlMs). Answers (including "no access") are reused; failures to get one
   * (rate limits, 5xx, timeouts) throw GitHubRateLimited or GitHubUnavailable and are not.
   */
  async repoAccess(session: Session, repoId: number): Promise<AccessLevel> {
    const key = `${session.id}\u0000${repoId}`;
    const hit = this.access.get(key);
    if (hit && hit.until > Date.now()) return hit.level;
    const found = await this.github(session.token, `/repositories/${repoId}`, repoSchema);
    // The id asked for is the id answered, or GitHub is not answering about this repository.
    const level: AccessLevel = found && found.body.id === repoId ? (canWrite(found.body.permissions) ? 'write' : 'read') : 'none';
    this.remember(key, level);
    return level;
  }

  private remember(key: string, level: AccessLevel): void {
    if (this.access.size > 20_000) this.access.clear();
    this.access.set(key, { level, until: Date.now() + this.accessTtlMs });
  }

  /**
   * Every repository the user can reach through the app's installations, by id: one paginated
   * listing per installation (GET /user/installations/{id}/repositories, 100 a page) instead of a
   * call per repository. Reused for accessTtlMs only when every installation answered; concurrent
   * views of one session share the calls. An installation that could not be listed is named in
   * `problems` (its runs stay hidden); only the installations list itself failing throws.
   */
  async viewerRepos(session: Session): Promise<ViewerRepos> {
    const hit = this.listings.get(session.id);
    if (hit && hit.until > Date.now()) return hit.value;
    const running = this.listingsInFlight.get(session.id);
    if (running) return running;
    const work = this.listViewerRepos(session).finally(() => this.listingsInFlight.delete(session.id));
    this.listingsInFlight.set(session.id, work);
    return work;
  }

  private async listViewerRepos(session: Session): Promise<ViewerRepos> {
    const installations: Array<{ id: number; login: string }> = [];
    await this.paginate(session.token, '/user/installations', installationsSchema, (page) => {
      for (const i of page.installations) installations.push({ id: i.id, login: i.account?.login ?? `installation ${i.id}` });
      return page.installations.length;
    });
    const repos = new Map<number, { fullName: string; write: boolean }>();
    const problems: string[] = [];
    let nextIndex = 0;
    const worker = async () => {
      for (let i = nextIndex++; i < installations.length; i = nextIndex++) {
        const inst = installations[i]!;
        try {
          const complete = await this.paginate(session.token, `/user/installations/${inst.id}/repositories`, installationReposSchema, (page) => {
            for (const r of page.repositories) {
              const write = canWrite(r.permissions);
              repos.set(r.id, { fullName: r.full_name, write });
              this.remember(`${session.id}\u0000${r.id}`, write ? 'write' : 'read');
            }
            return page.repositories.length;
          });
          if (!complete) problems.push(`Some runs of ${inst.login}'s repositories may be missing: it has more than ${PER_PAGE * MAX_PAGES} repositories you can reach, and only that many are checked.`);
        } catch (err) {
          if (err instanceof SignInAgain) throw err;
          problems.push(`Runs of ${inst.login}'s repositories are not shown: ${describeFailure(err)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(LISTING_CONCURRENCY, installations.length) }, worker));
    const value = { repos, problems };
    if (problems.length === 0) {
      if (this.listings.size > 5_000) this.listings.clear();
      this.listings.set(session.id, { value, until: Date.now() + this.accessTtlMs });
    }
    return value;
  }

  /**
   * Pages through a GitHub list (page numbers, 100 a page, until the Link header has no next).
   * `take` returns how many items the page had. Resolves false when MAX_PAGES were read and more
   * remain; a denial (403/404) ends the list as empty.
   */
  private async paginate<T>(token: string, path: string, schema: z.ZodType<T>, take: (page: T) => number): Promise<boolean> {
    for (let page = 1; page <= MAX_PAGES; page++) {
      const got = await this.github(token, `${path}?per_page=${PER_PAGE}&page=${page}`, schema);
      if (!got) return true;
      const n = take(got.body);
      if (n < PER_PAGE || !/\brel="next"/.test(got.link ?? '')) return true;
    }
    return false;
  }

  /**
   * GET with the user's token: the parsed body (and Link header), null for a denial (403/404
   * without rate-limit signs), SignInAgain for 401, GitHubRateLimited for a primary or secondary
   * rate limit, GitHubUnavailable for anything else.
   */
  private async github<T>(token: string, path: string, schema: z.ZodType<T>): Promise<{ body: T; link: string | null } | null> {
    let res: Response;
    try {
      res = await fetch(`${this.oauth.apiUrl}${path}`, {
        headers: { authorization: `Bearer ${token}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', 'user-agent': 'lilypad-run-pages' },
        signal: AbortSignal.timeout(GITHUB_TIMEOUT_MS),
      });
    } catch (err) {
      throw new GitHubUnavailable(`GitHub could not be reached for GET ${path.split('?')[0]} (${(err as Error).message})`);
    }
    if (res.status === 401) throw new SignInAgain('GitHub no longer accepts your sign-in');
    const wait = rateLimitWait(res.status, res.headers);
    if (wait !== null) {
      await res.body?.cancel();
      throw new GitHubRateLimited(`GitHub's rate limit stopped the access check (try again in ${wait} s)`, wait);
    }
    if (res.status === 403 || res.status === 404) {
      await res.body?.cancel();
      return null;
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new GitHubUnavailable(`GitHub answered HTTP ${res.status} to the access check (try again shortly)`);
    }
    const parsed = schema.safeParse(await res.json().catch(() => null));
    if (!parsed.success) throw new GitHubUnavailable(`GitHub's answer to GET ${path.split('?')[0]} was not what the API documents (${parsed.error.issues[0]?.message ?? 'unreadable'})`);
    return { body: parsed.data, link: res.headers.get('link') };
  }
}

/**
 * Seconds to wait when a response is a rate limit, else null. 429 always is; a 403 is when it
 * says so (`retry-after`: secondary limit, or `x-ratelimit-remaining: 0`: primary limit, until
 * `x-ratelimit-reset`). A bare 403 is a denial.
 */
export function rateLimitWait(status: number, headers: Headers): number | null {
  if (status !== 403 && status !== 429) return null;
  const retryAfter = Number(headers.get('retry-after'));
  if (headers.get('retry-after') !== null && Number.isFinite(retryAfter)) return Math.max(1, Math.ceil(retryAfter));
  if (headers.get('x-ratelimit-remaining') === '0') {
    const reset = Number(headers.get('x-ratelimit-reset'));
    return Number.isFinite(reset) && reset > 0 ? Math.max(1, Math.ceil(reset - Date.now() / 1000)) : 60;
  }
  return status === 429 ? 60 : null;
}

function describeFailure(err: unknown): string {
  if (err instanceof GitHubRateLimited || err instanceof GitHubUnavailable) return `${err.message}.`;
  return `the access check failed (${(err as Error).message}).`;
}

/** The sign-in was refused for a reason the user can act on (shown to them, HTTP 400). */
export class SignInRefused extends Error {
  override name = 'SignInRefused';
}

function readCookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * `next` as a path on the public origin, or /runs. It must be a path (leading `/`) without control
 * characters or backslashes (browsers drop tabs and newlines and read `\` as `/`, which turns
 * `/\t/evil` or `/\evil` into `//evil`); it is then resolved as a browser would against the public
 * origin, must stay on that origin, and is re-serialised from the parsed URL (path and query), which
 * must not start with `//` either (`/.//evil` resolves to the path `//evil`).
 */
export function safeRedirectPath(next: string | null | undefined, publicUrl: string): string {
  if (!next || next.length > 2048 || !next.startsWith('/') || /[\u0000-\u001f\u007f\\]/.test(next)) return DEFAULT_NEXT;
  const origin = new URL(publicUrl).origin;
  let resolved: URL;
  try {
    resolved = new URL(next, origin);
  } catch {
    return DEFAULT_NEXT;
  }
  if (resolved.origin !== origin) return DEFAULT_NEXT;
  const path = resolved.pathname + resolved.search;
  return path.startsWith('/') && !path.startsWith('//') && !/[\u0000-\u0020\u007f\\]/.test(path) ? path : DEFAULT_NEXT;
}
