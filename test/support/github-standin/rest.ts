/**
 * The REST API under /api/v3: routing, authorisation (JWT vs installation token, repository scope,
 * per-permission checks) and the handlers, answering in GitHub's shapes, status codes and messages.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { newInstallationToken, MSG_JWT_UNDECODABLE } from './auth.ts';
import type { AuthInfo } from './auth.ts';
import * as gitRepo from './git-repo.ts';
import { DOCS_ROOT, isoNow, levelAllows, nodeId } from './state.ts';
import { defineCiRoutes } from './ci-routes.ts';
import { defineHistoryRoutes } from './history.ts';
import { commentOnLine, replyToComment, ReviewInputError, submitReview } from './reviews.ts';
import type { LineComment } from './reviews.ts';
import type { CommentRec, InstallationRec, IssueRec, ReactionRec, RepoRec, ReviewCommentRec, StandinState, TokenRec, UserRec } from './state.ts';
import type { AccessLevel, IssueSearchResult, PermissionSet, ReactionContent, RoleName } from './types.ts';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly payload: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof payload.message === 'string' ? payload.message : `HTTP ${status}`);
  }
}

export interface ApiRequest {
  method: string;
  /** Path after /api/v3, still percent-encoded, without the query. */
  pathname: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: unknown;
  auth: AuthInfo;
}

export interface ApiResponse {
  status: number;
  json?: unknown;
  raw?: Buffer;
  contentType?: string;
  mediaType?: string;
  headers?: Record<string, string>;
}

export type Need = readonly [permission: string, level: AccessLevel];
export type Params = Record<string, string>;
export type Handler = (req: ApiRequest, p: Params) => ApiResponse;

interface Route {
  method: string;
  regex: RegExp;
  names: string[];
  auth: 'app' | 'installation' | 'any';
  /** For the x-accepted-github-permissions header. */
  accepted: string;
  docs: string;
  handler: Handler;
}

/** What routes defined outside this file get from RestApi (see routeKit). */
export interface RouteKit {
  add(method: string, template: string, auth: Route['auth'], accepted: string, docs: string, handler: Handler): void;
  repoCtx(req: ApiRequest, p: Params, write: boolean): RepoCtx;
  need(req: ApiRequest, ctx: RepoCtx, needs: readonly Need[]): void;
  list<T>(req: ApiRequest, items: T[]): ApiResponse;
  /** One page of `items` (per_page, page) and its `link` header, for lists GitHub wraps in an object. */
  paginate<T>(req: ApiRequest, items: T[]): { page: T[]; headers: Record<string, string> };
  fail(req: ApiRequest, status: number, message: string, errors?: unknown[]): never;
  validation(req: ApiRequest, errors: unknown[]): never;
  issueOr404(req: ApiRequest, repo: RepoRec, numberText: string | undefined): IssueRec;
  pullOr404(req: ApiRequest, repo: RepoRec, numberText: string | undefined): IssueRec;
  conversationNeeds(issue: IssueRec, level: AccessLevel): Need[];
  actor(ctx: RepoCtx): UserRec;
  bodyRecord(req: ApiRequest): Record<string, unknown>;
}

export interface RepoCtx {
  repo: RepoRec;
  token: TokenRec | null;
  /** The token's installation covers this repository (and the token is not restricted away from it). */
  scoped: boolean;
}

const REACTIONS: readonly ReactionContent[] = ['+1', '-1', 'laugh', 'confused', 'heart', 'hooray', 'rocket', 'eyes'];
const ROLE_TO_LEGACY: Record<RoleName | 'none', 'admin' | 'write' | 'read' | 'none'> = {
  admin: 'admin',
  maintain: 'write',
  write: 'write',
  triage: 'read',
  read: 'read',
  none: 'none',
};
const MAX_BODY = 65536;

/** One whitespace-separated term of a search query: a qualifier (`key:value[,value…]`) or free text. */
interface SearchTerm {
  negated: boolean;
  /** Lower-cased qualifier name, or null for free text. */
  key: string | null;
  /** The qualifier's comma-separated values (any may match), quotes removed; [text] for free text. */
  values: string[];
}

/** Splits on `sep` outside double quotes, dropping the quotes. */
function splitOutsideQuotes(text: string, sep: (c: string) => boolean): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  let any = false;
  for (const c of text) {
    if (c === '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && sep(c)) {
      if (any || cur !== '') out.push(cur);
      cur = '';
      any = false;
    } else {
      cur += c;
      any = true;
    }
  }
  if (any || cur !== '') out.push(cur);
  return out;
}

/**
 * Parses a GitHub search query: `key:value`, `key:"value with spaces"`, `key:a,b` (either), `-key:value`
 * (negated) and free-text words or `"quoted phrases"`.
 */
