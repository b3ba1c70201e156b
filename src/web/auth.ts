import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * Sign-in with GitHub (the app's own OAuth client: user-to-server tokens), sessions in Redis
 * behind a signed HttpOnly SameSite cookie, CSRF tokens for forms, and the one access rule: a user
 * sees a run only when GitHub, asked with the user's own token, says they can read its repository.
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

const sessionSchema = z.object({ login: z.string(), token: z.string(), csrf: z.string(), expiresAt: z.number() });
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

/** GitHub answered in a way that says the user's token is no longer good: sign in again. */
export class SignInAgain extends Error {
  override name = 'SignInAgain';
}

export class WebAuth {
  private readonly signKey: Buffer;
  private readonly sealKey: Buffer;
  private readonly access = new Map<string, { ok: boolean; until: number }>();

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    readonly oauth: GitHubOAuthConfig,
    readonly publicUrl: string,
  ) {
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

  private cookie(name: string, value: string, maxAge: number): string {
    return `${name}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${this.secureCookies ? '; Secure' : ''}`;
  }

  // ------------------------------------------------------------ sessions

  private sessionKey(id: string): string {
    return `${this.prefix}:websession:${createHash('sha256').update(id).digest('hex')}`;
  }

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
    const id = this.unsign(readCookie(req, SESSION_COOKIE));
    if (!id) return null;
    const raw = await this.redis.get(this.sessionKey(id));
    if (!raw) return null;
    const parsed = sessionSchema.safeParse(JSON.parse(raw));
    if (!parsed.success || parsed.data.expiresAt <= Date.now()) return null;
    try {
      return { id, login: parsed.data.login, token: this.unseal(parsed.data.token), csrf: parsed.data.csrf };
    } catch {
      return null; // sealed with another client secret
    }
  }

  async endSession(session: Session, res: ServerResponse): Promise<void> {
    await this.redis.del(this.sessionKey(session.id));
    res.setHeader('set-cookie', this.cookie(SESSION_COOKIE, '', 0));
  }

  /** A form's CSRF token must be the session's (constant-time compare). */
  csrfValid(session: Session, given: string | undefined): boolean {
    if (!given) return false;
    const a = createHash('sha256').update(given).digest();
    const b = createHash('sha256').update(session.csrf).digest();
    return timingSafeEqual(a, b);
  }

  // ------------------------------------------------------------ the OAuth dance

  /** Redirects to GitHub's authorize page; `next` (a local path) is where the user returns. */
  beginSignIn(res: ServerResponse, next: string): void {
    const state = randomBytes(24).toString('base64url');
    const url = new URL(`${this.oauth.webOrigin}/login/oauth/authorize`);
    url.searchParams.set('client_id', this.oauth.clientId);
    url.searchParams.set('redirect_uri', this.callbackUrl);
    url.searchParams.set('state', state);
    const payload = Buffer.from(JSON.stringify({ state, next: localPath(next) })).toString('base64url');
    res.writeHead(302, { location: url.toString(), 'set-cookie': this.cookie(STATE_COOKIE, this.sign(payload), STATE_MAX_S), 'cache-control': 'no-store' }).end();
  }

  /**
   * The callback: the state must match the one in this browser's cookie (no login CSRF), the code is
   * exchanged for the user's token, and a session is made. Returns where to send the user next.
   */
  async completeSignIn(req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<string> {
    const payload = this.unsign(readCookie(req, STATE_COOKIE));
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
    const record = { login: user.login, token: this.seal(token), csrf: randomBytes(24).toString('base64url'), expiresAt: Date.now() + ttl * 1000 };
    await this.redis.set(this.sessionKey(id), JSON.stringify(record), 'EX', ttl);
    res.setHeader('set-cookie', [this.cookie(SESSION_COOKIE, this.sign(id), ttl), this.cookie(STATE_COOKIE, '', 0)]);
    return saved.data.next;
  }

  // ------------------------------------------------------------ access

  /** Whether GitHub says this user can read owner/repo (asked with their token, cached a minute). */
  async canRead(session: Session, owner: string, repo: string): Promise<boolean> {
    const key = `${session.id}\u0000${owner}/${repo}`.toLowerCase();
    const hit = this.access.get(key);
    if (hit && hit.until > Date.now()) return hit.ok;
    const found = await this.github(session.token, `/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}`, z.object({ id: z.number() }));
    if (this.access.size > 10_000) this.access.clear();
    this.access.set(key, { ok: found !== null, until: Date.now() + ACCESS_TTL_MS });
    return found !== null;
  }

  /** GET with the user's token: the parsed body, null for 403/404, SignInAgain for 401. */
  private async github<T>(token: string, path: string, schema: z.ZodType<T>): Promise<T | null> {
    const res = await fetch(`${this.oauth.apiUrl}${path}`, {
      headers: { authorization: `Bearer ${token}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28', 'user-agent': 'lilypad-run-pages' },
      signal: AbortSignal.timeout(GITHUB_TIMEOUT_MS),
    });
    if (res.status === 401) throw new SignInAgain('GitHub no longer accepts your sign-in');
    if (res.status === 403 || res.status === 404) return null;
    if (!res.ok) throw new Error(`GitHub answered HTTP ${res.status} for GET ${path}`);
    return schema.parse(await res.json());
  }
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

/** Only paths on this server (no scheme, no host, no `//`): never an open redirect. */
export function localPath(next: string | null | undefined): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !next.includes('\\') ? next : '/runs';
}
