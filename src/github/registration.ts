import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { updateDotEnv } from '../config/dotenv.ts';
import type { Env } from '../config/env.ts';
import type { Logger } from '../observability/logger.ts';
import { escapeHtml } from '../shared/escape-html.ts';
import { githubEndpoints } from './app-auth.ts';
import type { GuardedRequest } from './webhook-limits.ts';

/**
 * Registering Lilypad as a GitHub App with GitHub's manifest flow, on a first start without
 * credentials: a page posts the manifest (built from app.yml and LILYPAD_PUBLIC_URL) to GitHub,
 * GitHub creates the app and sends the browser back with a one-time code, and Lilypad exchanges
 * the code (`POST /app-manifests/{code}/conversions`) for the app's id, private key, webhook
 * secret and OAuth client. Those are written to `.env` and handed to the caller, which goes on as
 * the registered app without a restart.
 *
 * Until then these pages are served at the public address, so only the operator may use them:
 * the page and its callback need a one-time setup token that Lilypad prints to its own log at
 * start (as the link `<public url>/setup?token=...`); opening the link sets an HttpOnly cookie
 * scoped to /setup that the callback must bring back. With GH_ORG set, an app GitHub created for
 * any other owner is refused. A refusal writes nothing, logs a line and tells the browser why.
 */
export const WEBHOOK_PATH = '/api/github/webhooks';
export const SETUP_PATH = '/setup';
const CALLBACK_PATH = '/setup/callback';
const INSTALLED_PATH = '/setup/installed';
const APP_YML = new URL('../../app.yml', import.meta.url);

export interface RegisteredApp {
  appId: number;
  slug: string;
  /** The account GitHub created the app for (an organisation or a user), when it says. */
  owner: string | null;
  privateKey: string;
  webhookSecret: string;
  clientId: string;
  clientSecret: string;
  htmlUrl: string;
}

const appYmlSchema = z.object({
  name: z.string().min(1),
  description: z.string().optional(),
  url: z.string().optional(),
  public: z.boolean().optional(),
  default_events: z.array(z.string()),
  default_permissions: z.record(z.string(), z.enum(['read', 'write'])),
});

const conversionSchema = z.object({
  id: z.number().int().positive(),
  owner: z.object({ login: z.string().min(1) }).nullish(),
  slug: z.string().min(1),
  pem: z.string().includes('PRIVATE KEY'),
  webhook_secret: z.string().min(1),
  client_id: z.string().min(1),
  client_secret: z.string().min(1),
  html_url: z.string().url(),
});

type RegistrationEnv = Pick<Env, 'LILYPAD_PUBLIC_URL' | 'HOST' | 'PORT' | 'GHE_HOST' | 'GHE_PROTOCOL'> & { GH_ORG?: string | undefined };

/** Where GitHub sends webhooks and people open the pages: LILYPAD_PUBLIC_URL, else this process. */
export function registrationBaseUrl(env: RegistrationEnv): string {
  return env.LILYPAD_PUBLIC_URL ?? `http://${env.HOST ?? 'localhost'}:${env.PORT}`;
}

/** True when GitHub (another machine) cannot reach the address: loopback or unspecified. */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host.endsWith('.localhost') || /^127\./.test(host) || host === '::1' || host === '0.0.0.0' || host === '::';
}

/**
 * What to do when the address GitHub would send webhooks to is loopback, or null when it is not.
 * It says whether LILYPAD_PUBLIC_URL is unset or set to a loopback address: "set it" to someone who
 * has set it reads as if the setting were not read.
 */
export function unreachableAddressAdvice(env: RegistrationEnv): string | null {
  const found = unreachableAddress(env);
  return found ? `${found.problem}: ${found.fix}` : null;
}