function parseSearchQuery(q: string): SearchTerm[] {
  const raw: string[] = [];
  let cur = '';
  let quoted = false;
  for (const c of q) {
    if (c === '"') quoted = !quoted;
    if (!quoted && /\s/.test(c)) {
      if (cur) raw.push(cur);
      cur = '';
    } else {
      cur += c;
    }
  }
  if (cur) raw.push(cur);
  return raw.map((token) => {
    const negated = token.length > 1 && token.startsWith('-');
    const body = negated ? token.slice(1) : token;
    const m = /^([A-Za-z][\w-]*):(.+)$/s.exec(body);
    if (m && m[1] && m[2]) {
      return { negated, key: m[1].toLowerCase(), values: splitOutsideQuotes(m[2], (c) => c === ',').filter((v) => v !== '') };
    }
    return { negated, key: null, values: [splitOutsideQuotes(body, () => false).join('')] };
  });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function errorPayload(status: number, message: string, docs: string, errors?: unknown[]): Record<string, unknown> {
  return errors
    ? { message, errors, documentation_url: docs, status: String(status) }
    : { message, documentation_url: docs, status: String(status) };
}

export interface RateLimitSnapshot {
  limit: number;
  used: number;
  remaining: number;
  reset: number;
}

export interface RestOptions {
  tokenTtlSeconds: number;
  /** The caller's core rate-limit bucket (GET /rate_limit does not count against it). */
  rateLimitFor(auth: AuthInfo): RateLimitSnapshot;
}

export class RestApi {
  private readonly routes: Route[] = [];

  constructor(
    private readonly state: StandinState,
    private readonly opts: RestOptions,
  ) {
    this.defineRoutes();
  }

  // ------------------------------------------------------------ framework

  private add(method: string, template: string, auth: Route['auth'], accepted: string, docs: string, handler: Handler): void {
    const names: string[] = [];
    const source = template.replace(/\{(\w+)(\+?)\}/g, (_m, name: string, plus: string) => {
      names.push(name);
      return plus ? '(.*)' : '([^/]+)';
    });
    this.routes.push({ method, regex: new RegExp(`^${source}/?$`), names, auth, accepted, docs: `${DOCS_ROOT}/${docs}`, handler });
  }

  handle(req: ApiRequest): ApiResponse & { accepted: string } {
    let accepted = '';
    try {
      for (const route of this.routes) {
        const m = route.regex.exec(req.pathname);
        if (!m) continue;
        if (route.method !== req.method && !(route.method === 'GET' && req.method === 'HEAD')) continue;
        accepted = route.accepted;
        const params: Params = {};
        route.names.forEach((name, i) => {
          params[name] = decodeURIComponent(m[i + 1] ?? '');
        });
        this.gate(req, route);
        return { ...route.handler(req, params), accepted };
      }
      throw new ApiError(404, errorPayload(404, 'Not Found', DOCS_ROOT));
    } catch (err) {
      if (err instanceof ApiError) return { status: err.status, json: err.payload, headers: err.headers, accepted };
      throw err;
    }
  }

  private docsFor(req: ApiRequest): string {
    for (const route of this.routes) if (route.regex.test(req.pathname) && route.method === req.method) return route.docs;
    return DOCS_ROOT;
  }

  private fail(req: ApiRequest, status: number, message: string, errors?: unknown[]): never {
    throw new ApiError(status, errorPayload(status, message, this.docsFor(req), errors));
  }

  private validation(req: ApiRequest, errors: unknown[]): never {
    this.fail(req, 422, 'Validation Failed', errors);
  }

  private gate(req: ApiRequest, route: Route): void {
    const auth = req.auth;
    if (auth.kind === 'invalid') throw new ApiError(auth.status, errorPayload(auth.status, auth.message, 'https://docs.github.com/rest'));
    if (route.auth === 'app') {
      if (auth.kind !== 'app') throw new ApiError(401, errorPayload(401, MSG_JWT_UNDECODABLE, 'https://docs.github.com/rest'));
    } else if (route.auth === 'installation') {
      if (auth.kind === 'app') this.fail(req, 403, 'Resource not accessible by integration');
    }
  }

  /** Finds the repository and checks the caller may see it (and write to it when `write`). */
  private repoCtx(req: ApiRequest, p: Params, write: boolean): RepoCtx {
    const repo = this.state.findRepo(p.owner ?? '', p.repo ?? '');
    const auth = req.auth;
    if (auth.kind !== 'installation') {
      if (!repo || repo.private) this.fail(req, 404, 'Not Found');
      if (write) this.fail(req, 401, 'Requires authentication');
      return { repo, token: null, scoped: false };
    }
    if (!repo) this.fail(req, 404, 'Not Found');
    const token = auth.token;
    const scoped = repo.owner === token.installation.account && (token.repositoryIds === null || token.repositoryIds.includes(repo.id));
    if (!scoped) {
      if (repo.private) this.fail(req, 404, 'Not Found');
      if (write) this.fail(req, 403, 'Resource not accessible by integration');
    }
    return { repo, token, scoped };
  }

  /** Checks the token holds one of `needs` (GitHub accepts e.g. issues or pull_requests for a PR's conversation). */
  private need(req: ApiRequest, ctx: RepoCtx, needs: readonly Need[]): void {
    if (!ctx.token || !ctx.scoped) return;
    const perms = ctx.token.permissions;
    const ok = needs.some(([perm, level]) => (perm === 'metadata' && level === 'read') || levelAllows(perms[perm], level));
    if (!ok) this.fail(req, 403, 'Resource not accessible by integration');
  }

  private actor(ctx: RepoCtx): UserRec {
    return ctx.token ? this.state.botUser : this.state.appOwner;
  }

  private issueOr404(req: ApiRequest, repo: RepoRec, numberText: string | undefined): IssueRec {
    const n = Number(numberText);
    const issue = Number.isInteger(n) ? repo.issues.get(n) : undefined;
    if (!issue) this.fail(req, 404, 'Not Found');
    return issue;
  }

  private conversationNeeds(issue: IssueRec, level: AccessLevel): Need[] {
    return issue.pull ? [['issues', level], ['pull_requests', level]] : [['issues', level]];
  }

  private commentOr404(req: ApiRequest, repo: RepoRec, idText: string | undefined): CommentRec {
    const comment = this.state.comments.get(Number(idText));
    if (!comment || comment.issue.repo !== repo) this.fail(req, 404, 'Not Found');
    return comment;
  }

  private paginate<T>(req: ApiRequest, items: T[]): { page: T[]; headers: Record<string, string> } {
    const perPage = Math.min(100, Math.max(1, Number(req.query.get('per_page') ?? 30) || 30));
    const page = Math.max(1, Number(req.query.get('page') ?? 1) || 1);
    const last = Math.max(1, Math.ceil(items.length / perPage));
    const slice = items.slice((page - 1) * perPage, page * perPage);
    const link = (n: number, rel: string): string => {
      const q = new URLSearchParams(req.query);
      q.set('page', String(n));
      return `<${this.state.apiUrl}${req.pathname}?${q.toString()}>; rel="${rel}"`;
    };
    const links: string[] = [];
    if (page > 1) links.push(link(page - 1, 'prev'));
    if (page < last) links.push(link(page + 1, 'next'), link(last, 'last'));
    if (page > 1) links.push(link(1, 'first'));
    return { page: slice, headers: links.length ? { link: links.join(', ') } : {} };
  }

  private list<T>(req: ApiRequest, items: T[]): ApiResponse {
    const { page, headers } = this.paginate(req, items);
    return { status: 200, json: page, headers };
  }

  private bodyRecord(req: ApiRequest): Record<string, unknown> {
    if (req.body === undefined) return {};
    if (!isRecord(req.body)) this.fail(req, 400, 'Problems parsing JSON');
    return req.body;
  }

  // --------------------------------------------------------------- routes

  private defineRoutes(): void {
    const s = this.state;

    // ---- app (JWT)
    this.add('GET', '/app', 'app', '', 'apps/apps#get-the-authenticated-app', () => ({ status: 200, json: s.app() }));
    this.add('GET', '/app/installations', 'app', '', 'apps/apps#list-installations-for-the-authenticated-app', (req) =>
      this.list(req, [...s.installations.values()].map((i) => s.installation(i))),
    );
    this.add('GET', '/app/installations/{installation_id}', 'app', '', 'apps/apps#get-an-installation-for-the-authenticated-app', (req, p) => ({
      status: 200,
      json: s.installation(this.installationOr404(req, p.installation_id)),
    }));
    this.add('POST', '/app/installations/{installation_id}/access_tokens', 'app', '', 'apps/apps#create-an-installation-access-token-for-an-app', (req, p) =>
      this.createToken(req, this.installationOr404(req, p.installation_id)),
    );
    this.add('GET', '/repos/{owner}/{repo}/installation', 'app', '', 'apps/apps#get-a-repository-installation-for-the-authenticated-app', (req, p) => {
      const repo = s.findRepo(p.owner ?? '', p.repo ?? '');
      const inst = repo ? s.installationFor(repo.owner) : undefined;
      if (!inst) this.fail(req, 404, 'Not Found');
      return { status: 200, json: s.installation(inst) };
    });
    this.add('GET', '/orgs/{org}/installation', 'app', '', 'apps/apps#get-an-organization-installation-for-the-authenticated-app', (req, p) => {
      const account = s.findUser(p.org ?? '');
      const inst = account && account.type === 'Organization' ? s.installationFor(account) : undefined;
      if (!inst) this.fail(req, 404, 'Not Found');
      return { status: 200, json: s.installation(inst) };
    });
    this.add('GET', '/users/{username}/installation', 'app', '', 'apps/apps#get-a-user-installation-for-the-authenticated-app', (req, p) => {
      const account = s.findUser(p.username ?? '');
      const inst = account ? s.installationFor(account) : undefined;
      if (!inst) this.fail(req, 404, 'Not Found');
      return { status: 200, json: s.installation(inst) };
    });

    // ---- installation
    this.add('DELETE', '/installation/token', 'installation', '', 'apps/installations#revoke-an-installation-access-token', (req) => {
      if (req.auth.kind !== 'installation') this.fail(req, 401, 'Requires authentication');
      req.auth.token.expiresAt = new Date(Date.now() - 1000);
      return { status: 204 };
    });
    this.add('GET', '/installation/repositories', 'installation', 'metadata=read', 'apps/installations#list-repositories-accessible-to-the-app-installation', (req) => {
      if (req.auth.kind !== 'installation') this.fail(req, 401, 'Requires authentication');
      const token = req.auth.token;
      const repos = [...s.repos.values()].filter(
        (r) => r.owner === token.installation.account && (token.repositoryIds === null || token.repositoryIds.includes(r.id)),
      );
      const { page, headers } = this.paginate(req, repos.map((r) => s.repo(r)));
      return {
        status: 200,
        json: { total_count: repos.length, repository_selection: token.repositoryIds === null ? 'all' : 'selected', repositories: page },
        headers,
      };
    });

    this.add('GET', '/rate_limit', 'any', '', 'rate-limit/rate-limit#get-rate-limit-status-for-the-authenticated-user', (req) => {
      const core = this.opts.rateLimitFor(req.auth);
      const bucket = (limit: number): RateLimitSnapshot => ({ limit, used: 0, remaining: limit, reset: core.reset });
      return {
        status: 200,
        json: {
          resources: {
            core,
            search: bucket(30),
            graphql: bucket(core.limit),
            integration_manifest: bucket(5000),
            source_import: bucket(100),
            code_scanning_upload: bucket(1000),
            actions_runner_registration: bucket(10000),
            scim: bucket(15000),
            dependency_snapshots: bucket(100),
            code_search: bucket(10),
          },
          rate: core,
        },
      };
    });

    // ---- repositories
    this.add('GET', '/repos/{owner}/{repo}', 'installation', 'metadata=read', 'repos/repos#get-a-repository', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['metadata', 'read']]);
      return { status: 200, json: { ...s.repo(ctx.repo), temp_clone_token: '', network_count: 0, subscribers_count: 0 } };
    });

    this.add('GET', '/repos/{owner}/{repo}/branches/{branch+}', 'installation', 'metadata=read', 'branches/branches#get-a-branch', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['metadata', 'read']]);
      const branch = p.branch ?? '';
      const sha = gitRepo.branchSha(ctx.repo.gitDir, branch);
      if (!sha) this.fail(req, 404, 'Branch not found');
      return { status: 200, json: this.branchJson(ctx.repo, branch, sha) };
    });

    this.add('GET', '/repos/{owner}/{repo}/collaborators/{username}/permission', 'installation', 'metadata=read', 'collaborators/collaborators#get-repository-permissions-for-a-user', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['metadata', 'read']]);
      const user = s.findUser(p.username ?? '');
      if (!user) this.fail(req, 404, 'Not Found');
      const role = s.roleOf(ctx.repo, user);
      const legacy = ROLE_TO_LEGACY[role];
      const rank = { none: 0, read: 1, triage: 2, write: 3, maintain: 4, admin: 5 }[role];
      return {
        status: 200,
        json: {
          permission: legacy,
          role_name: role,
          user: {
            ...s.user(user),
            permissions: { admin: rank >= 5, maintain: rank >= 4, push: rank >= 3, triage: rank >= 2, pull: rank >= 1 },
            role_name: role,
          },
        },
      };
    });

    this.add('GET', '/repos/{owner}/{repo}/contents', 'installation', 'contents=read', 'repos/contents#get-repository-content', (req, p) =>
      this.contents(req, { ...p, path: '' }),
    );
    this.add('GET', '/repos/{owner}/{repo}/contents/{path+}', 'installation', 'contents=read', 'repos/contents#get-repository-content', (req, p) =>
      this.contents(req, p),
    );

    // ---- issues
    this.add('GET', '/repos/{owner}/{repo}/issues/comments/{comment_id}', 'installation', 'issues=read; pull_requests=read', 'issues/comments#get-an-issue-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      const c = this.commentOr404(req, ctx.repo, p.comment_id);
      this.need(req, ctx, this.conversationNeeds(c.issue, 'read'));
      return { status: 200, json: s.comment(c) };
    });
    this.add('PATCH', '/repos/{owner}/{repo}/issues/comments/{comment_id}', 'installation', 'issues=write; pull_requests=write', 'issues/comments#update-an-issue-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      const c = this.commentOr404(req, ctx.repo, p.comment_id);
      this.need(req, ctx, this.conversationNeeds(c.issue, 'write'));
      const body = this.commentBody(req);
      s.editComment(c, body);
      return { status: 200, json: s.comment(c) };
    });
    this.add('DELETE', '/repos/{owner}/{repo}/issues/comments/{comment_id}', 'installation', 'issues=write; pull_requests=write', 'issues/comments#delete-an-issue-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      const c = this.commentOr404(req, ctx.repo, p.comment_id);
      this.need(req, ctx, this.conversationNeeds(c.issue, 'write'));
      s.deleteComment(c);
      return { status: 204 };
    });
    this.add('POST', '/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions', 'installation', 'issues=write; pull_requests=write', 'reactions/reactions#create-reaction-for-an-issue-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      const c = this.commentOr404(req, ctx.repo, p.comment_id);
      this.need(req, ctx, this.conversationNeeds(c.issue, 'write'));
      return this.react(req, c.reactions, this.actor(ctx));
    });
    this.add('GET', '/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions', 'installation', 'issues=read; pull_requests=read', 'reactions/reactions#list-reactions-for-an-issue-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      const c = this.commentOr404(req, ctx.repo, p.comment_id);
      this.need(req, ctx, this.conversationNeeds(c.issue, 'read'));
      return this.list(req, this.filterReactions(req, c.reactions).map((r) => s.reaction(r)));
    });

    this.add('GET', '/repos/{owner}/{repo}/issues/{issue_number}', 'installation', 'issues=read; pull_requests=read', 'issues/issues#get-an-issue', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'read'));
      return { status: 200, json: s.issue(issue) };
    });
    this.add('PATCH', '/repos/{owner}/{repo}/issues/{issue_number}', 'installation', 'issues=write; pull_requests=write', 'issues/issues#update-an-issue', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'write'));
      const b = this.bodyRecord(req);
      if (typeof b.title === 'string') issue.title = b.title;
      if (typeof b.body === 'string' || b.body === null) issue.body = b.body;
      if (Array.isArray(b.labels)) s.setLabels(issue, this.labelNames(req, b.labels), this.actor(ctx));
      if (b.state !== undefined) {
        if (b.state !== 'open' && b.state !== 'closed') this.validation(req, [{ resource: 'Issue', code: 'invalid', field: 'state' }]);
        const reason = b.state_reason === 'not_planned' || b.state_reason === 'completed' || b.state_reason === 'reopened' ? b.state_reason : null;
        s.setState(issue, b.state, this.actor(ctx), reason);
      }
      issue.updatedAt = isoNow();
      return { status: 200, json: s.issue(issue) };
    });

    this.add('GET', '/repos/{owner}/{repo}/issues/{issue_number}/comments', 'installation', 'issues=read; pull_requests=read', 'issues/comments#list-issue-comments', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'read'));
      const since = req.query.get('since');
      const items = issue.comments.filter((c) => !since || c.updatedAt >= since);
      return this.list(req, items.map((c) => s.comment(c)));
    });
    this.add('POST', '/repos/{owner}/{repo}/issues/{issue_number}/comments', 'installation', 'issues=write; pull_requests=write', 'issues/comments#create-an-issue-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'write'));
      const body = this.commentBody(req);
      const c = s.addComment(issue, this.actor(ctx), body, ctx.token !== null);
      const json = s.comment(c);
      return { status: 201, json, headers: { location: json.url } };
    });

    this.add('POST', '/repos/{owner}/{repo}/issues/{issue_number}/reactions', 'installation', 'issues=write; pull_requests=write', 'reactions/reactions#create-reaction-for-an-issue', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'write'));
      return this.react(req, issue.reactions, this.actor(ctx));
    });
    this.add('GET', '/repos/{owner}/{repo}/issues/{issue_number}/reactions', 'installation', 'issues=read; pull_requests=read', 'reactions/reactions#list-reactions-for-an-issue', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'read'));
      return this.list(req, this.filterReactions(req, issue.reactions).map((r) => s.reaction(r)));
    });

    this.add('GET', '/repos/{owner}/{repo}/issues/{issue_number}/labels', 'installation', 'issues=read; pull_requests=read', 'issues/labels#list-labels-for-an-issue', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'read'));
      return this.list(req, issue.labels.map((l) => s.label(ctx.repo, l)));
    });
    const setOrAdd = (replace: boolean): Handler => (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'write'));
      const raw = Array.isArray(req.body) ? req.body : isRecord(req.body) ? req.body.labels : undefined;
      if (!Array.isArray(raw)) this.fail(req, 422, 'Invalid request.\n\n"labels" wasn\'t supplied.');
      const names = this.labelNames(req, raw);
      if (replace) s.setLabels(issue, names, this.actor(ctx));
      else for (const l of names) s.addLabel(issue, l, this.actor(ctx));
      return { status: 200, json: issue.labels.map((l) => s.label(ctx.repo, l)) };
    };
    this.add('POST', '/repos/{owner}/{repo}/issues/{issue_number}/labels', 'installation', 'issues=write; pull_requests=write', 'issues/labels#add-labels-to-an-issue', setOrAdd(false));
    this.add('PUT', '/repos/{owner}/{repo}/issues/{issue_number}/labels', 'installation', 'issues=write; pull_requests=write', 'issues/labels#set-labels-for-an-issue', setOrAdd(true));
    this.add('DELETE', '/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}', 'installation', 'issues=write; pull_requests=write', 'issues/labels#remove-a-label-from-an-issue', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'write'));
      if (!s.removeLabel(issue, p.name ?? '', this.actor(ctx))) this.fail(req, 404, 'Label does not exist');
      return { status: 200, json: issue.labels.map((l) => s.label(ctx.repo, l)) };
    });

    this.add('GET', '/repos/{owner}/{repo}/issues/{issue_number}/events', 'installation', 'issues=read; pull_requests=read', 'issues/events#list-issue-events', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      const issue = this.issueOr404(req, ctx.repo, p.issue_number);
      this.need(req, ctx, this.conversationNeeds(issue, 'read'));
      return this.list(req, issue.events.map((e) => s.issueEvent(issue, e)));
    });

    // ---- search
    this.add('GET', '/search/issues', 'installation', 'issues=read; pull_requests=read', 'search/search#search-issues-and-pull-requests', (req) => {
      const items = this.searchIssues(req);
      const { page, headers } = this.paginate(req, items);
      const json: IssueSearchResult = { total_count: items.length, incomplete_results: false, items: page.map((i) => ({ ...s.issue(i), score: 1 })), search_type: 'lexical' };
      return { status: 200, json, headers };
    });

    // ---- pulls
    this.add('GET', '/repos/{owner}/{repo}/pulls', 'installation', 'pull_requests=read', 'pulls/pulls#list-pull-requests', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['pull_requests', 'read']]);
      return this.list(req, this.filterPulls(req, ctx.repo).map((i) => s.pull(i)));
    });
    this.add('POST', '/repos/{owner}/{repo}/pulls', 'installation', 'pull_requests=write', 'pulls/pulls#create-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      this.need(req, ctx, [['pull_requests', 'write']]);
      return this.createPull(req, ctx);
    });
    this.add('GET', '/repos/{owner}/{repo}/pulls/{pull_number}', 'installation', 'pull_requests=read', 'pulls/pulls#get-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['pull_requests', 'read']]);
      return { status: 200, json: s.pull(this.pullOr404(req, ctx.repo, p.pull_number), true) };
    });
    this.add('PATCH', '/repos/{owner}/{repo}/pulls/{pull_number}', 'installation', 'pull_requests=write', 'pulls/pulls#update-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      this.need(req, ctx, [['pull_requests', 'write']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      const pull = issue.pull;
      if (!pull) this.fail(req, 404, 'Not Found');
      const b = this.bodyRecord(req);
      if (typeof b.title === 'string') issue.title = b.title;
      if (typeof b.body === 'string' || b.body === null) issue.body = b.body;
      if (typeof b.base === 'string') {
        if (!gitRepo.branchSha(ctx.repo.gitDir, b.base)) this.validation(req, [{ resource: 'PullRequest', field: 'base', code: 'invalid' }]);
        pull.baseRef = b.base;
      }
      if (b.state !== undefined) {
        if (b.state !== 'open' && b.state !== 'closed') this.validation(req, [{ resource: 'PullRequest', field: 'state', code: 'invalid' }]);
        if (b.state === 'open' && issue.state === 'closed' && this.openPullFor(ctx.repo, pull.headRef, pull.baseRef)) {
          this.validation(req, [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${ctx.repo.owner.login}:${pull.headRef}.` }]);
        }
        s.setState(issue, b.state, this.actor(ctx), null);
        if (b.state === 'closed') issue.stateReason = null;
      }
      issue.updatedAt = isoNow();
      return { status: 200, json: s.pull(issue, true) };
    });
    this.add('GET', '/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers', 'installation', 'pull_requests=read', 'pulls/review-requests#get-all-requested-reviewers-for-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['pull_requests', 'read']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      return { status: 200, json: { users: (issue.pull?.requestedReviewers ?? []).map((u) => s.user(u)), teams: [] } };
    });
    this.add('POST', '/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers', 'installation', 'pull_requests=write', 'pulls/review-requests#request-reviewers-for-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      this.need(req, ctx, [['pull_requests', 'write']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      const pull = issue.pull;
      if (!pull) this.fail(req, 404, 'Not Found');
      const b = this.bodyRecord(req);
      const logins = Array.isArray(b.reviewers) ? b.reviewers.filter((r): r is string => typeof r === 'string') : [];
      const teams = Array.isArray(b.team_reviewers) ? b.team_reviewers : [];
      if (logins.length === 0 && teams.length === 0) this.fail(req, 422, 'Invalid request.\n\n"reviewers" wasn\'t supplied.');
      if (teams.length > 0) this.validation(req, [{ resource: 'PullRequest', code: 'custom', message: 'Could not resolve to a node with the global id of team' }]);
      const users: UserRec[] = [];
      for (const login of logins) {
        const user = s.findUser(login);
        if (user && user === issue.user) this.fail(req, 422, 'Review cannot be requested from pull request author.');
        if (!user || !s.isCollaborator(ctx.repo, user)) {
          this.fail(req, 422, `Reviews may only be requested from collaborators. One or more of the users or teams you specified is not a collaborator of the ${ctx.repo.owner.login}/${ctx.repo.name} repository.`);
        }
        users.push(user);
      }
      for (const u of users) if (!pull.requestedReviewers.includes(u)) pull.requestedReviewers.push(u);
      issue.updatedAt = isoNow();
      return { status: 201, json: s.pull(issue) };
    });
    this.add('DELETE', '/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers', 'installation', 'pull_requests=write', 'pulls/review-requests#remove-requested-reviewers-from-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      this.need(req, ctx, [['pull_requests', 'write']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      const pull = issue.pull;
      if (!pull) this.fail(req, 404, 'Not Found');
      const b = this.bodyRecord(req);
      const logins = new Set((Array.isArray(b.reviewers) ? b.reviewers : []).filter((r): r is string => typeof r === 'string').map((r) => r.toLowerCase()));
      pull.requestedReviewers = pull.requestedReviewers.filter((u) => !logins.has(u.login.toLowerCase()));
      return { status: 200, json: s.pull(issue) };
    });

    // ---- pull request reviews, review comments (threads are GraphQL-only, see graphql.ts)
    this.add('GET', '/repos/{owner}/{repo}/pulls/{pull_number}/reviews', 'installation', 'pull_requests=read', 'pulls/reviews#list-reviews-for-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['pull_requests', 'read']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      // Pending reviews are visible to their author only.
      const viewer = this.actor(ctx);
      return this.list(req, s.reviewsOf(issue).filter((r) => r.state !== 'PENDING' || r.user === viewer).map((r) => s.review(r)));
    });
    this.add('GET', '/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}', 'installation', 'pull_requests=read', 'pulls/reviews#get-a-review-for-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['pull_requests', 'read']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      const review = s.reviews.get(Number(p.review_id));
      if (!review || review.issue !== issue) this.fail(req, 404, 'Not Found');
      return { status: 200, json: s.review(review) };
    });
    this.add('POST', '/repos/{owner}/{repo}/pulls/{pull_number}/reviews', 'installation', 'pull_requests=write', 'pulls/reviews#create-a-review-for-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      this.need(req, ctx, [['pull_requests', 'write']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      const b = this.bodyRecord(req);
      const event = b.event === undefined ? null : b.event;
      if (event !== null && event !== 'APPROVE' && event !== 'REQUEST_CHANGES' && event !== 'COMMENT') {
        this.fail(req, 422, `Invalid request.\n\nFor 'properties/event', ${JSON.stringify(event)} is not a possible value.`);
      }
      const rawComments = b.comments === undefined ? [] : b.comments;
      if (!Array.isArray(rawComments)) this.fail(req, 422, `Invalid request.\n\nFor 'properties/comments', ${JSON.stringify(rawComments)} is not an array.`);
      const comments: LineComment[] = rawComments.map((c) => {
        if (!isRecord(c) || typeof c.path !== 'string' || typeof c.body !== 'string' || typeof c.line !== 'number') {
          return this.fail(req, 422, 'Invalid request.\n\n"path", "line" and "body" are required for each review comment (the stand-in does not support `position`).');
        }
        return { path: c.path, line: c.line, body: c.body, ...(c.side === 'LEFT' || c.side === 'RIGHT' ? { side: c.side } : {}) };
      });
      const result = this.reviewInput(req, () =>
        submitReview(s, issue, { user: this.actor(ctx), event, body: typeof b.body === 'string' ? b.body : '', comments, viaApp: ctx.token !== null }),
      );
      return { status: 200, json: s.review(result.review) };
    });

    this.add('GET', '/repos/{owner}/{repo}/pulls/{pull_number}/comments', 'installation', 'pull_requests=read', 'pulls/comments#list-review-comments-on-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['pull_requests', 'read']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      const since = req.query.get('since');
      const items = s.reviewCommentsOf(issue).filter((c) => c.review.state !== 'PENDING' && (!since || c.updatedAt >= since));
      const sort = req.query.get('sort') ?? 'created';
      const key = (c: ReviewCommentRec): string => `${sort === 'updated' ? c.updatedAt : c.createdAt}#${String(c.id).padStart(12, '0')}`;
      items.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
      if (req.query.get('direction') === 'desc') items.reverse();
      return this.list(req, items.map((c) => s.reviewComment(c)));
    });
    this.add('POST', '/repos/{owner}/{repo}/pulls/{pull_number}/comments', 'installation', 'pull_requests=write', 'pulls/comments#create-a-review-comment-for-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      this.need(req, ctx, [['pull_requests', 'write']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      const b = this.bodyRecord(req);
      const body = this.reviewCommentBody(req, b);
      let created: ReviewCommentRec;
      if (b.in_reply_to !== undefined) {
        // The older form of a reply: every other field is ignored.
        const to = this.reviewCommentOr404(req, ctx.repo, String(b.in_reply_to));
        if (to.issue !== issue) this.fail(req, 404, 'Not Found');
        created = replyToComment(s, to, { user: this.actor(ctx), body, viaApp: ctx.token !== null });
      } else {
        const missing = ['commit_id', 'path', 'line'].filter((f) => b[f] === undefined).map((field) => ({ resource: 'PullRequestReviewComment', code: 'missing_field', field }));
        if (missing.length) this.validation(req, missing);
        if (typeof b.path !== 'string' || typeof b.line !== 'number' || typeof b.commit_id !== 'string') {
          this.fail(req, 422, 'Invalid request.\n\n"commit_id" and "path" must be strings and "line" an integer.');
        }
        if (!gitRepo.resolveCommit(ctx.repo.gitDir, b.commit_id)) {
          this.validation(req, [{ resource: 'PullRequestReviewComment', code: 'invalid', field: 'commit_id', message: 'commit_id is not part of the pull request' }]);
        }
        const line: LineComment = { path: b.path, line: b.line, body, ...(b.side === 'LEFT' || b.side === 'RIGHT' ? { side: b.side } : {}) };
        created = this.reviewInput(req, () => commentOnLine(s, issue, { ...line, user: this.actor(ctx), viaApp: ctx.token !== null }));
      }
      const json = s.reviewComment(created);
      return { status: 201, json, headers: { location: json.url } };
    });
    this.add('POST', '/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies', 'installation', 'pull_requests=write', 'pulls/comments#create-a-reply-for-a-review-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      this.need(req, ctx, [['pull_requests', 'write']]);
      const issue = this.pullOr404(req, ctx.repo, p.pull_number);
      const to = this.reviewCommentOr404(req, ctx.repo, p.comment_id);
      if (to.issue !== issue) this.fail(req, 404, 'Not Found');
      const body = this.reviewCommentBody(req, this.bodyRecord(req));
      const json = s.reviewComment(replyToComment(s, to, { user: this.actor(ctx), body, viaApp: ctx.token !== null }));
      return { status: 201, json, headers: { location: json.url } };
    });
    this.add('GET', '/repos/{owner}/{repo}/pulls/comments/{comment_id}', 'installation', 'pull_requests=read', 'pulls/comments#get-a-review-comment-for-a-pull-request', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['pull_requests', 'read']]);
      return { status: 200, json: s.reviewComment(this.reviewCommentOr404(req, ctx.repo, p.comment_id)) };
    });
    this.add('POST', '/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions', 'installation', 'pull_requests=write', 'reactions/reactions#create-reaction-for-a-pull-request-review-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, true);
      this.need(req, ctx, [['pull_requests', 'write']]);
      return this.react(req, this.reviewCommentOr404(req, ctx.repo, p.comment_id).reactions, this.actor(ctx));
    });
    this.add('GET', '/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions', 'installation', 'pull_requests=read', 'reactions/reactions#list-reactions-for-a-pull-request-review-comment', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['pull_requests', 'read']]);
      return this.list(req, this.filterReactions(req, this.reviewCommentOr404(req, ctx.repo, p.comment_id).reactions).map((r) => s.reaction(r)));
    });

    // ---- commits (the commit date is what a "since this revision" marker resolves to)
    this.add('GET', '/repos/{owner}/{repo}/commits/{ref}', 'installation', 'contents=read', 'commits/commits#get-a-commit', (req, p) => {
      const ctx = this.repoCtx(req, p, false);
      this.need(req, ctx, [['contents', 'read']]);
      const sha = gitRepo.resolveCommit(ctx.repo.gitDir, p.ref ?? '');
      if (!sha) this.fail(req, 422, `No commit found for SHA: ${p.ref ?? ''}`);
      const branch = this.branchJson(ctx.repo, '', sha).commit as Record<string, unknown>;
      return { status: 200, json: { ...branch, files: [] } };
    });

    // ---- issue history: list issues, timelines, merging (history.ts)
    defineHistoryRoutes(this.state, this.routeKit());

    // ---- CI: check suites and runs, annotations, commit statuses, Actions jobs and logs (ci-routes.ts)
    defineCiRoutes(this.state, this.routeKit());
  }

  /** The routing and checks, for the routes defined in other files (history.ts, ci-routes.ts). */
  private routeKit(): RouteKit {
    return {
      add: (method, template, auth, accepted, docs, handler) => this.add(method, template, auth, accepted, docs, handler),
      repoCtx: (req, p, write) => this.repoCtx(req, p, write),
      need: (req, ctx, needs) => this.need(req, ctx, needs),
      list: (req, items) => this.list(req, items),
      paginate: (req, items) => this.paginate(req, items),
      fail: (req, status, message, errors) => this.fail(req, status, message, errors),
      validation: (req, errors) => this.validation(req, errors),
      issueOr404: (req, repo, n) => this.issueOr404(req, repo, n),
      pullOr404: (req, repo, n) => this.pullOr404(req, repo, n),
      conversationNeeds: (issue, level) => this.conversationNeeds(issue, level),
      actor: (ctx) => this.actor(ctx),
      bodyRecord: (req) => this.bodyRecord(req),
    };
  }

  // ------------------------------------------------------------- handlers

  private reviewCommentOr404(req: ApiRequest, repo: RepoRec, idText: string | undefined): ReviewCommentRec {
    const c = this.state.reviewComments.get(Number(idText));
    if (!c || c.issue.repo !== repo || c.review.state === 'PENDING') this.fail(req, 404, 'Not Found');
    return c;
  }

  private reviewCommentBody(req: ApiRequest, b: Record<string, unknown>): string {
    if (typeof b.body !== 'string' || b.body === '') this.validation(req, [{ resource: 'PullRequestReviewComment', code: 'missing_field', field: 'body' }]);
    if (b.body.length > MAX_BODY) this.validation(req, [{ resource: 'PullRequestReviewComment', code: 'custom', field: 'body', message: 'body is too long (maximum is 65536 characters)' }]);
    return b.body;
  }

  /** Runs a review operation, answering its ReviewInputError as GitHub's 422. */
  private reviewInput<T>(req: ApiRequest, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof ReviewInputError) throw new ApiError(422, errorPayload(422, err.message, this.docsFor(req), err.errors));
      throw err;
    }
  }

  private installationOr404(req: ApiRequest, idText: string | undefined): InstallationRec {
    const inst = this.state.installations.get(Number(idText));
    if (!inst) this.fail(req, 404, 'Not Found');
    return inst;
  }

  private createToken(req: ApiRequest, inst: InstallationRec): ApiResponse {
    const s = this.state;
    const b = this.bodyRecord(req);
    const accountRepos = [...s.repos.values()].filter((r) => r.owner === inst.account);
    let selected: RepoRec[] | null = null;
    const notAccessible = 'There is at least one repository that does not exist or is not accessible to the parent installation.';
    if (b.repositories !== undefined || b.repository_ids !== undefined) {
      selected = [];
      if (b.repositories !== undefined) {
        if (!Array.isArray(b.repositories)) this.fail(req, 422, notAccessible);
        for (const name of b.repositories) {
          const r = typeof name === 'string' ? accountRepos.find((x) => x.name.toLowerCase() === name.toLowerCase()) : undefined;
          if (!r) this.fail(req, 422, notAccessible);
          if (!selected.includes(r)) selected.push(r);
        }
      }
      if (b.repository_ids !== undefined) {
        if (!Array.isArray(b.repository_ids)) this.fail(req, 422, notAccessible);
        for (const id of b.repository_ids) {
          const r = accountRepos.find((x) => x.id === Number(id));
          if (!r) this.fail(req, 422, notAccessible);
          if (!selected.includes(r)) selected.push(r);
        }
      }
    }
    let permissions: PermissionSet = { ...inst.permissions };
    if (b.permissions !== undefined) {
      if (!isRecord(b.permissions)) this.fail(req, 422, 'The permissions requested are not granted to this installation.');
      permissions = {};
      for (const [name, level] of Object.entries(b.permissions)) {
        if ((level !== 'read' && level !== 'write') || !levelAllows(inst.permissions[name], level)) {
          this.fail(req, 422, 'The permissions requested are not granted to this installation.');
        }
        permissions[name] = level;
      }
      if (inst.permissions.metadata && !permissions.metadata) permissions.metadata = 'read';
    }
    const createdAt = new Date();
    const expiresAt = new Date(createdAt.getTime() + this.opts.tokenTtlSeconds * 1000);
    const rec: TokenRec = {
      token: newInstallationToken(),
      installation: inst,
      repositoryIds: selected ? selected.map((r) => r.id) : null,
      permissions,
      createdAt,
      expiresAt,
    };
    s.tokens.set(rec.token, rec);
    const json: Record<string, unknown> = {
      token: rec.token,
      expires_at: isoNow(expiresAt),
      permissions,
      repository_selection: selected ? 'selected' : 'all',
    };
    if (selected) json.repositories = selected.map((r) => s.repo(r));
    return { status: 201, json };
  }

  private commentBody(req: ApiRequest): string {
    const b = this.bodyRecord(req);
    if (b.body === undefined) this.fail(req, 422, 'Invalid request.\n\n"body" wasn\'t supplied.');
    if (typeof b.body !== 'string') this.fail(req, 422, `Invalid request.\n\nFor 'properties/body', ${JSON.stringify(b.body)} is not a string.`);
    if (b.body.length > MAX_BODY) {
      this.validation(req, [{ resource: 'IssueComment', code: 'unprocessable', field: 'data', message: 'Body is too long (maximum is 65536 characters)' }]);
    }
    return b.body;
  }

  private labelNames(req: ApiRequest, raw: unknown[]): string[] {
    const names: string[] = [];
    for (const item of raw) {
      const name = typeof item === 'string' ? item : isRecord(item) && typeof item.name === 'string' ? item.name : null;
      if (name === null || name.trim() === '') this.validation(req, [{ resource: 'Label', code: 'invalid', field: 'name' }]);
      names.push(name);
    }
    return names;
  }

  private react(req: ApiRequest, list: ReactionRec[], user: UserRec): ApiResponse {
    const b = this.bodyRecord(req);
    const content = b.content;
    if (typeof content !== 'string' || !REACTIONS.includes(content as ReactionContent)) {
      this.fail(req, 422, `Invalid request.\n\nFor 'properties/content', ${JSON.stringify(content ?? null)} is not a possible value.`);
    }
    const { reaction, created } = this.state.addReaction(list, user, content as ReactionContent);
    return { status: created ? 201 : 200, json: this.state.reaction(reaction) };
  }

  private filterReactions(req: ApiRequest, list: ReactionRec[]): ReactionRec[] {
    const content = req.query.get('content');
    return content ? list.filter((r) => r.content === content) : list;
  }

  private contents(req: ApiRequest, p: Params): ApiResponse {
    const s = this.state;
    const ctx = this.repoCtx(req, p, false);
    this.need(req, ctx, [['contents', 'read']]);
    const repo = ctx.repo;
    const ref = req.query.get('ref') || repo.defaultBranch;
    const filePath = (p.path ?? '').replace(/^\/+|\/+$/g, '');
    const commit = gitRepo.resolveCommit(repo.gitDir, ref);
    if (!commit) this.fail(req, 404, `No commit found for the ref ${ref}`);
    const obj = gitRepo.pathObject(repo.gitDir, commit, filePath);
    if (!obj) this.fail(req, 404, 'Not Found');
    const full = `${repo.owner.login}/${repo.name}`;
    const entryJson = (path: string, sha: string, size: number, type: 'file' | 'dir' | 'submodule'): Record<string, unknown> => {
      const url = `${s.apiUrl}/repos/${full}/contents/${path}?ref=${encodeURIComponent(ref)}`;
      const html = `${s.origin}/${full}/${type === 'dir' ? 'tree' : 'blob'}/${ref}/${path}`;
      const gitUrl = `${s.apiUrl}/repos/${full}/git/${type === 'dir' ? 'trees' : 'blobs'}/${sha}`;
      return {
        name: path.split('/').pop() ?? path,
        path,
        sha,
        size,
        url,
        html_url: html,
        git_url: gitUrl,
        download_url: type === 'file' ? `${s.origin}/raw/${full}/${ref}/${path}` : null,
        type,
        _links: { self: url, git: gitUrl, html },
      };
    };
    const accept = String(req.headers.accept ?? '');
    if (obj.type === 'blob') {
      const data = gitRepo.readBlob(repo.gitDir, obj.sha) ?? Buffer.alloc(0);
      const rawType = /application\/vnd\.github(?:\.v3)?\.raw(?:\+json)?/i.exec(accept)?.[0];
      if (rawType) {
        const lower = rawType.toLowerCase();
        // github.com answers `application/vnd.github.raw` without a charset (Octokit then yields an
        // ArrayBuffer), the v3 and +json forms with `; charset=utf-8`.
        const contentType = lower === 'application/vnd.github.raw' ? lower : `${lower}; charset=utf-8`;
        return { status: 200, raw: data, contentType, mediaType: 'github.v3; param=raw' };
      }
      const b64 = data.toString('base64');
      const wrapped = b64.length ? `${b64.replace(/(.{60})/g, '$1\n').replace(/\n$/, '')}\n` : '';
      const entry = entryJson(filePath, obj.sha, data.length, 'file');
      const { _links, ...rest } = entry;
      return { status: 200, json: { ...rest, content: wrapped, encoding: 'base64', _links } };
    }
    if (obj.type === 'tree') {
      const entries = gitRepo.listTree(repo.gitDir, obj.sha).map((e) =>
        entryJson(filePath ? `${filePath}/${e.name}` : e.name, e.sha, e.type === 'blob' ? e.size : 0, e.type === 'tree' ? 'dir' : e.type === 'commit' ? 'submodule' : 'file'),
      );
      return { status: 200, json: entries };
    }
    return { status: 200, json: entryJson(filePath, obj.sha, 0, 'submodule') };
  }

  private branchJson(repo: RepoRec, branch: string, sha: string): Record<string, unknown> {
    const s = this.state;
    const full = `${repo.owner.login}/${repo.name}`;
    const info = gitRepo.commitInfo(repo.gitDir, sha);
    const commitUrl = `${s.apiUrl}/repos/${full}/commits/${sha}`;
    return {
      name: branch,
      commit: {
        sha,
        node_id: nodeId('Commit', parseInt(sha.slice(0, 8), 16)),
        commit: {
          author: { name: info?.authorName ?? '', email: info?.authorEmail ?? '', date: info?.authorDate ?? isoNow() },
          committer: { name: info?.committerName ?? '', email: info?.committerEmail ?? '', date: info?.committerDate ?? isoNow() },
          message: info?.message ?? '',
          tree: { sha: info?.tree ?? '', url: `${s.apiUrl}/repos/${full}/git/trees/${info?.tree ?? ''}` },
          url: `${s.apiUrl}/repos/${full}/git/commits/${sha}`,
          comment_count: 0,
          verification: { verified: false, reason: 'unsigned', signature: null, payload: null, verified_at: null },
        },
        url: commitUrl,
        html_url: `${s.origin}/${full}/commit/${sha}`,
        comments_url: `${commitUrl}/comments`,
        author: null,
        committer: null,
        parents: (info?.parents ?? []).map((ps) => ({ sha: ps, url: `${s.apiUrl}/repos/${full}/commits/${ps}`, html_url: `${s.origin}/${full}/commit/${ps}` })),
      },
      _links: { self: `${s.apiUrl}/repos/${full}/branches/${branch}`, html: `${s.origin}/${full}/tree/${branch}` },
      protected: false,
      protection: { enabled: false, required_status_checks: { enforcement_level: 'off', contexts: [], checks: [] } },
      protection_url: `${s.apiUrl}/repos/${full}/branches/${branch}/protection`,
    };
  }

  /** Whether the caller may see the repository at all (scoped to its installation token, or public). */
  private canSeeRepo(auth: AuthInfo, repo: RepoRec): boolean {
    return !repo.private || (auth.kind === 'installation' && this.tokenCovers(auth.token, repo));
  }

  private tokenCovers(token: TokenRec, repo: RepoRec): boolean {
    return repo.owner === token.installation.account && (token.repositoryIds === null || token.repositoryIds.includes(repo.id));
  }

  /** Whether search may return the issue: a public repository, or one the token covers with issues (or, for a PR, pull_requests) read. */
  private canSearchIssue(auth: AuthInfo, issue: IssueRec): boolean {
    const repo = issue.repo;
    if (auth.kind === 'installation' && this.tokenCovers(auth.token, repo)) {
      const perms = auth.token.permissions;
      return levelAllows(perms.issues, 'read') || (issue.pull !== null && levelAllows(perms.pull_requests, 'read'));
    }
    return !repo.private;
  }

  /** GET /search/issues: the matching issues and pull requests the caller can see, in the requested order. */
  private searchIssues(req: ApiRequest): IssueRec[] {
    const s = this.state;
    const q = req.query.get('q');
    if (q === null || q.trim() === '') this.validation(req, [{ resource: 'Search', field: 'q', code: 'missing' }]);
    const cannotSearch = (): never =>
      this.validation(req, [
        {
          message: 'The listed users and repositories cannot be searched either because the resources do not exist or you do not have permission to view them.',
          resource: 'Search',
          field: 'q',
          code: 'invalid',
        },
      ]);
    const unsupported = (what: string): never =>
      this.validation(req, [{ message: `The GitHub stand-in does not support the search qualifier ${what}`, resource: 'Search', field: 'q', code: 'invalid' }]);
    const lower = (v: string): string => v.toLowerCase();

    type IssueTest = (i: IssueRec) => boolean;
    const filters: IssueTest[] = [];
    /** repo:/org:/user: qualifiers: an issue must be in at least one of them (when there are any). */
    const scopes: IssueTest[] = [];
    for (const term of parseSearchQuery(q)) {
      const values = term.values;
      let test: IssueTest;
      let scope = false;
      switch (term.key) {
        case null: {
          const needle = lower(values[0] ?? '');
          test = (i) => lower(`${i.title}\n${i.body ?? ''}`).includes(needle);
          break;
        }
        case 'is':
        case 'type':
        case 'state': {
          const allowed = term.key === 'is' ? ['issue', 'pr', 'pull-request', 'open', 'closed'] : term.key === 'type' ? ['issue', 'pr'] : ['open', 'closed'];
          const tests = values.map((raw): IssueTest => {
            const v = lower(raw);
            if (!allowed.includes(v)) unsupported(`${term.key}:${raw}`);
            if (v === 'issue') return (i) => i.pull === null;
            if (v === 'pr' || v === 'pull-request') return (i) => i.pull !== null;
            return (i) => i.state === v;
          });
          test = (i) => tests.some((t) => t(i));
          break;
        }
        case 'label': {
          const names = values.map(lower);
          test = (i) => i.labels.some((l) => names.includes(lower(l.name)));
          break;
        }
        case 'no': {
          const tests = values.map((raw): IssueTest => {
            const v = lower(raw);
            if (v === 'label') return (i) => i.labels.length === 0;
            if (v === 'assignee' || v === 'milestone') return () => true; // the stand-in has neither
            return unsupported(`no:${raw}`);
          });
          test = (i) => tests.some((t) => t(i));
          break;
        }
        case 'author': {
          const logins = values.map((v) => lower(v.replace(/^app\/(.+)$/i, '$1[bot]')));
          test = (i) => logins.includes(lower(i.user.login));
          break;
        }
        case 'repo': {
          const repos = values.map((v) => {
            const [owner, name, extra] = v.split('/');
            const repo = owner && name && extra === undefined ? s.findRepo(owner, name) : undefined;
            if (!repo || !this.canSeeRepo(req.auth, repo)) cannotSearch();
            return repo;
          });
          test = (i) => repos.includes(i.repo);
          scope = true;
          break;
        }
        case 'org':
        case 'user': {
          const owners = values.map((v) => {
            const user = s.findUser(v);
            if (!user) cannotSearch();
            return user;
          });
          test = (i) => owners.includes(i.repo.owner);
          scope = true;
          break;
        }
        default:
          return unsupported(`${term.key}:`);
      }
      if (term.negated) filters.push((i) => !test(i));
      else (scope ? scopes : filters).push(test);
    }

    const items: IssueRec[] = [];
    for (const repo of s.repos.values()) {
      for (const issue of repo.issues.values()) {
        if (!this.canSearchIssue(req.auth, issue)) continue;
        if (scopes.length > 0 && !scopes.some((t) => t(issue))) continue;
        if (filters.every((t) => t(issue))) items.push(issue);
      }
    }
    // No relevance ranking: "best match" (the default) is newest first.
    const sort = req.query.get('sort');
    const order = sort !== null && req.query.get('order') === 'asc' ? 1 : -1;
    const key = (i: IssueRec): string | number =>
      sort === 'updated' ? i.updatedAt : sort === 'comments' ? i.comments.length : i.createdAt;
    items.sort((a, b) => {
      const ka = key(a);
      const kb = key(b);
      return order * (ka < kb ? -1 : ka > kb ? 1 : a.id - b.id);
    });
    return items;
  }

  private pullOr404(req: ApiRequest, repo: RepoRec, numberText: string | undefined): IssueRec {
    const issue = repo.issues.get(Number(numberText));
    if (!issue || !issue.pull) this.fail(req, 404, 'Not Found');
    return issue;
  }

  private openPullFor(repo: RepoRec, headRef: string, baseRef: string): IssueRec | undefined {
    for (const i of repo.issues.values()) {
      if (i.pull && i.state === 'open' && i.pull.headRef === headRef && i.pull.baseRef === baseRef) return i;
    }
    return undefined;
  }

  private filterPulls(req: ApiRequest, repo: RepoRec): IssueRec[] {
    const state = req.query.get('state') ?? 'open';
    const head = req.query.get('head');
    const base = req.query.get('base');
    let headOwner: string | null = null;
    let headRef: string | null = null;
    if (head) {
      const colon = head.indexOf(':');
      headOwner = colon >= 0 ? head.slice(0, colon) : repo.owner.login;
      headRef = colon >= 0 ? head.slice(colon + 1) : head;
    }
    const items = [...repo.issues.values()].filter((i) => {
      if (!i.pull) return false;
      if (state !== 'all' && i.state !== state) return false;
      if (headOwner !== null && headOwner.toLowerCase() !== repo.owner.login.toLowerCase()) return false;
      if (headRef !== null && headRef !== '' && i.pull.headRef !== headRef) return false;
      if (base && i.pull.baseRef !== base) return false;
      return true;
    });
    const sort = req.query.get('sort') ?? 'created';
    const direction = req.query.get('direction') ?? (sort === 'created' ? 'desc' : 'desc');
    const key = (i: IssueRec): string => (sort === 'updated' ? i.updatedAt : `${i.createdAt}#${String(i.number).padStart(9, '0')}`);
    items.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    if (direction === 'desc') items.reverse();
    return items;
  }

  private createPull(req: ApiRequest, ctx: RepoCtx): ApiResponse {
    const s = this.state;
    const repo = ctx.repo;
    const b = this.bodyRecord(req);
    const missing: unknown[] = [];
    if (typeof b.title !== 'string' || b.title === '') missing.push({ resource: 'PullRequest', code: 'missing_field', field: 'title' });
    if (typeof b.head !== 'string' || b.head === '') missing.push({ resource: 'PullRequest', code: 'missing_field', field: 'head' });
    if (typeof b.base !== 'string' || b.base === '') missing.push({ resource: 'PullRequest', code: 'missing_field', field: 'base' });
    if (missing.length) this.validation(req, missing);
    const title = String(b.title);
    const headText = String(b.head);
    const baseRef = String(b.base);
    const colon = headText.indexOf(':');
    const headOwner = colon >= 0 ? headText.slice(0, colon) : repo.owner.login;
    const headRef = colon >= 0 ? headText.slice(colon + 1) : headText;
    const errors: unknown[] = [];
    if (headOwner.toLowerCase() !== repo.owner.login.toLowerCase() || !gitRepo.branchSha(repo.gitDir, headRef)) {
      errors.push({ resource: 'PullRequest', field: 'head', code: 'invalid' });
    }
    if (!gitRepo.branchSha(repo.gitDir, baseRef)) errors.push({ resource: 'PullRequest', field: 'base', code: 'invalid' });
    if (errors.length) this.validation(req, errors);
    if (this.openPullFor(repo, headRef, baseRef)) {
      this.validation(req, [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${repo.owner.login}:${headRef}.` }]);
    }
    const headSha = gitRepo.branchSha(repo.gitDir, headRef) ?? '';
    const baseSha = gitRepo.branchSha(repo.gitDir, baseRef) ?? '';
    if (headSha === baseSha || gitRepo.isAncestor(repo.gitDir, headSha, baseSha)) {
      this.validation(req, [{ resource: 'PullRequest', code: 'custom', message: `No commits between ${baseRef} and ${headRef}` }]);
    }
    const body = typeof b.body === 'string' ? b.body : null;
    if (body !== null && body.length > MAX_BODY) {
      this.validation(req, [{ resource: 'PullRequest', code: 'custom', field: 'body', message: 'body is too long (maximum is 65536 characters)' }]);
    }
    const issue = s.createIssue(repo, {
      title,
      body,
      user: this.actor(ctx),
      labels: [],
      viaApp: ctx.token !== null,
      pull: { headRef, baseRef, draft: b.draft === true, requestedReviewers: [], mergedAt: null },
    });
    const json = s.pull(issue, true);
    return { status: 201, json, headers: { location: json.url } };
  }
}
