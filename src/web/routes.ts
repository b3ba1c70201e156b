import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Queue } from 'bullmq';
import type { Logger } from '../observability/logger.ts';
import { readQueueSummary, type QueueSummary } from '../observability/metrics.ts';
import { applyEvent, type RunStore, type RunSummary } from '../observability/run-store.ts';
import { ASSETS } from './assets.ts';
import { localPath, SignInAgain, SignInRefused, WebAuth, type GitHubOAuthConfig, type Session } from './auth.ts';
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

/** The run pages: server-rendered, behind sign-in with GitHub, one access rule (see auth.ts). */
export function createRunPages(opts: RunPagesOptions): RunPages {
  const auth = opts.oauth ? new WebAuth(opts.store.redis, opts.store.opts.prefix, opts.oauth, opts.publicUrl) : null;
  const githubWeb = opts.oauth?.webOrigin ?? 'https://github.com';
  const live = new Set<AbortController>();
  const maxLive = opts.maxLiveStreams ?? 200;

  const send = (res: ServerResponse, status: number, html: string, extra: Record<string, string | string[]> = {}) => {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...SECURITY_HEADERS, ...extra }).end(html);
  };
  const notFound = (res: ServerResponse, session: Session | null) =>
    send(res, 404, page({ title: 'Not found', user: session ? { login: session.login, csrf: session.csrf } : undefined }, '<h1>Not found</h1><p>There is no such run, or your GitHub account cannot read its repository.</p>'));

  async function handle(req: IncomingMessage & { rawBody?: Buffer | undefined }, res: ServerResponse): Promise<boolean> {
    const url = new URL(req.url ?? '/', 'http://local');
    const path = url.pathname;
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
        auth.beginSignIn(res, localPath(url.searchParams.get('next')));
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
      if (!summary || !(await auth.canRead(session, summary.owner, summary.repo))) {
        notFound(res, session);
        return true;
      }
      if (m[2]) {
        await followRun(runId, req, res);
        return true;
      }
      const loaded = await opts.store.load(runId);
      if (!loaded) notFound(res, session);
      else send(res, 200, renderRunPage(loaded, { githubWeb, user }));
      return true;
    } catch (err) {
      if (res.headersSent) {
        res.end();
        return true;
      }
      if (err instanceof SignInAgain) {
        if (session) await auth.endSession(session, res);
        res.writeHead(302, { location: `/auth/login?next=${encodeURIComponent(localPath(path))}`, ...SECURITY_HEADERS }).end();
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
    const [all, queue] = await Promise.all([opts.store.list(500), readQueueSummary(opts.queue).catch((): QueueSummary | null => null)]);
    const repos = [...new Set(all.map((r) => `${r.owner}/${r.repo}`))];
    const readable = new Set<string>();
    await Promise.all(
      repos.map(async (full) => {
        const [owner, repo] = full.split('/') as [string, string];
        if (await a.canRead(session, owner, repo)) readable.add(full);
      }),
    );
    const repoFilter = query.get('repo') ?? '';
    const outcomeFilter = (LIST_OUTCOMES as readonly string[]).includes(query.get('outcome') ?? '') ? query.get('outcome')! : '';
    const outcomeOf = (r: RunSummary) => r.outcome ?? (r.finishedAt === null ? 'running' : 'unknown');
    const runs = all
      .filter((r) => readable.has(`${r.owner}/${r.repo}`))
      .filter((r) => !repoFilter || `${r.owner}/${r.repo}` === repoFilter)
      .filter((r) => !outcomeFilter || outcomeOf(r) === outcomeFilter)
      .slice(0, 200);
    send(res, 200, renderRunsList({ runs, repos: [...readable].sort(), filter: { repo: repoFilter, outcome: outcomeFilter }, queue, githubWeb, user }));
  }

  /** Server-sent events for a live run: each event re-renders what it changed, on the server. */
  async function followRun(runId: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const loaded = await opts.store.load(runId);
    if (!loaded) {
      res.writeHead(404, SECURITY_HEADERS).end();
      return;
    }
    if (live.size >= maxLive) {
      res.writeHead(503, { 'retry-after': '30', ...SECURITY_HEADERS }).end();
      return;
    }
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
    if (after !== loaded.lastEventId) event('update', { timeline: view.steps.map(renderStep).join(''), sections: liveSections(view) }, loaded.lastEventId);
    const ctl = new AbortController();
    live.add(ctl);
    const stop = () => ctl.abort();
    req.on('close', stop);
    res.on('close', stop);
    try {
      for await (const item of opts.store.follow(runId, loaded.lastEventId, ctl.signal)) {
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
          event('update', { append: renderStep(e.record), sections: liveSections(view) }, item.id);
        } else {
          event('update', { sections: e.t === 'tests' ? { tests: renderTests(view) } : liveSections(view) }, item.id);
        }
      }
    } finally {
      live.delete(ctl);
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