/** unreachableAddressAdvice in two parts: what is wrong, and what to do (the setup page and doctor show them apart). */
export function unreachableAddress(env: RegistrationEnv): { problem: string; fix: string } | null {
  const base = registrationBaseUrl(env);
  if (!isLoopbackUrl(base)) return null;
  const where = `an address GitHub can reach (a reverse proxy or a tunnel to port ${env.PORT})`;
  const setting = env.LILYPAD_PUBLIC_URL
    ? `LILYPAD_PUBLIC_URL is set to a loopback address: change it to ${where}`
    : `LILYPAD_PUBLIC_URL is not set, so Lilypad offers its own address: set LILYPAD_PUBLIC_URL to ${where}`;
  return {
    problem: `GitHub cannot reach ${base}`,
    fix: `${setting} and restart before registering, so that webhooks arrive (only a GitHub Enterprise Server on this same machine can reach a loopback address)`,
  };
}

/** The app manifest GitHub's "create app" form receives: app.yml's name, events and permissions, URLs under the public URL. */
export function buildManifest(env: RegistrationEnv, appYml: string = readFileSync(APP_YML, 'utf8')): Record<string, unknown> {
  const parsed = appYmlSchema.safeParse(parseYaml(appYml));
  if (!parsed.success) throw new Error(`app.yml is not a valid app manifest: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const base = registrationBaseUrl(env);
  const yml = parsed.data;
  return {
    name: yml.name,
    ...(yml.description ? { description: yml.description } : {}),
    url: yml.url ?? base,
    public: yml.public ?? false,
    hook_attributes: { url: `${base}${WEBHOOK_PATH}`, active: true },
    redirect_url: `${base}${CALLBACK_PATH}`,
    setup_url: `${base}${INSTALLED_PATH}`,
    callback_urls: [`${base}/auth/callback`],
    request_oauth_on_install: false,
    default_events: yml.default_events,
    default_permissions: yml.default_permissions,
  };
}

function webOrigin(env: RegistrationEnv): string {
  return env.GHE_HOST ? `${env.GHE_PROTOCOL}://${env.GHE_HOST}` : 'https://github.com';
}

/** GitHub's "register a GitHub App" form: the organisation's when GH_ORG is set, else the signed-in user's. */
export function createAppUrl(env: RegistrationEnv, state: string): string {
  const owner = env.GH_ORG ? `/organizations/${encodeURIComponent(env.GH_ORG)}` : '';
  return `${webOrigin(env)}${owner}/settings/apps/new?state=${encodeURIComponent(state)}`;
}

function page(res: ServerResponse, status: number, title: string, body: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'x-frame-options': 'DENY' });
  res.end(`<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem}code{background:#f3f3f3;padding:0 .2em}.warn{border-left:4px solid #d29922;padding:.5rem 1rem;background:#fff8e5}button{font-size:1rem;padding:.5rem 1rem}</style>
</head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`);
}

const INSTALLED_BODY = '<p>Label an issue <code>lilypad</code> (or comment <code>/lilypad</code>) in a repository you installed it on; a draft pull request follows.</p>';

/**
 * The setup addresses once the app exists. GitHub sends the browser to the manifest's setup_url
 * (/setup/installed) after every installation, and installing comes after registering, so the
 * running app must answer it; /setup and its callback, opened again, say the app exists instead of
 * a bare 404. Returns false for every other request.
 */
export function answerRegisteredSetupPages(req: GuardedRequest, res: ServerResponse, appId: number): boolean {
  if (req.method !== 'GET') return false;
  const pathname = new URL(req.url ?? '/', 'http://lilypad.invalid').pathname;
  if (pathname === INSTALLED_PATH) {
    page(res, 200, 'Lilypad is installed', INSTALLED_BODY);
    return true;
  }
  if (pathname !== SETUP_PATH && pathname !== CALLBACK_PATH) return false;
  page(
    res,
    200,
    'Lilypad is already registered',
    `<p>This Lilypad runs as the GitHub App with id ${appId} (<code>APP_ID</code>); install it on more organisations or repositories from the app's page on GitHub. To register a new app instead, remove <code>APP_ID</code>, <code>PRIVATE_KEY</code>, <code>WEBHOOK_SECRET</code>, <code>GITHUB_CLIENT_ID</code> and <code>GITHUB_CLIENT_SECRET</code> from <code>.env</code> and restart Lilypad.</p>`,
  );
  return true;
}

