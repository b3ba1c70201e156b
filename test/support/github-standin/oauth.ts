/**
 * The GitHub App's OAuth web flow as GitHub Enterprise Server serves it, for the run pages' sign-in:
 * `GET/POST /login/oauth/authorize` (a page where a test browser names the user to sign in as),
 * `POST /login/oauth/access_token` (code for a `ghu_` user-to-server token, checked against the
 * app's client id and secret), and the REST calls made with such a token: `GET /api/v3/user` and
 * `GET /api/v3/repos/{owner}/{repo}` (200 only when the user can read the repository and the app is
 * installed on its owner, as GitHub intersects the two; otherwise 404), `GET /api/v3/repositories/{id}`
 * (the same, by id), and `GET /api/v3/user/installations[/{id}/repositories]` (paginated, Link header).
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DOCS_ROOT, type RepoRec, type StandinState, type UserRec } from './state.ts';

interface CodeRec {
  login: string;
  redirectUri: string;
  expiresAt: number;
}

interface OAuthState {
  codes: Map<string, CodeRec>;
  tokens: Map<string, { login: string; expiresAt: number }>;
}

const stores = new WeakMap<StandinState, OAuthState>();
const TOKEN_TTL_S = 8 * 3600;

/** The OAuth client of the stand-in's app: the id GitHub shows, and a secret derived from the webhook secret. */
export function standinOAuthClient(gh: { appId: number; webhookSecret: string }): { clientId: string; clientSecret: string } {
  return { clientId: `Iv1.${gh.appId.toString(16).padStart(16, '0')}`, clientSecret: clientSecretFor(gh.webhookSecret) };
}

function clientSecretFor(webhookSecret: string): string {
  return createHmac('sha256', webhookSecret).update('oauth-client-secret').digest('hex').slice(0, 40);
}

function storeFor(state: StandinState): OAuthState {
  let s = stores.get(state);
  if (!s) {
    s = { codes: new Map(), tokens: new Map() };
    stores.set(state, s);
  }
  return s;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 64 * 1024) {
        reject(new Error('OAuth request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function params(req: IncomingMessage, body: string): URLSearchParams {
  if ((req.headers['content-type'] ?? '').includes('application/json')) {
    const parsed = JSON.parse(body || '{}') as Record<string, unknown>;
    return new URLSearchParams(Object.entries(parsed).map(([k, v]): [string, string] => [k, String(v)]));
  }
  return new URLSearchParams(body);
}

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function json(res: ServerResponse, status: number, body: unknown): void {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(data.length) }).end(data);
}

