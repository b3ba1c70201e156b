import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Queue } from 'bullmq';
import type { Logger } from '../observability/logger.ts';
import { readQueueSummary, type QueueSummary } from '../observability/metrics.ts';
import { applyEvent, type RunStore, type RunSummary } from '../observability/run-store.ts';
import { ASSETS } from './assets.ts';
import { GitHubRateLimited, GitHubUnavailable, SignInAgain, SignInRefused, WebAuth, type AccessLevel, type GitHubOAuthConfig, type Session } from './auth.ts';
import { esc, page } from './html.ts';
import { liveSections, renderRunPage, renderStep, renderTests } from './run-page.ts';
import { LIST_OUTCOMES, renderRunsList } from './runs-list.ts';

export interface RunPagesOptions {
  store: RunStore;
  /** The run queue, for the queue summary on /runs. */
  queue: Queue;
  /** Null when GITHUB_CLIENT_ID or GITHUB_CLIENT_SECRET is missing: the pages then say so. */
  oauth: GitHubOAuthConfig | null;
  publicUrl: string;
  logger: Logger;
  /** Live pages followed at once (each holds one Redis connection). */
  maxLiveStreams?: number;
  /** Live pages one GitHub user follows at once, over all their sessions (default 6). */
  maxLiveStreamsPerUser?: number;
  /** How often a live page re-checks the session and the user's access (default 60 s). */
  accessRecheckMs?: number;
  /** How long GitHub's answer about a session's access is reused (default 60 s). */
  accessTtlMs?: number;
}

export interface RunPages {
  /** Handles /runs, /runs/<id>, /runs/<id>/events, /auth/* and /assets/*; false for any other path. */
  handle(req: IncomingMessage & { rawBody?: Buffer | undefined }, res: ServerResponse): Promise<boolean>;
  close(): void;
}

const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
};

const RUN_PATH = /^\/runs\/([A-Za-z0-9._-]{1,200})(\/events)?$/;

/**
 * The run pages: server-rendered, behind sign-in with GitHub, one access rule (see auth.ts). People
 * with write (push) access to a run's repository get the full page; readers get the reader view
 * without the merged configuration, the worker host and the queue summary (the configuration can
 * come from a private organisation `.github` repository even when the repository is public).
 */