export interface RegistrationServer {
  /** Answers every request while Lilypad has no credentials. */
  handle(req: GuardedRequest, res: ServerResponse): Promise<void>;
  /** Settles once GitHub's conversion succeeded and `.env` holds the credentials. */
  registered: Promise<RegisteredApp>;
  /** The one-time link to print at start: `<public url>/setup?token=...`. */
  setupLink: string;
}

export interface RegistrationOptions {
  env: RegistrationEnv;
  /** The `.env` file the credentials are written to. */
  envFile: string;
  logger: Logger;
  /** For tests: the HTTP client used for the conversion. */
  fetch?: typeof fetch;
  /** For tests: the setup token (by default 32 random bytes, new on every start). */
  setupToken?: string;
}

const SETUP_COOKIE = 'lilypad_setup';

/** The value of the setup cookie in a Cookie header, or null. */
function setupCookie(header: string | undefined): string | null {
  for (const part of (header ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === SETUP_COOKIE) return value.join('=');
  }
  return null;
}

/** Constant-time comparison of a presented token with the real one. */
function sameToken(given: string | null, token: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The pages and callback of the manifest flow, plus a clear refusal of webhooks until it is done. */
export function createRegistration(opts: RegistrationOptions): RegistrationServer {
  const { env, logger } = opts;
  const state = randomBytes(16).toString('hex');
  const token = opts.setupToken ?? randomBytes(32).toString('hex');
  const doFetch = opts.fetch ?? fetch;
  let done: RegisteredApp | null = null;
  let converting = false;
  let resolve!: (app: RegisteredApp) => void;
  const registered = new Promise<RegisteredApp>((r) => (resolve = r));
  const base = registrationBaseUrl(env);
  const unreachable = unreachableAddress(env);
  const setupLink = `${base}${SETUP_PATH}?token=${token}`;
  const secureCookie = new URL(base).protocol === 'https:' ? '; Secure' : '';

  async function convert(code: string): Promise<RegisteredApp> {
    const url = `${githubEndpoints(env).apiUrl}/app-manifests/${encodeURIComponent(code)}/conversions`;
    const res = await doFetch(url, { method: 'POST', headers: { accept: 'application/vnd.github+json', 'user-agent': 'lilypad' }, signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    if (!res.ok) throw new Error(`GitHub answered ${res.status} to the manifest conversion (${text.slice(0, 200)}); the code is valid for one hour and one use: start again from ${base}${SETUP_PATH}`);
    const parsed = conversionSchema.safeParse(JSON.parse(text));
    if (!parsed.success) throw new Error(`GitHub's manifest conversion answer is missing fields: ${parsed.error.issues.map((i) => i.path.join('.')).join(', ')}`);
    const d = parsed.data;
    return { appId: d.id, slug: d.slug, owner: d.owner?.login ?? null, privateKey: d.pem, webhookSecret: d.webhook_secret, clientId: d.client_id, clientSecret: d.client_secret, htmlUrl: d.html_url };
  }

  /** The app GitHub created is not the organisation's (GH_ORG): nothing is saved. */
  function refuseOwner(res: ServerResponse, app: RegisteredApp, org: string): void {
    const owner = app.owner ?? 'an owner GitHub did not name';
    logger.warn({ appId: app.appId, slug: app.slug, owner: app.owner, org }, `registration refused: GitHub created the app for ${owner}, not for GH_ORG ${org}; nothing was saved. Delete it at ${app.htmlUrl} and register again from the setup link`);
    page(
      res,
      403,
      'Registration refused',
      `<p>GitHub created the app <code>${escapeHtml(app.slug)}</code> owned by ${escapeHtml(owner)}, but this Lilypad registers only an app owned by ${escapeHtml(org)} (<code>GH_ORG</code>); nothing was saved. Delete that app in <a href="${escapeHtml(app.htmlUrl)}">its settings</a>, then register again from the setup link Lilypad printed to its log.</p>`,
    );
  }

  /** Refuses a request that does not carry the setup token; the refusal is logged. */
  function refuseWithoutToken(req: GuardedRequest, res: ServerResponse, callback: boolean): void {
    if (callback) {
      logger.warn({ path: CALLBACK_PATH }, 'registration callback refused: the browser has no valid setup cookie (it did not open the setup link Lilypad printed at start); nothing was saved');
      return page(
        res,
        403,
        'Registration refused',
        `<p>This browser did not open the setup link Lilypad printed to its log, so the registration was refused and nothing was saved: open that link (<code>${escapeHtml(base)}${SETUP_PATH}?token=…</code>, printed when Lilypad started) in this browser and register again.</p>`,
      );
    }
    logger.warn({ path: SETUP_PATH, withToken: new URL(req.url ?? '/', 'http://lilypad.invalid').searchParams.has('token') }, 'setup page refused: no valid setup token; the setup link is in the log line "no GitHub App credentials: open ..." printed at start');
    page(
      res,
      403,
      'Setup link needed',
      `<p>Registering this Lilypad needs the one-time setup link Lilypad printed to its terminal (its log) when it started: open <code>${escapeHtml(base)}${SETUP_PATH}?token=…</code> from there.</p>`,
    );
  }

  async function onCallback(req: GuardedRequest, res: ServerResponse, query: URLSearchParams): Promise<void> {
    if (done) return page(res, 409, 'Lilypad is already registered', `<p>This Lilypad is registered as <code>${escapeHtml(done.slug)}</code>. <a href="${escapeHtml(done.htmlUrl)}/installations/new">Install it</a>.</p>`);
    const code = query.get('code') ?? '';
    if (query.get('state') !== state || !/^[A-Za-z0-9_-]{1,200}$/.test(code)) {
      logger.warn({ path: req.url?.split('?')[0] }, 'registration callback with a missing or wrong state or code; ignored');
      return page(res, 400, 'Registration link expired', `<p>This link does not belong to the registration this Lilypad started. <a href="${SETUP_PATH}">Start again</a>.</p>`);
    }
    if (converting) return page(res, 409, 'Registration in progress', '<p>The app is being created; reload in a moment.</p>');
    converting = true;
    try {
      const app = await convert(code);
      if (env.GH_ORG && app.owner?.toLowerCase() !== env.GH_ORG.toLowerCase()) return refuseOwner(res, app, env.GH_ORG);
      updateDotEnv(opts.envFile, {
        APP_ID: String(app.appId),
        PRIVATE_KEY: app.privateKey,
        WEBHOOK_SECRET: app.webhookSecret,
        GITHUB_CLIENT_ID: app.clientId,
        GITHUB_CLIENT_SECRET: app.clientSecret,
      });
      done = app;
      logger.info({ appId: app.appId, slug: app.slug, envFile: opts.envFile }, `registered the GitHub App "${app.slug}"; its credentials are in ${opts.envFile}. Install it: ${app.htmlUrl}/installations/new`);
      page(
        res,
        200,
        'Lilypad is registered',
        `<p>GitHub created the app <code>${escapeHtml(app.slug)}</code> (id ${app.appId}); its credentials are saved in <code>${escapeHtml(opts.envFile)}</code> (keep that file private). Lilypad now runs as this app: no restart is needed.</p>
<p><a href="${escapeHtml(app.htmlUrl)}/installations/new"><b>Install it on your organisation</b></a>, then label an issue <code>lilypad</code>.</p>`,
      );
      resolve(app);
    } catch (err) {
      logger.error({ err: (err as Error).message }, 'registration failed');
      page(res, 502, 'Registration failed', `<p>${escapeHtml((err as Error).message)}</p><p><a href="${SETUP_PATH}">Start again</a>.</p>`);
    } finally {
      converting = false;
    }
  }

  /**
   * /setup: with the token in the link, the page, and a cookie that carries the token to the
   * callback (HttpOnly, SameSite=Lax: GitHub's redirect back is a top-level GET); with that cookie
   * (a reload), the page again; otherwise 403.
   */
  function onSetup(req: GuardedRequest, res: ServerResponse, query: URLSearchParams): void {
    if (sameToken(query.get('token'), token)) {
      res.setHeader('set-cookie', `${SETUP_COOKIE}=${token}; HttpOnly; SameSite=Lax; Path=${SETUP_PATH}${secureCookie}`);
      return setupPage(res);
    }
    if (!query.has('token') && sameToken(setupCookie(req.headers.cookie), token)) return setupPage(res);
    refuseWithoutToken(req, res, false);
  }

  function setupPage(res: ServerResponse): void {
    const built = buildManifest(env);
    const manifest = JSON.stringify(built);
    // The permissions as app.yml asks for them, so the page never drifts from what GitHub is sent.
    const permissions = Object.entries(built['default_permissions'] as Record<string, string>)
      .map(([name, level]) => `<code>${escapeHtml(name)}: ${escapeHtml(level)}</code>`)
      .join(', ');
    const warning = unreachable
      ? `<p class="warn"><b>GitHub cannot reach ${escapeHtml(base)}.</b> GitHub will send webhooks to <code>${escapeHtml(base)}${WEBHOOK_PATH}</code>, a loopback address. ${escapeHtml(unreachable.fix)}; or register now and change the webhook URL in the app's settings later.</p>`
      : '';
    // The page's address holds the token: no Referer to GitHub (the form posts there).
    res.setHeader('referrer-policy', 'no-referrer');
    const only = `<p>Only a browser that opened the one-time setup link Lilypad printed to its log at start can finish this registration${env.GH_ORG ? `, and only for an app owned by ${escapeHtml(env.GH_ORG)}` : ''}.</p>`;
    page(
      res,
      200,
      'Register Lilypad as a GitHub App',
      `<p>This creates a GitHub App named from <code>app.yml</code> with the permissions Lilypad needs (${permissions}; never <code>workflows</code>). Webhooks go to <code>${escapeHtml(base)}${WEBHOOK_PATH}</code>; sign-in to the run pages returns to <code>${escapeHtml(base)}/auth/callback</code>.</p>
${warning}
${only}
<form action="${escapeHtml(createAppUrl(env, state))}" method="post"><input type="hidden" name="manifest" value="${escapeHtml(manifest)}"><button type="submit">Register on ${escapeHtml(webOrigin(env))}${env.GH_ORG ? ` for ${escapeHtml(env.GH_ORG)}` : ''}</button></form>`,
    );
  }

  return {
    registered,
    setupLink,
    async handle(req, res) {
      const url = new URL(req.url ?? '/', 'http://lilypad.invalid');
      if (url.pathname === WEBHOOK_PATH) {
        // A delivery before the app exists cannot be verified (there is no secret yet): refuse it
        // loudly instead of accepting and dropping it.
        logger.warn({ delivery: req.headers['x-github-delivery'], event: req.headers['x-github-event'] }, `webhook refused with 503: Lilypad has no GitHub App credentials yet; register it at ${base}${SETUP_PATH}`);
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '60' });
        res.end(JSON.stringify({ message: `Lilypad is not registered yet: open ${base}${SETUP_PATH} to register it, or set APP_ID, PRIVATE_KEY and WEBHOOK_SECRET` }));
        return;
      }
      if (req.method === 'GET' && url.pathname === '/ping') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('PONG');
        return;
      }
      if (req.method !== 'GET') {
        res.writeHead(405, { allow: 'GET' }).end();
        return;
      }
      if (url.pathname === '/' || url.pathname === '/probot') {
        res.writeHead(302, { location: SETUP_PATH }).end();
        return;
      }
      if (url.pathname === SETUP_PATH) return onSetup(req, res, url.searchParams);
      if (url.pathname === CALLBACK_PATH) {
        if (!done && !sameToken(setupCookie(req.headers.cookie), token)) return refuseWithoutToken(req, res, true);
        return onCallback(req, res, url.searchParams);
      }
      if (url.pathname === INSTALLED_PATH) {
        return page(res, 200, 'Lilypad is installed', INSTALLED_BODY);
      }
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`Not found. Lilypad is not registered yet: open ${SETUP_PATH}.\n`);
    },
  };
}
