/**
 * A stand-in for GitHub Enterprise Server 3.15 on 127.0.0.1: the REST API under /api/v3 (app JWT and
 * installation-token auth), git smart HTTP for real clones and pushes, GitHub Actions log downloads
 * (ci-routes.ts), and webhook deliveries signed like GitHub's. Point Probot at it with
 * `GHE_HOST=<host>` and `GHE_PROTOCOL=http`.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, STATUS_CODES } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { generateAppKeys, resolveAuth } from './auth.ts';
import type { AuthInfo } from './auth.ts';
import { ciHelpers } from './ci-helpers.ts';
import { checkRequest, checkResponse, closeSink, openSink, record as recordViolation, takeViolations } from './conformance.ts';
import type { CheckedRequest } from './conformance.ts';
import { serveJobLogDownload } from './ci-routes.ts';
import { handleGit, isGitPath } from './git-http.ts';
import { handleGraphql } from './graphql.ts';
import { historyHelpers } from './history.ts';
import { reviewHelpers, secondaryRateLimitRule } from './review-helpers.ts';
import * as gitRepo from './git-repo.ts';
import { createManifestFlow } from './manifest.ts';
import { handleOAuth, standinOAuthClient } from './oauth.ts';
import { RestApi } from './rest.ts';
import type { ApiResponse, RateLimitSnapshot } from './rest.ts';
import { DOCS_ROOT, GHES_VERSION, isoNow, StandinState } from './state.ts';
import type { IssueRec, RepoRec, TokenRec } from './state.ts';
import type {
  CommentWithHistory,
  CreateIssueInput,
  CreateRepoOptions,
  GitHubStandin,
  InjectedFailure,
  InjectedFailureHandle,
  Installation,
  Issue,
  IssueEvent,
  IssuedToken,
  PermissionSet,
  Pull,
  Reaction,
  RecordedApiRequest,
  Repo,
  RoleName,
  StandinOptions,
  User,
  WebhookDelivery,
  WebhookPayload,
} from './types.ts';
import { deliver, PayloadFactory } from './webhooks.ts';

const DEFAULT_PERMISSIONS: PermissionSet = { metadata: 'read', contents: 'write', issues: 'write', pull_requests: 'write' };
const DEFAULT_EVENTS = ['issues', 'issue_comment', 'pull_request'];
const MAX_API_BODY = 50 * 1024 * 1024;

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_API_BODY) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const MEDIA_PARAMS = new Set(['raw', 'text', 'html', 'full', 'diff', 'patch', 'sha', 'base64', 'object']);

/** `x-github-media-type` for the request's Accept header, as GitHub derives it. */
function mediaTypeFor(accept: string | undefined): string {
  const m = /application\/vnd\.github((?:\.[\w-]+)*)(?:\+json)?/i.exec(accept ?? '');
  if (!m) return 'github.v3; format=json';
  let version = 'v3';
  let param: string | undefined;
  for (const part of (m[1] ?? '').split('.').filter(Boolean)) {
    if (MEDIA_PARAMS.has(part.toLowerCase())) param = part.toLowerCase();
    else version = part;
  }
  return `github.${version}; ${param ? `param=${param}; ` : ''}format=json`;
}

function requestId(): string {
  const h = randomBytes(10).toString('hex').toUpperCase();
  return `${h.slice(0, 4)}:${h.slice(4, 8)}:${h.slice(8, 14)}:${h.slice(14, 20)}:${Math.floor(Date.now() / 1000).toString(16).toUpperCase()}`;
}