/** Handles the request when it belongs to the OAuth flow or carries a user token; false otherwise. */
export async function handleOAuth(req: IncomingMessage, res: ServerResponse, url: URL, state: StandinState, webhookSecret: string): Promise<boolean> {
  const store = storeFor(state);
  const clientId = state.app().client_id;
  const path = url.pathname;

  if (path === '/login/oauth/authorize') {
    const q = req.method === 'POST' ? params(req, await readBody(req)) : url.searchParams;
    const redirectUri = q.get('redirect_uri') ?? '';
    if (q.get('client_id') !== clientId) {
      res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' }).end('<h1>404</h1><p>No application with this client id.</p>');
      return true;
    }
    if (!/^https?:\/\/127\.0\.0\.1(:\d+)?\//.test(redirectUri)) {
      res.writeHead(400, { 'content-type': 'text/html; charset=utf-8' }).end('<h1>The redirect_uri MUST match the registered callback URL for this application.</h1>');
      return true;
    }
    if (req.method !== 'POST') {
      const hidden = ['client_id', 'redirect_uri', 'state'].map((k) => `<input type="hidden" name="${k}" value="${esc(q.get(k) ?? '')}">`).join('');
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(`<!doctype html><title>Authorize ${esc(state.appSlug)}</title><h1>Sign in to ${esc(state.appSlug)}</h1><form method="post" action="/login/oauth/authorize">${hidden}<label>Username <input name="login" id="login" autofocus></label> <button type="submit" id="authorize">Authorize</button></form>`);
      return true;
    }
    const user = state.findUser(q.get('login') ?? '');
    if (!user) {
      res.writeHead(422, { 'content-type': 'text/html; charset=utf-8' }).end('<h1>Incorrect username.</h1>');
      return true;
    }
    const code = randomBytes(10).toString('hex');
    store.codes.set(code, { login: user.login, redirectUri, expiresAt: Date.now() + 600_000 });
    const target = new URL(redirectUri);
    target.searchParams.set('code', code);
    if (q.get('state') !== null) target.searchParams.set('state', q.get('state')!);
    res.writeHead(302, { location: target.toString() }).end();
    return true;
  }

  if (path === '/login/oauth/access_token' && req.method === 'POST') {
    const q = params(req, await readBody(req));
    const wantsJson = (req.headers.accept ?? '').includes('application/json');
    const answer = (body: Record<string, string | number>) => {
      if (wantsJson) json(res, 200, body);
      else res.writeHead(200, { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }).end(new URLSearchParams(Object.entries(body).map(([k, v]): [string, string] => [k, String(v)])).toString());
    };
    if (q.get('client_id') !== clientId || q.get('client_secret') !== clientSecretFor(webhookSecret)) {
      answer({ error: 'incorrect_client_credentials', error_description: 'The client_id and/or client_secret passed are incorrect.', error_uri: `${DOCS_ROOT}/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#incorrect-client-credentials` });
      return true;
    }
    const code = store.codes.get(q.get('code') ?? '');
    store.codes.delete(q.get('code') ?? '');
    if (!code || code.expiresAt < Date.now() || (q.get('redirect_uri') && q.get('redirect_uri') !== code.redirectUri)) {
      answer({ error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.', error_uri: `${DOCS_ROOT}/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#bad-verification-code` });
      return true;
    }
    const token = `ghu_${randomBytes(18).toString('hex')}`;
    store.tokens.set(token, { login: code.login, expiresAt: Date.now() + TOKEN_TTL_S * 1000 });
    answer({ access_token: token, expires_in: TOKEN_TTL_S, refresh_token: `ghr_${randomBytes(30).toString('hex')}`, refresh_token_expires_in: 15_811_200, token_type: 'bearer', scope: '' });
    return true;
  }

  // REST calls made with a user-to-server token.
  const m = /^(?:token|bearer)\s+(ghu_\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!m || !(path === '/api/v3' || path.startsWith('/api/v3/'))) return false;
  const rec = store.tokens.get(m[1]!);
  if (!rec || rec.expiresAt <= Date.now()) {
    json(res, 401, { message: 'Bad credentials', documentation_url: DOCS_ROOT, status: '401' });
    return true;
  }
  const user = state.findUser(rec.login)!;
  const api = path.slice('/api/v3'.length);
  if (req.method === 'GET' && api === '/user') {
    json(res, 200, state.authenticatedUser(user));
    return true;
  }
  const withPermissions = (repo: RepoRec) => {
    const role = state.roleOf(repo, user);
    const write = role === 'write' || role === 'maintain' || role === 'admin';
    return { ...state.repo(repo), temp_clone_token: '', network_count: 0, subscribers_count: 0, permissions: { admin: role === 'admin', maintain: role === 'maintain' || role === 'admin', push: write, triage: write || role === 'triage', pull: true } };
  };
  const repoPath = /^\/repos\/([^/]+)\/([^/]+)$/.exec(api);
  const repoIdPath = /^\/repositories\/(\d+)$/.exec(api);
  if (req.method === 'GET' && (repoPath || repoIdPath)) {
    // GET /repositories/{id} answers as /repos/{owner}/{repo} does, by the id that survives renames.
    const repo = repoPath ? state.findRepo(decodeURIComponent(repoPath[1]!), decodeURIComponent(repoPath[2]!)) : state.repoById(Number(repoIdPath![1]));
    const role = repo ? state.roleOf(repo, user) : 'none';
    if (repo && role !== 'none' && state.installationFor(repo.owner)) {
      json(res, 200, withPermissions(repo));
      return true;
    }
  }
  // GET /user/installations and /user/installations/{id}/repositories: as GitHub, only what the user
  // has explicit access to (owner or collaborator; a public repository they merely can read is not listed).
  const explicitRepos = (account: UserRec) => [...state.repos.values()].filter((r) => r.owner === account && state.isCollaborator(r, user)).sort((a, b) => a.id - b.id);
  const reachable = [...state.installations.values()].filter((i) => i.account === user || explicitRepos(i.account).length > 0).sort((a, b) => a.id - b.id);
  const instRepos = /^\/user\/installations\/(\d+)\/repositories$/.exec(api);
  if (req.method === 'GET' && (api === '/user/installations' || instRepos)) {
    const inst = instRepos ? reachable.find((i) => i.id === Number(instRepos[1])) : undefined;
    if (instRepos && !inst) {
      json(res, 404, { message: 'Not Found', documentation_url: DOCS_ROOT, status: '404' });
      return true;
    }
    const repos = inst ? explicitRepos(inst.account) : [];
    const count = inst ? repos.length : reachable.length;
    const perPage = Math.min(100, Math.max(1, Number(url.searchParams.get('per_page') ?? 30) || 30));
    const pageNo = Math.max(1, Number(url.searchParams.get('page') ?? 1) || 1);
    const last = Math.max(1, Math.ceil(count / perPage));
    const from = (pageNo - 1) * perPage;
    const link = (n: number, rel: string) => {
      const u = new URL(url.toString());
      u.searchParams.set('per_page', String(perPage));
      u.searchParams.set('page', String(n));
      return `<${u.toString()}>; rel="${rel}"`;
    };
    const links = [...(pageNo < last ? [link(pageNo + 1, 'next'), link(last, 'last')] : []), ...(pageNo > 1 ? [link(1, 'first'), link(pageNo - 1, 'prev')] : [])];
    const body = inst
      ? { total_count: count, repository_selection: 'all', repositories: repos.slice(from, from + perPage).map(withPermissions) }
      : { total_count: count, installations: reachable.slice(from, from + perPage).map((i) => state.installation(i)) };
    const data = Buffer.from(JSON.stringify(body));
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(data.length), ...(links.length ? { link: links.join(', ') } : {}) }).end(data);
    return true;
  }
  json(res, 404, { message: 'Not Found', documentation_url: DOCS_ROOT, status: '404' });
  return true;
}