export function createRunPages(opts: RunPagesOptions): RunPages {
  const auth = opts.oauth ? new WebAuth(opts.store.redis, opts.store.opts.prefix, opts.oauth, opts.publicUrl, opts.accessTtlMs === undefined ? {} : { accessTtlMs: opts.accessTtlMs }) : null;
  const githubWeb = opts.oauth?.webOrigin ?? 'https://github.com';
  const live = new Set<AbortController>();
  const livePerUser = new Map<string, number>();
  const maxLive = opts.maxLiveStreams ?? 200;
  const maxLivePerUser = opts.maxLiveStreamsPerUser ?? 6;
  const recheckMs = opts.accessRecheckMs ?? 60_000;

  const send = (res: ServerResponse, status: number, html: string, extra: Record<string, string | string[]> = {}) => {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...SECURITY_HEADERS, ...extra }).end(html);
  };
  const notFound = (res: ServerResponse, session: Session | null) =>
    send(res, 404, page({ title: 'Not found', user: session ? { login: session.login, csrf: session.csrf } : undefined }, '<h1>Not found</h1><p>There is no such run, or your GitHub account cannot read its repository.</p>'));

  async function handle(req: IncomingMessage & { rawBody?: Buffer | undefined }, res: ServerResponse): Promise<boolean> {
    const url = new URL(req.url ?? '/', 'http://local');
    const path = url.pathname;
    // The address a maintainer opens first: the run list (or, with run pages off, what turns them on).
    if (path === '/' && (req.method === 'GET' || req.method === 'HEAD')) {
      res.writeHead(302, { location: '/runs', ...SECURITY_HEADERS }).end();
      return true;
    }
    if (!(path === '/runs' || path.startsWith('/runs/') || path.startsWith('/auth/') || path.startsWith('/assets/'))) return false;
    if (!auth) {
      send(res, 503, page({ title: 'Run pages are off' }, '<h1>Run pages are off</h1><p>Set GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET (the GitHub App\'s OAuth client, written to .env by the registration flow) and restart the web role.</p>'));
      return true;
    }
    let session: Session | null = null;
    try {
      session = await auth.session(req);
      if (req.method === 'POST') {
        await handlePost(auth, session, path, req, res);
        return true;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, POST', ...SECURITY_HEADERS }).end();
        return true;
      }
      if (path === '/auth/login') {
        auth.beginSignIn(res, url.searchParams.get('next'));
        return true;
      }
      if (path === '/auth/callback') {
        const next = await auth.completeSignIn(req, res, url.searchParams);
        res.writeHead(302, { location: next, ...SECURITY_HEADERS }).end();
        return true;
      }
      if (path === '/auth/signed-out') {
        send(res, 200, page({ title: 'Signed out' }, '<h1>Signed out</h1><p><a href="/auth/login">Sign in with GitHub</a></p>'));
        return true;
      }
      // Everything below needs a signed-in user.
      if (!session) {
        if (path.startsWith('/assets/') || path.endsWith('/events')) res.writeHead(401, SECURITY_HEADERS).end();
        else res.writeHead(302, { location: `/auth/login?next=${encodeURIComponent(path + url.search)}`, ...SECURITY_HEADERS }).end();
        return true;
      }
      const user = { login: session.login, csrf: session.csrf };
      if (path.startsWith('/assets/')) {
        const asset = ASSETS[path.slice('/assets/'.length)];
        if (!asset) notFound(res, session);
        else res.writeHead(200, { 'content-type': asset.type, 'x-content-type-options': 'nosniff', 'cache-control': 'private, max-age=3600' }).end(asset.body);
        return true;
      }
      if (path === '/runs') {
        await listPage(auth, session, url.searchParams, res, user);
        return true;
      }
      const m = RUN_PATH.exec(path);
      const runId = m?.[1];
      if (!runId) {
        notFound(res, session);
        return true;
      }
      const summary = await opts.store.summary(runId);
      // By the repository's id: a name can be reused by another repository after a rename.
      const level: AccessLevel = summary ? await auth.repoAccess(session, summary.repoId) : 'none';
      if (!summary || level === 'none') {
        notFound(res, session);
        return true;
      }
      if (m[2]) {
        await followRun(auth, session, summary.repoId, level, runId, req, res);
        return true;
      }
      const loaded = await opts.store.load(runId);
      if (!loaded) notFound(res, session);
      else send(res, 200, renderRunPage(loaded, { githubWeb, user, full: level === 'write' }));
      return true;
    } catch (err) {
      if (res.headersSent) {
        res.end();
        return true;
      }
      if (err instanceof SignInAgain) {
        if (session) await auth.endSession(session, res);
        res.writeHead(302, { location: `/auth/login?next=${encodeURIComponent(auth.nextPath(path))}`, ...SECURITY_HEADERS }).end();
        return true;
      }
      if (err instanceof GitHubRateLimited || err instanceof GitHubUnavailable) {
        // No answer about access is not "no access": say so, and let the browser come back.
        const retry = err instanceof GitHubRateLimited ? err.retryAfterSeconds : 10;
        opts.logger.warn({ err: err.message, path }, 'run pages: GitHub did not answer an access check');
        send(res, 503, page({ title: 'Try again shortly', user: session ? { login: session.login, csrf: session.csrf } : undefined }, `<h1>Access could not be checked</h1><p>${esc(err.message)}.</p><p>Nothing is wrong with your access; reload the page then.</p>`), { 'retry-after': String(retry) });
        return true;
      }
      if (err instanceof SignInRefused) {
        send(res, 400, page({ title: 'Sign-in failed' }, `<h1>Sign-in failed</h1><p>${esc(err.message)}</p><p><a href="/auth/login">Sign in again</a></p>`));
        return true;
      }
      opts.logger.error({ err: (err as Error).message, path }, 'run pages: request failed');
      send(res, 502, page({ title: 'Error' }, `<h1>Something went wrong</h1><p>${esc((err as Error).message)}</p>`));
      return true;
    }
  }

  async function handlePost(a: WebAuth, session: Session | null, path: string, req: IncomingMessage & { rawBody?: Buffer | undefined }, res: ServerResponse): Promise<void> {
    const form = new URLSearchParams(req.rawBody?.toString('utf8') ?? '');
    const origin = req.headers.origin;
    const sameOrigin = origin === undefined || origin === new URL(opts.publicUrl).origin;
    if (!session || !sameOrigin || !a.csrfValid(session, form.get('csrf') ?? undefined)) {
      send(res, 403, page({ title: 'Refused' }, '<h1>Refused</h1><p>The form was not sent from this page of your session (CSRF check). Reload the page and try again.</p>'));
      return;
    }
    if (path === '/auth/logout') {
      await a.endSession(session, res);
      res.writeHead(303, { location: '/auth/signed-out', ...SECURITY_HEADERS }).end();
      return;
    }
    notFound(res, session);
  }

  async function listPage(a: WebAuth, session: Session, query: URLSearchParams, res: ServerResponse, user: { login: string; csrf: string }): Promise<void> {
    const [all, access] = await Promise.all([opts.store.list(500), a.viewerRepos(session)]);
    // The queue counts every repository's jobs: only for people who can write to one of them.
    const writer = [...access.repos.values()].some((r) => r.write);
    const queue = writer ? await readQueueSummary(opts.queue).catch((): QueueSummary | null => null) : 'hidden';
    const visible = all.filter((r) => access.repos.has(r.repoId));
    const repoFilter = query.get('repo') ?? '';
    const outcomeFilter = (LIST_OUTCOMES as readonly string[]).includes(query.get('outcome') ?? '') ? query.get('outcome')! : '';
    const outcomeOf = (r: RunSummary) => r.outcome ?? (r.finishedAt === null ? 'running' : 'unknown');
    const runs = visible
      .filter((r) => !repoFilter || `${r.owner}/${r.repo}` === repoFilter)
      .filter((r) => !outcomeFilter || outcomeOf(r) === outcomeFilter)
      .slice(0, 200);
    const repos = [...new Set(visible.map((r) => `${r.owner}/${r.repo}`))].sort();
    send(res, 200, renderRunsList({ runs, repos, filter: { repo: repoFilter, outcome: outcomeFilter }, queue, notices: access.problems, githubWeb, user }));
  }

  /** Server-sent events for a live run: each event re-renders what it changed, on the server. */
  async function followRun(a: WebAuth, session: Session, repoId: number, level: AccessLevel, runId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const loaded = await opts.store.load(runId);
    if (!loaded) {
      res.writeHead(404, SECURITY_HEADERS).end();
      return;
    }
    if (live.size >= maxLive) {
      res.writeHead(503, { 'retry-after': '30', ...SECURITY_HEADERS }).end();
      return;
    }
    // Per GitHub user (all their sessions): one account cannot take every stream.
    const userKey = session.login.toLowerCase();
    if ((livePerUser.get(userKey) ?? 0) >= maxLivePerUser) {
      res.writeHead(429, { 'retry-after': '30', ...SECURITY_HEADERS }).end();
      return;
    }
    let full = level === 'write';
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream; charset=utf-8', 'x-accel-buffering': 'no', connection: 'keep-alive' });
    // Browsers reconnect with Last-Event-ID; the page names the point its HTML was rendered at.
    const after = String(req.headers['last-event-id'] ?? new URL(req.url ?? '/', 'http://local').searchParams.get('after') ?? '0');
    const event = (name: string, data: unknown, id?: string) => res.write(`${id ? `id: ${id}\n` : ''}event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
    if (!loaded.live) {
      event('done', {});
      res.end();
      return;
    }
    const view = loaded.view;
    if (after !== loaded.lastEventId) event('update', { timeline: view.steps.map(renderStep).join(''), sections: liveSections(view, full) }, loaded.lastEventId);
    const ctl = new AbortController();
    live.add(ctl);
    livePerUser.set(userKey, (livePerUser.get(userKey) ?? 0) + 1);
    const stop = () => ctl.abort();
    req.on('close', stop);
    res.on('close', stop);
    // A stream can outlive the access it was opened with: re-check the session (signed out,
    // expired) and GitHub's answer for the repository, and end the stream when either is gone.
    // No answer from GitHub (rate limit, 5xx) keeps the stream: it is not a denial.
    let checking = false;
    const recheck = setInterval(() => {
      if (checking || ctl.signal.aborted) return;
      checking = true;
      void (async () => {
        const current = await a.session(req);
        if (!current || current.id !== session.id) return 'ended';
        const now = await a.repoAccess(session, repoId);
        if (now === 'none') return 'ended';
        full = now === 'write';
        return 'ok';
      })()
        .catch((err: unknown) => (err instanceof SignInAgain ? 'ended' : 'ok'))
        .then((verdict) => {
          if (verdict === 'ended' && !ctl.signal.aborted) {
            event('denied', {});
            ctl.abort();
          }
        })
        .finally(() => (checking = false));
    }, recheckMs);
    recheck.unref();
    try {
      for await (const item of opts.store.follow(runId, loaded.lastEventId, ctl.signal)) {
        if (ctl.signal.aborted) break;
        if (item === null) {
          res.write(': still running\n\n');
          continue;
        }
        const e = item.event;
        if (e.t === 'done') {
          event('done', {}, item.id);
          break;
        }
        applyEvent(view, e);
        if (e.t === 'step') {
          const s = view.summary;
          s.steps = Math.max(s.steps, e.record.step);
          s.promptTokens += e.record.usage?.prompt_tokens ?? 0;
          s.completionTokens += e.record.usage?.completion_tokens ?? 0;
          s.cachedTokens += e.record.usage?.cached_tokens ?? 0;
          event('update', { append: renderStep(e.record), sections: liveSections(view, full) }, item.id);
        } else {
          event('update', { sections: e.t === 'tests' ? { tests: renderTests(view) } : liveSections(view, full) }, item.id);
        }
      }
    } finally {
      clearInterval(recheck);
      live.delete(ctl);
      const left = (livePerUser.get(userKey) ?? 1) - 1;
      if (left > 0) livePerUser.set(userKey, left);
      else livePerUser.delete(userKey);
      req.off('close', stop);
      res.end();
    }
  }

  return {
    handle,
    close() {
      for (const ctl of live) ctl.abort();
    },
  };
}
