/**
 * Only the operator can register the app. Before the first registration `/setup` is served at the
 * public address, so anyone who can load it must not be able to make Lilypad run as their GitHub
 * App: the page and its callback need the one-time setup link Lilypad prints to its own log at
 * start (bound to the browser by a cookie), and with GH_ORG set only an app owned by that
 * organisation is accepted. A refusal writes nothing, logs a line and tells the browser why.
 * The real `lilypad web` against the GitHub stand-in's manifest flow, over HTTP.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { parseDotEnv } from '../../src/config/dotenv.ts';
import { freePort, waitFor } from '../support/app-harness.ts';
import { startGitHubStandin, type GitHubStandin } from '../support/github-standin/index.ts';
import { setupLinkIn, unescapeHtml } from '../support/new-org.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

describe('registration needs the setup link Lilypad printed, and GH_ORG is enforced', () => {
  let gh: GitHubStandin;
  let proc: ChildProcess;
  let output = '';
  let cwd: string;
  let base: string;
  const prefix = `lilypad-regtoken-${process.pid}`;
  const envFile = () => path.join(cwd, '.env');

  /** The setup page's form, as a browser holding the link sees it. */
  async function openWithLink(): Promise<{ action: string; manifest: string; cookie: string; html: string; setCookie: string }> {
    const res = await fetch(setupLinkIn(output)!);
    const html = await res.text();
    assert.equal(res.status, 200, html);
    const setCookie = res.headers.get('set-cookie') ?? '';
    const action = unescapeHtml(/<form action="([^"]+)"/.exec(html)?.[1] ?? '');
    const manifest = unescapeHtml(/name="manifest" value="([^"]+)"/.exec(html)?.[1] ?? '');
    return { action, manifest, cookie: setCookie.split(';')[0]!, html, setCookie };
  }

  /** What GitHub does with the form: create the app, send the browser to the callback. */
  async function postToGitHub(action: string, manifest: string): Promise<string> {
    const created = await fetch(action, { method: 'POST', body: new URLSearchParams({ manifest }), redirect: 'manual' });
    assert.equal(created.status, 302);
    return created.headers.get('location')!;
  }

  before(async () => {
    gh = await startGitHubStandin({ appSlug: 'lilypad' });
    gh.createInstallation({ login: 'acme', type: 'Organization' });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    cwd = mkdtempSync(path.join(os.tmpdir(), 'lilypad-regtoken-'));
    proc = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'web'], {
      cwd,
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: cwd,
        LILYPAD_DATA_DIR: cwd,
        HOST: '127.0.0.1',
        PORT: String(port),
        LILYPAD_PUBLIC_URL: base,
        GHE_HOST: gh.host,
        GHE_PROTOCOL: 'http',
        GH_ORG: 'acme',
        REDIS_URL,
        LILYPAD_QUEUE_PREFIX: prefix,
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const collect = (d: Buffer) => (output += d.toString());
    proc.stdout!.on('data', collect);
    proc.stderr!.on('data', collect);
    await waitFor(() => setupLinkIn(output) !== undefined, 'the setup link in the log', 30_000);
  });

  after(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      await exited;
    }
    await gh?.close();
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  test('the log prints a ready link: the public URL, /setup and a one-time token', () => {
    assert.match(setupLinkIn(output)!, new RegExp(`^${base}/setup\\?token=[0-9a-f]{64}$`));
  });

  test('without the link, /setup answers 403 with where the link is printed, and no state', async () => {
    const link = new URL(setupLinkIn(output)!);
    const wrong = 'f'.repeat(64);
    for (const attempt of [
      { url: `${base}/setup`, headers: {} },
      { url: `${base}/setup?token=${wrong}`, headers: {} },
      { url: `${base}/setup?token=`, headers: {} },
      { url: `${base}/setup`, headers: { cookie: `lilypad_setup=${wrong}` } },
      // The token belongs in the query or the cookie it sets, not elsewhere.
      { url: `${base}/setup?t=${link.searchParams.get('token')}`, headers: {} },
    ]) {
      const res = await fetch(attempt.url, { headers: attempt.headers });
      const html = await res.text();
      assert.equal(res.status, 403, attempt.url);
      assert.match(html, /needs the one-time setup link Lilypad printed to its terminal \(its log\) when it started/);
      assert.doesNotMatch(html, /state=|<form|manifest/, 'nothing of the registration is shown');
      assert.equal(res.headers.get('set-cookie'), null);
    }
    assert.match(output, /setup page refused: no valid setup token/);
    // The root still leads to /setup, which refuses the same way.
    const root = await fetch(`${base}/`, { redirect: 'manual' });
    assert.equal(root.headers.get('location'), '/setup');
  });

  test('the link opens the page and binds the browser with an HttpOnly, SameSite=Lax cookie for /setup', async () => {
    const { setCookie, html, action } = await openWithLink();
    assert.match(setCookie, /^lilypad_setup=[0-9a-f]{64};/);
    assert.match(setCookie, /;\s*HttpOnly/i);
    assert.match(setCookie, /;\s*SameSite=Lax/i);
    assert.match(setCookie, /;\s*Path=\/setup(;|$)/);
    assert.doesNotMatch(setCookie, /;\s*Secure/i, 'the public URL is http: a Secure cookie would never come back');
    assert.match(action, new RegExp(`^${gh.origin}/organizations/acme/settings/apps/new\\?state=[0-9a-f]+$`));
    assert.match(html, /Only a browser that opened the one-time setup link Lilypad printed to its log at start can finish this registration, and only for an app owned by acme/);
    // Reloading with the cookie (the link no longer in the address bar) shows the page again.
    const again = await fetch(`${base}/setup`, { headers: { cookie: setCookie.split(';')[0]! } });
    assert.equal(again.status, 200);
  });

  test("a callback without the setup cookie is refused before GitHub's code is used, and nothing is written", async () => {
    // A stranger who learnt the state (or the operator's URL) cannot complete the flow from another browser.
    const { action, manifest } = await openWithLink();
    const callback = await postToGitHub(action, manifest);
    assert.ok(callback.startsWith(`${base}/setup/callback?code=`), callback);
    for (const cookie of [undefined, 'lilypad_setup=', `lilypad_setup=${'0'.repeat(64)}`]) {
      const res = await fetch(callback, cookie ? { headers: { cookie } } : {});
      const html = await res.text();
      assert.equal(res.status, 403, html);
      assert.match(html, /This browser did not open the setup link Lilypad printed to its log, so the registration was refused and nothing was saved/);
    }
    assert.equal(existsSync(envFile()), false, '.env untouched');
    assert.equal(gh.registeredManifests().at(-1)?.converted, false, "GitHub's one-time code was not spent");
    assert.match(output, /registration callback refused: the browser has no valid setup cookie/);
    assert.doesNotMatch(output, /registered the GitHub App/);
  });

  test('with GH_ORG set, an app GitHub created for another owner is refused and nothing is written', async () => {
    const { action, manifest, cookie } = await openWithLink();
    for (const elsewhere of [action.replace('/organizations/acme/', '/organizations/evil/'), action.replace('/organizations/acme/', '/')]) {
      const callback = await postToGitHub(elsewhere, manifest);
      const res = await fetch(callback, { headers: { cookie } });
      const html = await res.text();
      assert.equal(res.status, 403, html);
      assert.match(html, /GitHub created the app .* owned by (evil|lilypad-admin), but this Lilypad registers only an app owned by acme \(<code>GH_ORG<\/code>\); nothing was saved/);
      assert.equal(existsSync(envFile()), false, '.env untouched');
    }
    assert.match(output, /registration refused: GitHub created the app for evil, not for GH_ORG acme/);
    assert.doesNotMatch(output, /registered the GitHub App/);
  });

  test("the operator's browser, with the link, registers the app for acme and Lilypad goes on as it", async () => {
    const { action, manifest, cookie } = await openWithLink();
    const callback = await postToGitHub(action, manifest);
    const res = await fetch(callback, { headers: { cookie } });
    const html = await res.text();
    assert.equal(res.status, 200, html);
    const saved = parseDotEnv(readFileSync(envFile(), 'utf8'));
    assert.equal(saved.get('APP_ID'), String(gh.appId));
    assert.equal(saved.get('WEBHOOK_SECRET'), gh.webhookSecret);
    await waitFor(() => output.includes('webhook server listening'), 'the registered app', 30_000);
    // The link died with the registration: it shows that the app exists, and offers no form.
    const later = await fetch(setupLinkIn(output)!);
    assert.doesNotMatch(await later.text(), /<form/);
  });
});

test('with LOG_LEVEL=warn the setup link is still printed (to stderr): without it nobody could register', async () => {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-regtoken-quiet-'));
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'web'], {
    cwd: dir,
    env: { PATH: process.env['PATH'] ?? '', HOME: dir, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', REDIS_URL },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    await waitFor(() => setupLinkIn(err) !== undefined, 'the setup link on stderr', 30_000);
    const res = await fetch(`http://127.0.0.1:${port}/setup${new URL(setupLinkIn(err)!).search}`);
    assert.equal(res.status, 200);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
});
