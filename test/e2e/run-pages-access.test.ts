import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/observability/logger.ts';
import { RunStore } from '../../src/observability/run-store.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { createRunPages, type RunPages } from '../../src/web/routes.ts';
import { startGitHubStandin, type GitHubStandin } from '../support/github-standin/index.ts';
import { standinOAuthClient } from '../support/github-standin/oauth.ts';
import { buildUserMessage, SYSTEM_PROMPT } from '../../src/agent/prompt.ts';

/**
 * Who sees what on the run pages, over real HTTP: the real page handler (src/web/routes.ts) on a
 * local server, real Redis, sign-in through the GitHub stand-in's OAuth flow driven by fetch (the
 * cookies handled as a browser would). A recording proxy in front of the stand-in's API counts the
 * calls made with the users' tokens; faults are injected in the stand-in (failApiRequests).
 */

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const prefix = `lilypad-access-${process.pid}-${Date.now().toString(36)}`;
const logger = createLogger({ level: 'silent' });

interface Pages {
  url: string;
  origin: string;
  pages: RunPages;
  server: Server;
}

/** One browser's cookie jar (names and values only: enough for one origin). */
class Jar {
  readonly cookies = new Map<string, string>();
  take(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      if (/;\s*max-age=0(;|$)/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

describe('run pages: access, redirects, rate limits, live streams, cookies', () => {
  let gh: GitHubStandin;
  let redis: Redis;
  let store: RunStore;
  let queue: Queue;
  let queueConnection: Redis;
  let proxy: Server;
  let proxyUrl: string;
  const calls: Array<{ path: string; status: number }> = [];
  const instances: Pages[] = [];
  let web: Pages;
  const ids: Record<string, number> = {};
  const scanner = new SecretScanner([]);

  async function startPages(opts: { publicUrl?: (port: number) => string; extra?: Record<string, unknown> } = {}): Promise<Pages> {
    const oauth = standinOAuthClient(gh);
    let pages: RunPages | null = null;
    const server = createServer((plain: IncomingMessage, res: ServerResponse) => {
      const req = plain as IncomingMessage & { rawBody?: Buffer };
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        req.rawBody = Buffer.concat(chunks);
        void pages!.handle(req, res).then((handled) => {
          if (!handled) res.writeHead(404).end();
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const url = `http://127.0.0.1:${port}`;
    const publicUrl = opts.publicUrl ? opts.publicUrl(port) : url;
    pages = createRunPages({
      store,
      queue,
      oauth: { clientId: oauth.clientId, clientSecret: oauth.clientSecret, webOrigin: gh.origin, apiUrl: `${proxyUrl}/api/v3` },
      publicUrl,
      logger,
      ...opts.extra,
    });
    const p = { url, origin: new URL(publicUrl).origin, pages, server };
    instances.push(p);
    return p;
  }

  /** The OAuth dance as a browser does it; resolves to the cookie jar and where the callback sent the user. */
  async function signIn(p: Pages, login: string, next = '/runs'): Promise<{ jar: Jar; location: string }> {
    const jar = new Jar();
    const begin = await fetch(`${p.url}/auth/login?next=${encodeURIComponent(next)}`, { redirect: 'manual' });
    assert.equal(begin.status, 302);
    jar.take(begin);
    const authorize = new URL(begin.headers.get('location')!);
    const form = new URLSearchParams({ client_id: authorize.searchParams.get('client_id')!, redirect_uri: authorize.searchParams.get('redirect_uri')!, state: authorize.searchParams.get('state')!, login });
    const granted = await fetch(`${gh.origin}/login/oauth/authorize`, { method: 'POST', body: form, redirect: 'manual' });
    assert.equal(granted.status, 302);
    const callback = new URL(granted.headers.get('location')!);
    const done = await fetch(`${p.url}${callback.pathname}${callback.search}`, { headers: { cookie: jar.header() }, redirect: 'manual' });
    assert.equal(done.status, 302, `the callback answered ${done.status}: ${await done.text()}`);
    jar.take(done);
    return { jar, location: done.headers.get('location')! };
  }

  const get = (p: Pages, jar: Jar, path: string, init: RequestInit = {}) => fetch(`${p.url}${path}`, { ...init, headers: { cookie: jar.header(), ...(init.headers ?? {}) }, redirect: 'manual' });

  async function recordRun(runId: string, owner: string, repo: string, repoId: number, o: { live?: boolean; workerId?: string; config?: Record<string, unknown> } = {}): Promise<void> {
    const r = store.recorder({ runId, jobId: `run-${repoId}-1`, owner, repo, repoId, issueNumber: 1, triggeredBy: 'alice', attempt: 1, workerId: o.workerId ?? 'worker-a' }, scanner);
    r.task({ system: SYSTEM_PROMPT, user: buildUserMessage('Fix it', 'Please.') });
    r.config(o.config ?? { model: 'frognano' });
    if (o.live) await r.flush();
    else await r.finish({ outcome: 'no_change', why: 'nothing to do' });
  }

  const callsTo = (re: RegExp) => calls.filter((c) => re.test(c.path)).length;

  before(async () => {
    gh = await startGitHubStandin({ appSlug: 'lilypad' });
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
    store = new RunStore(redis, { prefix, retentionDays: 1, maxBytes: 4 * 1024 * 1024 });
    queueConnection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    queue = new Queue(`${prefix}-runs`, { connection: queueConnection, prefix });
    // The recording proxy: forwards everything to the stand-in, notes the path and status.
    proxy = createServer((req, res) => {
      const up = httpRequest(`${gh.origin}${req.url}`, { method: req.method, headers: req.headers }, (upRes) => {
        calls.push({ path: (req.url ?? '').replace(/^\/api\/v3/, ''), status: upRes.statusCode ?? 0 });
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      });
      up.on('error', () => res.writeHead(502).end());
      req.pipe(up);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;

    ids['acme-installation'] = gh.createInstallation({ login: 'acme', type: 'Organization' }).id;
    ids['beta-installation'] = gh.createInstallation({ login: 'beta', type: 'Organization' }).id;
    for (const login of ['alice', 'bob', 'carol', 'dave', 'mallory']) gh.createUser(login);
    // acme/site is public: alice maintains it, carol has read, bob and mallory have no role.
    ids['site'] = gh.createRepo('acme', 'site', { private: false }).id;
    gh.addCollaborator('acme', 'site', 'alice', 'maintain');
    gh.addCollaborator('acme', 'site', 'carol', 'read');
    // acme/secret-old was acme/secret (private, alice only); the name acme/secret now belongs to a public repository.
    ids['secret-old'] = gh.createRepo('acme', 'secret-old', { private: true }).id;
    gh.addCollaborator('acme', 'secret-old', 'alice', 'admin');
    ids['secret'] = gh.createRepo('acme', 'secret', { private: false }).id;
    // acme/live: private, dave can read it.
    ids['live'] = gh.createRepo('acme', 'live', { private: true }).id;
    gh.addCollaborator('acme', 'live', 'dave', 'read');
    gh.addCollaborator('acme', 'live', 'alice', 'write');
    // beta/tool: private, alice can write.
    ids['tool'] = gh.createRepo('beta', 'tool', { private: true }).id;
    gh.addCollaborator('beta', 'tool', 'alice', 'write');

    await recordRun('run-site', 'acme', 'site', ids['site']!, { workerId: 'gpu-host-7.internal', config: { model: 'frognano', orgSecretSetting: 'from-the-private-org-dotgithub' } });
    await recordRun('run-renamed', 'acme', 'secret', ids['secret-old']!);
    await recordRun('run-tool', 'beta', 'tool', ids['tool']!);
    web = await startPages();
  });

  after(async () => {
    for (const p of instances) {
      p.pages.close();
      p.server.closeAllConnections();
      await new Promise<void>((resolve) => p.server.close(() => resolve()));
    }
    proxy?.closeAllConnections();
    await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()));
    await queue?.close();
    queueConnection?.disconnect(); // BullMQ leaves a connection it was given open
    if (redis) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
    await gh?.close();
  });

  test('the root address leads to the run list (it was an empty 404)', async () => {
    const res = await fetch(`${web.url}/`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/runs');
    const post = await fetch(`${web.url}/`, { method: 'POST', redirect: 'manual' });
    assert.equal(post.status, 404, 'only a GET is sent on');
  });

  test('after sign-in the user lands on this server only, whatever `next` says', async () => {
    const tricky = ['/\t/evil.example/x', '/%09/evil.example/x', '//evil.example/x', '/\\evil.example/x', '/\\\\evil.example', 'https://evil.example/x', 'javascript:alert(1)', '/.//evil.example/x', '/..//evil.example/x', '/\n/evil.example', ' //evil.example', '/%2F%2Fevil.example'];
    for (const next of tricky) {
      const { location } = await signIn(web, 'alice', next);
      // Browsers drop tabs and newlines from Location and read `\` as `/`; resolve as they do.
      const landed = new URL(location.replace(/[\t\n\r]/g, '').replace(/\\/g, '/'), web.origin);
      assert.equal(landed.origin, web.origin, `next=${JSON.stringify(next)} sent the user to ${JSON.stringify(location)}`);
      assert.ok(!/[\u0000-\u001f\\]/.test(location) && !location.startsWith('//'), `next=${JSON.stringify(next)}: Location ${JSON.stringify(location)} is not a clean local path`);
    }
    // A good `next` is kept (query included).
    assert.equal((await signIn(web, 'alice', '/runs/run-site?x=1')).location, '/runs/run-site?x=1');
  });

  test('a reader without write access gets the reader view: no config, no worker host, no queue summary', async () => {
    const alice = (await signIn(web, 'alice')).jar;
    const full = await (await get(web, alice, '/runs/run-site')).text();
    assert.match(full, /from-the-private-org-dotgithub/);
    assert.match(full, /gpu-host-7\.internal/);
    assert.match(await (await get(web, alice, '/runs')).text(), /id="queue"/);

    for (const login of ['carol', 'bob']) {
      const jar = (await signIn(web, login)).jar;
      const res = await get(web, jar, '/runs/run-site');
      assert.equal(res.status, 200, `${login} can read the public repository's run`);
      const html = await res.text();
      assert.doesNotMatch(html, /from-the-private-org-dotgithub|orgSecretSetting/, `${login} must not see the config`);
      assert.doesNotMatch(html, /gpu-host-7/, `${login} must not see the worker host`);
      const list = await (await get(web, jar, '/runs')).text();
      assert.doesNotMatch(list, /id="queue"|Oldest waiting/, `${login} must not see the queue summary`);
    }
    // carol has explicit access: she sees the row in the list.
    const carol = (await signIn(web, 'carol')).jar;
    assert.match(await (await get(web, carol, '/runs')).text(), /href="\/runs\/run-site"/);
  });

  test('access follows the repository id: a renamed private repository\'s old name does not open its runs', async () => {
    const mallory = (await signIn(web, 'mallory')).jar;
    assert.equal((await get(web, mallory, '/runs/run-renamed')).status, 404);
    assert.equal((await get(web, mallory, '/runs/run-renamed/events')).status, 404);
    assert.doesNotMatch(await (await get(web, mallory, '/runs')).text(), /run-renamed/);
    const alice = (await signIn(web, 'alice')).jar;
    assert.equal((await get(web, alice, '/runs/run-renamed')).status, 200, 'alice can read the renamed repository');
    assert.match(await (await get(web, alice, '/runs')).text(), /href="\/runs\/run-renamed"/);
  });

  test('a rate limit is not a denial, is not cached, and one failing installation does not fail the page', async () => {
    const acmeId = ids['acme-installation']!;
    const betaId = ids['beta-installation']!;
    // A secondary rate limit on acme's listing: the page says so, beta's runs are still there.
    const limited = gh.rateLimitApiRequests({ match: (r) => r.path === `/user/installations/${acmeId}/repositories`, times: 1, retryAfterSeconds: 30 });
    const alice = (await signIn(web, 'alice')).jar;
    const first = await get(web, alice, '/runs');
    assert.equal(first.status, 200);
    const html = await first.text();
    assert.equal(limited.hits, 1);
    assert.match(html, /href="\/runs\/run-tool"/, "beta's runs are shown");
    assert.match(html, /acme[^<]*rate limit/i, 'the page says acme could not be checked because of a rate limit');
    assert.doesNotMatch(html, /href="\/runs\/run-site"/, 'fail closed: acme runs are hidden while unchecked');
    // Not cached: the next view checks again and shows acme's runs.
    const second = await (await get(web, alice, '/runs')).text();
    assert.match(second, /href="\/runs\/run-site"/, 'the rate limit was not remembered as "no access"');
    assert.doesNotMatch(second, /rate limit/i);

    // A primary rate limit (403, x-ratelimit-remaining: 0) on the run page: 503 with retry-after, not 404.
    const bob = (await signIn(web, 'bob')).jar;
    const primary = gh.failApiRequests({ match: (r) => r.path === `/repositories/${ids['site']!}`, status: 403, times: 1, message: 'API rate limit exceeded', headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 40) } });
    const page = await get(web, bob, '/runs/run-site');
    assert.equal(primary.hits, 1);
    assert.equal(page.status, 503);
    assert.ok(Number(page.headers.get('retry-after')) > 0, 'retry-after is set');
    assert.match(await page.text(), /rate limit/i);
    assert.equal((await get(web, bob, '/runs/run-site')).status, 200, 'the rate limit was not cached as a denial');

    // A 5xx for one installation's listing: the other installation's runs still show.
    const down = gh.failApiRequests({ match: (r) => r.path === `/user/installations/${betaId}/repositories`, status: 502, times: 1 });
    const carolJar = (await signIn(web, 'carol')).jar; // carol has no beta repositories: she does not even ask beta
    assert.equal((await get(web, carolJar, '/runs')).status, 200);
    const alice2 = (await signIn(web, 'alice')).jar;
    const third = await get(web, alice2, '/runs');
    assert.equal(third.status, 200, 'one installation answering 502 does not fail the whole page');
    const thirdHtml = await third.text();
    assert.equal(down.hits, 1);
    assert.match(thirdHtml, /href="\/runs\/run-site"/);
    assert.doesNotMatch(thirdHtml, /href="\/runs\/run-tool"/);
    assert.match(thirdHtml, /beta[^<]*(could not|502)/i);
  });

  test('a live stream ends when access is lost or the session ends, and each user has a few streams at most', async () => {
    const p = await startPages({ extra: { accessRecheckMs: 200, accessTtlMs: 100, maxLiveStreamsPerUser: 2 } });
    await recordRun('run-live', 'acme', 'live', ids['live']!, { live: true });
    const open = async (jar: Jar) => {
      const ctl = new AbortController();
      const res = await get(p, jar, '/runs/run-live/events', { signal: ctl.signal });
      const closed = res.status === 200 ? res.text().then(() => true, () => false) : Promise.resolve(true);
      return { res, ctl, closed };
    };
    const within = (ms: number, what: Promise<boolean>) => Promise.race([what, new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

    // Access lost: GitHub now answers 404 for the repository (as after dave's removal).
    const dave = (await signIn(p, 'dave')).jar;
    const s1 = await open(dave);
    assert.equal(s1.res.status, 200);
    assert.equal(await within(500, s1.closed), false, 'the stream stays open while access holds');
    const revoked = gh.failApiRequests({ match: (r) => r.path === `/repositories/${ids['live']!}`, status: 404, times: 1000, message: 'Not Found' });
    assert.equal(await within(3000, s1.closed), true, 'the stream ended after access was lost');
    revoked.remove();
    s1.ctl.abort();
    await new Promise((r) => setTimeout(r, 250)); // the denial is an answer: reused for accessTtlMs (100 ms here)

    // Session ended (signed out elsewhere): the stream ends too.
    const s2 = await open(dave);
    assert.equal(s2.res.status, 200);
    await redis.del(...(await redis.keys(`${prefix}:websession:*`)));
    assert.equal(await within(3000, s2.closed), true, 'the stream ended with the session');
    s2.ctl.abort();

    // Per-user cap: two streams, the third is refused; another user is not affected.
    const alice = (await signIn(p, 'alice')).jar;
    const a1 = await open(alice);
    const alice2 = (await signIn(p, 'alice')).jar; // a second session of the same user counts too
    const a2 = await open(alice2);
    const a3 = await open(alice);
    assert.deepEqual([a1.res.status, a2.res.status, a3.res.status], [200, 200, 429]);
    const dave2 = (await signIn(p, 'dave')).jar;
    const d1 = await open(dave2);
    assert.equal(d1.res.status, 200);
    for (const s of [a1, a2, d1]) s.ctl.abort();
  });

  test('/runs with 300 repositories: a few paginated calls per viewer, cached, no call per repository', async () => {
    for (let i = 0; i < 300; i++) {
      const name = `many-${String(i).padStart(3, '0')}`;
      const id = gh.createRepo('acme', name, { private: true }).id;
      gh.addCollaborator('acme', name, 'alice', 'read');
      await recordRun(`run-many-${i}`, 'acme', name, id);
    }
    const alice = (await signIn(web, 'alice')).jar;
    calls.length = 0;
    const res = await get(web, alice, '/runs?repo=acme%2Fmany-123');
    assert.equal(res.status, 200);
    const html = await res.text();
    assert.match(html, /href="\/runs\/run-many-123"/);
    assert.equal((html.match(/<option value="acme\/many-/g) ?? []).length, 300, 'all 300 repositories are in the filter');
    assert.ok(calls.length <= 8, `one listing per installation, not one call per repository: ${calls.length} calls (${calls.slice(0, 5).map((c) => c.path).join(', ')}, ...)`);
    assert.equal(callsTo(/^\/repos\//), 0);
    // The next view within the cache time asks GitHub nothing.
    calls.length = 0;
    assert.equal((await get(web, alice, '/runs')).status, 200);
    assert.equal(calls.length, 0, 'the second view is served from the cache');
  });

  test('session cookies use the __Host- prefix when the public URL is https', async () => {
    const p = await startPages({ publicUrl: (port) => `https://127.0.0.1:${port}` });
    const begin = await fetch(`${p.url}/auth/login`, { redirect: 'manual' });
    const stateCookie = begin.headers.getSetCookie().join('\n');
    assert.match(stateCookie, /^__Host-lilypad_oauth=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d+; Secure$/m);
    assert.doesNotMatch(stateCookie, /Domain=/i);
    const { jar } = await signIn(p, 'alice');
    const session = jar.cookies.get('__Host-lilypad_session');
    assert.ok(session, `the session cookie is __Host-lilypad_session (got ${[...jar.cookies.keys()].join(', ')})`);
    assert.equal((await get(p, jar, '/runs/run-site')).status, 200);
    // The same value under the unprefixed name (settable by a sibling host) is not a session.
    const plain = await fetch(`${p.url}/runs/run-site`, { headers: { cookie: `lilypad_session=${session}` }, redirect: 'manual' });
    assert.equal(plain.status, 302);
    // Over plain http (development), the cookie has no prefix and no Secure (browsers would drop it).
    const dev = await fetch(`${web.url}/auth/login`, { redirect: 'manual' });
    assert.match(dev.headers.getSetCookie().join('\n'), /^lilypad_oauth=[^;]+; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d+$/m);
  });
});
