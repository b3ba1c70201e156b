/**
 * A new organisation's first hour, as the README tells it: `lilypad start` with nothing configured
 * but the GitHub host and the model server, registration through GitHub's manifest flow, a labelled
 * issue becomes a draft pull request without a restart; then a restart with the credentials only in
 * `.env`, and another pull request. REDIS_URL is never set: Lilypad runs a Redis of its own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { parseDotEnv } from '../../src/config/dotenv.ts';
import { freePort, waitFor } from '../support/app-harness.ts';
import type { GitHubStandin } from '../support/github-standin/index.ts';
import type { ModelServer } from '../support/model-server.ts';
import { OWNER, registerThroughBrowser, setupLinkIn, startNewOrg } from '../support/new-org.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

describe('the first hour: register, install, label, get a pull request (no REDIS_URL, no restart)', () => {
  let gh: GitHubStandin;
  let model: ModelServer;
  let home: string;
  let workdir: string;
  let port: number;
  let proc: ChildProcess | undefined;
  let output = '';

  /** What an administrator sets: the GitHub host (Enterprise), the model server, the port. Nothing else. */
  const userEnv = () => ({
    PATH: process.env['PATH'] ?? '',
    HOME: home,
    GHE_HOST: gh.host,
    GHE_PROTOCOL: 'http',
    OPENAI_BASE_URL: model.url,
    PORT: String(port),
  });
  const base = () => `http://localhost:${port}`;

  const start = async () => {
    output = '';
    proc = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'start'], { cwd: workdir, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    const collect = (d: Buffer) => (output += d.toString());
    proc.stdout!.on('data', collect);
    proc.stderr!.on('data', collect);
  };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> => {
    if (!proc || proc.exitCode !== null) return proc?.exitCode ?? null;
    const exited = new Promise<number | null>((r) => proc!.once('exit', (code) => r(code)));
    proc.kill(signal);
    const timer = setTimeout(() => proc?.kill('SIGKILL'), 60_000);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  const prFor = (n: number) => gh.pulls(OWNER, 'calc').find((p) => p.head.ref === `lilypad/issue-${n}`);

  before(async () => {
    ({ gh, model } = await startNewOrg());
    home = mkdtempSync(path.join(os.tmpdir(), 'lilypad-home-'));
    workdir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-checkout-'));
    port = await freePort();
  });
  after(async () => {
    await stop();
    await model?.close();
    await gh?.close();
  });

  test('registration, then a labelled issue becomes a draft pull request without a restart; then a restart from .env', async () => {
    await start();
    await waitFor(() => /no GitHub App credentials: open .*\/setup/.test(output), 'the registration message', 30_000);
    const link = setupLinkIn(output);
    assert.ok(link?.startsWith(`${base()}/setup?token=`), `the log prints the setup link:\n${output}`);
    assert.doesNotMatch(output, /ECONNREFUSED|SmeeClient/);

    // Before registration a signed delivery is refused loudly, never taken with 200 and dropped.
    const early = await gh.sendWebhook(`${base()}/api/github/webhooks`, 'ping', { zen: 'hi' });
    assert.equal(early.status, 503);
    await waitFor(() => /webhook refused with 503: Lilypad has no GitHub App credentials/.test(output), 'the refusal log line', 5000);

    // The setup page posts the manifest to GitHub's app-creation page; GitHub sends the browser back.
    const { page, manifest, donePage } = await registerThroughBrowser(gh, link!);
    assert.match(page, /GitHub cannot reach/); // localhost: the page says so and what to do
    assert.deepEqual(manifest['hook_attributes'], { url: `${base()}/api/github/webhooks`, active: true });
    assert.deepEqual(manifest['callback_urls'], [`${base()}/auth/callback`]);
    assert.equal(manifest['redirect_url'], `${base()}/setup/callback`);
    assert.equal(manifest['setup_url'], `${base()}/setup/installed`);
    assert.deepEqual(manifest['default_permissions'], { metadata: 'read', contents: 'write', issues: 'write', pull_requests: 'write', checks: 'read', actions: 'read', statuses: 'read' });
    assert.ok((manifest['default_events'] as string[]).includes('issues'));
    assert.match(donePage, new RegExp(`href="${gh.origin}/github-apps/lilypad/installations/new"`));
    assert.equal(gh.registeredManifests()[0]?.converted, true);

    // The credentials are in .env (private to this user) and the app runs as it, without a restart.
    const envFile = path.join(workdir, '.env');
    assert.equal(statSync(envFile).mode & 0o777, 0o600);
    const saved = parseDotEnv(readFileSync(envFile, 'utf8'));
    assert.equal(saved.get('APP_ID'), String(gh.appId));
    assert.equal(saved.get('PRIVATE_KEY'), gh.privateKeyPem);
    assert.equal(saved.get('WEBHOOK_SECRET'), gh.webhookSecret);
    assert.ok(saved.get('GITHUB_CLIENT_ID') && saved.get('GITHUB_CLIENT_SECRET'));
    await waitFor(() => output.includes('worker started') && output.includes('webhook server listening'), 'the worker and webhook server', 60_000);
    assert.match(output, /started a private Redis/);

    const hook = manifest.hook_attributes.url;
    const first = gh.createIssue(OWNER, 'calc', { title: 'add() subtracts', body: 'add(2, 3) gives -1.', author: 'alice' });
    const res = await gh.sendWebhook(hook, 'issues', gh.labelIssue(OWNER, 'calc', first.number, 'lilypad', 'alice'));
    assert.equal(res.status, 200);
    await waitFor(() => prFor(first.number) !== undefined, 'the first pull request', 120_000);
    assert.equal(prFor(first.number)!.draft, true);
    assert.equal(gh.readFile(OWNER, 'calc', `lilypad/issue-${first.number}`, 'calc.py'), 'def add(a, b):\n    return a + b\n');

    // The private Redis keeps its data in the data directory, behind a password.
    const redisDir = path.join(home, '.lilypad', 'redis');
    const { port: redisPort } = JSON.parse(readFileSync(path.join(redisDir, 'server.json'), 'utf8')) as { port: number };
    const password = readFileSync(path.join(redisDir, 'password'), 'utf8').trim();
    const reply = await new Promise<string>((resolve, reject) => {
      const sock = net.connect(redisPort, '127.0.0.1', () => sock.write('PING\r\n'));
      sock.once('data', (d) => {
        resolve(d.toString());
        sock.destroy();
      });
      sock.once('error', reject);
    });
    assert.match(reply, /^-NOAUTH/);

    assert.equal(await stop(), 0);
    assert.ok(existsSync(path.join(redisDir, 'appendonlydir')), 'the append-only file is in the data directory');

    // Restart: the credentials come from .env alone; the queue's data survived.
    await start();
    await waitFor(() => output.includes('worker started') && output.includes('webhook server listening'), 'the restarted app', 60_000);
    assert.doesNotMatch(output, /no GitHub App credentials/);
    const redis = new Redis({ port: redisPort, host: '127.0.0.1', password, maxRetriesPerRequest: 1 });
    const kept = await redis.keys('lilypad:*');
    redis.disconnect();
    assert.ok(kept.length > 0, 'the queue kept its data over the restart');

    const second = gh.createIssue(OWNER, 'calc', { title: 'add() is still wrong', body: 'add(1, 1) gives 0.', author: 'alice' });
    const res2 = await gh.sendWebhook(hook, 'issues', gh.labelIssue(OWNER, 'calc', second.number, 'lilypad', 'alice'));
    assert.equal(res2.status, 200);
    await waitFor(() => prFor(second.number) !== undefined, 'the pull request after the restart', 120_000);
    // The terminal closing (SIGHUP) stops it as Ctrl-C does: the worker, the proxy and its Redis,
    // where Node's default would end the process at once and leave them running.
    assert.equal(await stop('SIGHUP'), 0);
    assert.match(output, /"signal":"SIGHUP".*"msg":"stopping"|stopping.*SIGHUP/);
    const refused = await new Promise<boolean>((resolve) => {
      const sock = net.connect(redisPort, '127.0.0.1', () => {
        sock.destroy();
        resolve(false);
      });
      sock.once('error', () => resolve(true));
    });
    assert.ok(refused, 'the private Redis was stopped with Lilypad');
  });
});