/** Keeps the JSON a handler answers with, for the conformance check of its answer. */
function captureJson(res: ServerResponse): { json: unknown } {
  const seen: { json: unknown } = { json: undefined };
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
  res.end = ((...args: unknown[]) => {
    const chunk = args[0];
    // writeHead's headers are not visible to getHeader: take what parses as JSON (HTML does not).
    if ((typeof chunk === 'string' || Buffer.isBuffer(chunk)) && /^\s*[[{]/.test(chunk.toString().slice(0, 10))) {
      try {
        seen.json = JSON.parse(chunk.toString());
      } catch {
        // not JSON after all: nothing to check
      }
    }
    return end(...args);
  }) as ServerResponse['end'];
  return seen;
}

export async function startGitHubStandin(opts: StandinOptions = {}): Promise<GitHubStandin> {
  const appId = opts.appId ?? 1;
  const appSlug = opts.appSlug ?? 'lilypad';
  const webhookSecret = opts.webhookSecret ?? randomBytes(20).toString('hex');
  const tokenTtlSeconds = opts.tokenTtlSeconds ?? 3600;
  const keys = generateAppKeys();
  const root = mkdtempSync(path.join(os.tmpdir(), 'github-standin-'));
  const gitRoot = path.join(root, 'git');
  const sockets = new Set<Socket>();
  const children = new Set<ChildProcess>();
  const requests: RecordedApiRequest[] = [];
  const deliveries: WebhookDelivery[] = [];
  const hookId = 400000 + Math.floor(Math.random() * 100000);
  const failures: Array<{ rule: InjectedFailure; left: number; hits: number }> = [];
  const gitPushFailures: Array<{ status: number; left: number; hits: number }> = [];
  const graphql = { enabled: true };
  // Every REST request and JSON answer is held to GitHub's published descriptions (conformance.ts).
  // GITHUB_STANDIN_CONFORMANCE=off turns it off for a whole run (to measure what it costs).
  const conformance = opts.conformance === false || process.env['GITHUB_STANDIN_CONFORMANCE'] === 'off' ? undefined : openSink();
  // GitHub answers 404 for a route it does not have and 422 for parameters or a body it refuses.
  const nonConforming = (problems: string[]): ApiResponse & { accepted: string } => {
    const status = problems.some((p) => / no operation /.test(p)) ? 404 : 422;
    return {
      status,
      json: {
        // The 404 says what GitHub says; the violation recorded says why (and fails the test).
        message: status === 404 ? 'Not Found' : `Invalid request: GitHub's REST description does not allow it: ${problems.join('; ')}`,
        documentation_url: DOCS_ROOT,
        status: String(status),
      },
      accepted: '',
    };
  };
  const checkAnswer = (method: string, pathname: string, status: number, json: unknown): void => {
    if (!conformance) return;
    recordViolation(conformance, `the stand-in's answer ${status} to ${method} ${pathname}`, checkResponse(method, pathname, status, json));
  };
  const checkCall = (r: CheckedRequest): string[] => {
    if (!conformance) return [];
    const problems = checkRequest(r);
    const q = r.query.toString();
    recordViolation(conformance, `${r.method} ${r.pathname}${q ? `?${q}` : ''}${r.body === undefined ? '' : ` ${JSON.stringify(r.body).slice(0, 300)}`}`, problems);
    return problems;
  };

  // Rate limits: one core bucket per installation (as GitHub does for installation tokens), one for
  // the app's JWTs, one for anonymous callers. Counted, never enforced.
  const buckets = new Map<string, { limit: number; used: number; reset: number }>();
  const bucketFor = (auth: AuthInfo): { limit: number; used: number; reset: number } => {
    const key = auth.kind === 'installation' ? `inst:${auth.token.installation.id}` : auth.kind === 'app' ? 'app' : 'anon';
    const now = Math.floor(Date.now() / 1000);
    let b = buckets.get(key);
    if (!b || b.reset <= now) {
      b = { limit: auth.kind === 'installation' || auth.kind === 'app' ? 5000 : 60, used: 0, reset: now + 3600 };
      buckets.set(key, b);
    }
    return b;
  };
  const snapshot = (b: { limit: number; used: number; reset: number }): RateLimitSnapshot => ({
    limit: b.limit,
    used: b.used,
    remaining: Math.max(0, b.limit - b.used),
    reset: b.reset,
  });

  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = `127.0.0.1:${port}`;
  const origin = `http://${host}`;
  const apiUrl = `${origin}/api/v3`;
  const state = new StandinState(origin, gitRoot, appId, appSlug, opts.permissions ?? DEFAULT_PERMISSIONS, opts.events ?? DEFAULT_EVENTS);
  const clientId = state.app().client_id;
  const manifestFlow = createManifestFlow(state, { privateKeyPem: keys.privateKeyPem, webhookSecret, clientSecret: standinOAuthClient({ appId, webhookSecret }).clientSecret });
  const rest = new RestApi(state, { tokenTtlSeconds, rateLimitFor: (auth) => snapshot(bucketFor(auth)) });
  const payloadFactory = new PayloadFactory(state);

  const record = (r: Omit<RecordedApiRequest, 'receivedAt'>, receivedAt: number): void => {
    requests.push({ ...r, receivedAt });
  };

  async function onApi(req: IncomingMessage, res: ServerResponse, url: URL, receivedAt: number): Promise<void> {
    const raw = await readBody(req);
    const rawBody = raw.toString('utf8');
    const auth = resolveAuth(req.headers.authorization, state, keys.publicKey, clientId);
    const bucket = bucketFor(auth);
    // GraphQL lives at /api/graphql on Enterprise Server; injected failures see it as `/graphql`.
    const isGraphql = url.pathname === '/api/graphql';
    const pathname = isGraphql ? '/graphql' : url.pathname.slice('/api/v3'.length) || '/';
    let body: unknown;
    let result: ApiResponse & { accepted: string };
    let parseError = false;
    if (rawBody.trim() !== '') {
      try {
        body = JSON.parse(rawBody);
      } catch {
        parseError = true;
      }
    }
    const problems = parseError || isGraphql ? [] : checkCall({ method: req.method ?? 'GET', pathname, query: url.searchParams, body, auth: auth.kind });
    const injected = parseError || problems.length > 0 ? undefined : failures.find((f) => f.left > 0 && f.rule.match({ method: req.method ?? 'GET', path: pathname, body }));
    if (problems.length > 0) {
      result = nonConforming(problems);
    } else if (injected) {
      injected.left -= 1;
      injected.hits += 1;
      const status = injected.rule.status;
      result = {
        status,
        json: { message: injected.rule.message ?? STATUS_CODES[status] ?? 'Error', documentation_url: injected.rule.documentationUrl ?? DOCS_ROOT, status: String(status) },
        ...(injected.rule.headers ? { headers: injected.rule.headers } : {}),
        accepted: '',
      };
    } else if (parseError) {
      result = {
        status: 400,
        json: { message: 'Problems parsing JSON', documentation_url: DOCS_ROOT, status: '400' },
        accepted: '',
      };
    } else if (isGraphql) {
      result = graphql.enabled && req.method === 'POST'
        ? { ...handleGraphql(state, auth, body), accepted: '' }
        : { status: 404, json: { message: 'Not Found', documentation_url: 'https://docs.github.com/graphql' }, accepted: '' };
    } else {
      result = rest.handle({ method: req.method ?? 'GET', pathname, query: url.searchParams, headers: req.headers, body, auth });
      if (!result.raw) checkAnswer(req.method ?? 'GET', pathname, result.status, result.json ?? null);
    }
    if (pathname !== '/rate_limit' && auth.kind !== 'invalid') bucket.used += 1;
    const rl = snapshot(bucket);
    const headers: Record<string, string> = {
      'x-github-media-type': result.mediaType ?? mediaTypeFor(req.headers.accept),
      'x-github-api-version-selected': '2022-11-28',
      'x-github-enterprise-version': GHES_VERSION,
      'x-github-request-id': requestId(),
      'x-ratelimit-limit': String(rl.limit),
      'x-ratelimit-remaining': String(rl.remaining),
      'x-ratelimit-reset': String(rl.reset),
      'x-ratelimit-used': String(rl.used),
      'x-ratelimit-resource': isGraphql ? 'graphql' : 'core',
      'cache-control': 'private, max-age=60, s-maxage=60',
      vary: 'Accept, Authorization, Cookie, X-GitHub-OTP',
      'access-control-expose-headers':
        'ETag, Link, Location, Retry-After, X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, X-RateLimit-Resource, X-RateLimit-Reset, X-OAuth-Scopes, X-Accepted-OAuth-Scopes, X-Poll-Interval, X-GitHub-Media-Type, X-GitHub-SSO, X-GitHub-Request-Id, Deprecation, Sunset',
      ...(result.accepted && auth.kind === 'installation' ? { 'x-accepted-github-permissions': result.accepted } : {}),
      ...(result.headers ?? {}),
    };
    let payload: Buffer | null = null;
    if (result.status !== 204 && result.status !== 304) {
      if (result.raw) {
        payload = result.raw;
        headers['content-type'] = result.contentType ?? 'application/octet-stream';
      } else {
        payload = Buffer.from(JSON.stringify(result.json ?? null));
        headers['content-type'] = 'application/json; charset=utf-8';
      }
      headers['content-length'] = String(payload.length);
    }
    record(
      {
        kind: 'api',
        method: req.method ?? 'GET',
        path: req.url ?? url.pathname,
        status: result.status,
        headers: { ...req.headers },
        body,
        rawBody,
        token: auth.kind === 'installation' ? auth.token.token : null,
      },
      receivedAt,
    );
    res.writeHead(result.status, headers);
    res.end(req.method === 'HEAD' ? undefined : (payload ?? undefined));
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const receivedAt = Date.now();
    const url = new URL(req.url ?? '/', origin);
    try {
      // The manifest conversion and user-token calls are answered by manifest.ts and oauth.ts; they
      // are held to the descriptions here (no body: both answer GET or body-less POST only).
      const sideAnswer = conformance && url.pathname.startsWith('/api/v3/') ? captureJson(res) : undefined;
      const sideChecked = (): void => {
        if (!sideAnswer) return;
        const pathname = url.pathname.slice('/api/v3'.length);
        const user = /^(?:token|bearer)\s+ghu_/i.test(req.headers.authorization ?? '');
        checkCall({ method: req.method ?? 'GET', pathname, query: url.searchParams, body: undefined, auth: user ? 'user' : 'none' });
        if (sideAnswer.json !== undefined) checkAnswer(req.method ?? 'GET', pathname, res.statusCode, sideAnswer.json);
      };
      if (await manifestFlow.handle(req, res, url)) return sideChecked(); // GitHub's app manifest flow (manifest.ts)
      // Injected failures apply to user-token (ghu_) REST calls too, which oauth.ts would otherwise answer first.
      const userTokenCall = /^(?:token|bearer)\s+ghu_/i.test(req.headers.authorization ?? '') && url.pathname.startsWith('/api/v3/');
      if (userTokenCall && failures.some((f) => f.left > 0 && f.rule.match({ method: req.method ?? 'GET', path: url.pathname.slice('/api/v3'.length), body: undefined }))) {
        await onApi(req, res, url, receivedAt);
        return;
      }
      if (await handleOAuth(req, res, url, state, webhookSecret)) return sideChecked(); // OAuth web flow and user-token calls (oauth.ts)
      if (url.pathname === '/api/v3' || url.pathname.startsWith('/api/v3/') || url.pathname === '/api/graphql') {
        await onApi(req, res, url, receivedAt);
        return;
      }
      const download = req.method === 'GET' ? serveJobLogDownload(state, url, req.headers) : null;
      if (download) {
        // A job log at the signed address GET .../actions/jobs/{id}/logs redirected to (ci-routes.ts).
        record({ kind: 'download', method: 'GET', path: req.url ?? url.pathname, status: download.status, headers: { ...req.headers }, body: undefined, rawBody: '', token: null }, receivedAt);
        res.writeHead(download.status, { ...download.headers, 'content-length': String(download.body.length) });
        res.end(download.body);
        return;
      }
      if (isGitPath(url.pathname)) {
        const pushFault = req.method === 'POST' && url.pathname.endsWith('/git-receive-pack') ? gitPushFailures.find((f) => f.left > 0) : undefined;
        const result = pushFault ? await failGitPush(req, res, pushFault) : await handleGit(req, res, url, state, children);
        record(
          { kind: 'git', method: req.method ?? 'GET', path: req.url ?? url.pathname, status: result.status, headers: { ...req.headers }, body: undefined, rawBody: '', token: result.token },
          receivedAt,
        );
        return;
      }
      record({ kind: 'api', method: req.method ?? 'GET', path: req.url ?? url.pathname, status: 404, headers: { ...req.headers }, body: undefined, rawBody: '', token: null }, receivedAt);
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('Not Found\n');
    } catch (err) {
      // A stand-in bug, not a GitHub behaviour: say where, so that a test's 500 can be traced.
      process.stderr.write(`github stand-in: internal error on ${req.method} ${req.url}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify({ message: `stand-in error: ${err instanceof Error ? err.message : String(err)}` }));
      } else {
        res.destroy();
      }
    }
  }

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    void onRequest(req, res);
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  /** A proxy in front of git answering 502: the pack is read (so the client sees the status, not a reset) and dropped. */
  async function failGitPush(req: IncomingMessage, res: ServerResponse, fault: { status: number; left: number; hits: number }): Promise<{ status: number; token: string | null }> {
    fault.left -= 1;
    fault.hits += 1;
    await readBody(req).catch(() => undefined);
    res.writeHead(fault.status, { 'content-type': 'text/html' });
    res.end(`<html><body><h1>${fault.status} ${STATUS_CODES[fault.status] ?? ''}</h1></body></html>\n`);
    return { status: fault.status, token: null };
  }

  // ------------------------------------------------------------- helpers

  const repoOrThrow = (owner: string, name: string): RepoRec => {
    const repo = state.findRepo(owner, name);
    if (!repo) throw new Error(`no repository ${owner}/${name} in the stand-in`);
    return repo;
  };
  const issueOrThrow = (owner: string, name: string, number: number): IssueRec => {
    const issue = repoOrThrow(owner, name).issues.get(number);
    if (!issue) throw new Error(`no issue ${owner}/${name}#${number} in the stand-in`);
    return issue;
  };
  const tokenView = (t: TokenRec): IssuedToken => ({
    token: t.token,
    installationId: t.installation.id,
    repositories: t.repositoryIds === null ? null : t.repositoryIds.map((id) => state.repoById(id)?.name ?? String(id)),
    permissions: { ...t.permissions },
    expiresAt: t.expiresAt,
    createdAt: t.createdAt,
  });

  const payloads = {
    issueOpened(owner: string, repo: string, number: number, sender: string): WebhookPayload {
      return payloadFactory.issueEvent('opened', issueOrThrow(owner, repo, number), sender);
    },
    issueLabeled(owner: string, repo: string, number: number, label: string, sender: string): WebhookPayload {
      const issue = issueOrThrow(owner, repo, number);
      return payloadFactory.issueEvent('labeled', issue, sender, { label: state.label(issue.repo, state.ensureLabel(issue.repo, label)) });
    },
    issueUnlabeled(owner: string, repo: string, number: number, label: string, sender: string): WebhookPayload {
      const issue = issueOrThrow(owner, repo, number);
      return payloadFactory.issueEvent('unlabeled', issue, sender, { label: state.label(issue.repo, state.ensureLabel(issue.repo, label)) });
    },
    issueClosed(owner: string, repo: string, number: number, sender: string): WebhookPayload {
      // The example set has no issues.closed payload; it has the same keys as issues.opened.
      return payloadFactory.issueEvent('closed', issueOrThrow(owner, repo, number), sender, {}, 'opened');
    },
    issueCommentCreated(owner: string, repo: string, number: number, body: string, sender: string): WebhookPayload {
      const issue = issueOrThrow(owner, repo, number);
      const comment = state.addComment(issue, state.ensureUser(sender), body, false);
      return payloadFactory.commentEvent('created', comment, sender);
    },
  };

  const standin: GitHubStandin = {
    origin,
    host,
    apiUrl,
    appId,
    appSlug,
    privateKeyPem: keys.privateKeyPem,
    webhookSecret,
    gitRoot,
    registeredManifests: () => manifestFlow.registered,
    requests,
    get conformanceViolations() {
      return conformance?.all ?? [];
    },
    takeConformanceViolations(): string[] {
      return conformance ? takeViolations(conformance) : [];
    },
    deliveries,
    payloads,

    createInstallation(account): Installation {
      const user = state.ensureUser(account.login, account.type ?? 'User');
      if (account.type === 'Organization') user.type = 'Organization';
      return state.installation(state.createInstallation(user));
    },

    createUser(login, o = {}): User {
      const existing = state.findUser(login);
      if (existing) {
        if (o.type) existing.type = o.type;
        return state.user(existing);
      }
      return state.user(state.ensureUser(login, o.type ?? (login.endsWith('[bot]') ? 'Bot' : 'User')));
    },

    createRepo(owner, name, o: CreateRepoOptions = {}): Repo {
      if (state.findRepo(owner, name)) throw new Error(`repository ${owner}/${name} already exists`);
      const ownerRec = state.findUser(owner) ?? state.ensureUser(owner);
      const defaultBranch = o.defaultBranch ?? 'main';
      const gitDir = path.join(gitRoot, ownerRec.login.toLowerCase(), `${name.toLowerCase()}.git`);
      gitRepo.initBareRepo(gitDir, defaultBranch);
      const files = o.files ?? { 'README.md': `# ${name}\n` };
      gitRepo.commitFiles(gitDir, defaultBranch, files, 'Initial commit', { name: ownerRec.login, email: `${ownerRec.login}@users.noreply.${'127.0.0.1'}` });
      const rec = state.addRepo(ownerRec, name, o.private ?? true, defaultBranch, gitDir, o.description ?? null);
      return state.repo(rec);
    },

    addCollaborator(owner, repo, login, permission: RoleName): void {
      const r = repoOrThrow(owner, repo);
      const user = state.ensureUser(login);
      r.collaborators.set(user.login.toLowerCase(), { user, role: permission });
    },

    createIssue(owner, repo, input: CreateIssueInput): Issue {
      const r = repoOrThrow(owner, repo);
      const issue = state.createIssue(r, {
        title: input.title,
        body: input.body ?? null,
        user: state.ensureUser(input.author),
        labels: input.labels ?? [],
        viaApp: false,
      });
      return state.issue(issue);
    },

    setFile(owner, repo, filePath, content, message): string {
      const r = repoOrThrow(owner, repo);
      const sha = gitRepo.commitFiles(r.gitDir, r.defaultBranch, { [filePath]: content }, message ?? `Update ${filePath}`, {
        name: r.owner.login,
        email: `${r.owner.login}@users.noreply.127.0.0.1`,
      });
      r.pushedAt = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      return sha;
    },

    readFile(owner, repo, ref, filePath): string | null {
      const r = repoOrThrow(owner, repo);
      return gitRepo.readPath(r.gitDir, ref, filePath)?.toString('utf8') ?? null;
    },

    branchSha(owner, repo, branch): string | null {
      return gitRepo.branchSha(repoOrThrow(owner, repo).gitDir, branch);
    },

    issue(owner, repo, number): Issue {
      return state.issue(issueOrThrow(owner, repo, number));
    },

    comments(owner, repo, number): CommentWithHistory[] {
      return issueOrThrow(owner, repo, number).comments.map((c) => ({ ...state.comment(c), edits: [...c.edits] }));
    },

    pulls(owner, repo): Pull[] {
      return [...repoOrThrow(owner, repo).issues.values()].filter((i) => i.pull).map((i) => state.pull(i));
    },

    reactions(commentId): Reaction[] {
      const c = state.comments.get(commentId);
      if (!c) throw new Error(`no comment ${commentId} in the stand-in`);
      return c.reactions.map((r) => state.reaction(r));
    },

    issueReactions(owner, repo, number): Reaction[] {
      return issueOrThrow(owner, repo, number).reactions.map((r) => state.reaction(r));
    },

    issueEvents(owner, repo, number): IssueEvent[] {
      const issue = issueOrThrow(owner, repo, number);
      return issue.events.map((e) => state.issueEvent(issue, e));
    },

    tokens(): IssuedToken[] {
      return [...state.tokens.values()].map(tokenView);
    },

    expireTokens(token?: string): void {
      const past = new Date(Date.now() - 1000);
      for (const t of state.tokens.values()) if (token === undefined || t.token === token) t.expiresAt = past;
    },

    ...reviewHelpers(state, payloadFactory),
    ...historyHelpers(state, payloadFactory),
    ...ciHelpers(state, payloadFactory, (targetUrl, event, payload) => deliver({ secret: webhookSecret, appId, hookId, host, deliveries }, targetUrl, event, payload)),

    setGraphqlEnabled(enabled: boolean): void {
      graphql.enabled = enabled;
    },

    rateLimitApiRequests(rule): InjectedFailureHandle {
      return standin.failApiRequests(secondaryRateLimitRule(rule));
    },

    failGitPushes(o = {}): InjectedFailureHandle {
      const entry = { status: o.status ?? 502, left: o.times ?? 1, hits: 0 };
      gitPushFailures.push(entry);
      return {
        get hits() {
          return entry.hits;
        },
        remove() {
          entry.left = 0;
        },
      };
    },

    failApiRequests(rule: InjectedFailure): InjectedFailureHandle {
      const entry = { rule, left: rule.times ?? 1, hits: 0 };
      failures.push(entry);
      return {
        get hits() {
          return entry.hits;
        },
        remove() {
          entry.left = 0;
        },
      };
    },

    sendWebhook(targetUrl, event, payload, o = {}) {
      return deliver({ secret: webhookSecret, appId, hookId, host, deliveries }, targetUrl, event, payload, o.deliveryId);
    },

    labelIssue(owner, repo, number, label, sender): WebhookPayload {
      const issue = issueOrThrow(owner, repo, number);
      state.addLabel(issue, label, state.ensureUser(sender));
      return payloads.issueLabeled(owner, repo, number, label, sender);
    },

    labelIssueSilently(owner, repo, number, label, sender): void {
      standin.labelIssue(owner, repo, number, label, sender);
    },

    unlabelIssue(owner, repo, number, label, sender): WebhookPayload {
      const issue = issueOrThrow(owner, repo, number);
      state.removeLabel(issue, label, state.ensureUser(sender));
      return payloads.issueUnlabeled(owner, repo, number, label, sender);
    },

    closeIssue(owner, repo, number, sender): WebhookPayload {
      const issue = issueOrThrow(owner, repo, number);
      state.setState(issue, 'closed', state.ensureUser(sender), 'completed');
      return payloads.issueClosed(owner, repo, number, sender);
    },

    commentOnIssue(owner, repo, number, body, sender): WebhookPayload {
      return payloads.issueCommentCreated(owner, repo, number, body, sender);
    },

    editIssue(owner, repo, number, fields, sender): WebhookPayload {
      const issue = issueOrThrow(owner, repo, number);
      const changes: Record<string, { from: string | null }> = {};
      if (fields.title !== undefined) {
        changes['title'] = { from: issue.title };
        issue.title = fields.title;
      }
      if (fields.body !== undefined) {
        changes['body'] = { from: issue.body };
        issue.body = fields.body;
      }
      issue.updatedAt = new Date().toISOString();
      issue.lastEdit = { editor: state.ensureUser(sender), at: isoNow() };
      // The example set has no issues.edited payload; it has the keys of issues.opened plus `changes`.
      return payloadFactory.issueEvent('edited', issue, sender, { changes }, 'opened');
    },

    async close(): Promise<void> {
      for (const child of children) child.kill('SIGKILL');
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
      rmSync(root, { recursive: true, force: true });
      // Anything that did not conform and no test has reported yet fails the caller (an after hook).
      if (conformance) closeSink(conformance);
    },
  };
  return standin;
}
