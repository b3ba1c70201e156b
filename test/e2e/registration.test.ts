import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort, waitFor } from '../support/app-harness.ts';
import { setupLinkIn } from '../support/new-org.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

test('without app credentials, lilypad start serves the registration page built from app.yml and LILYPAD_PUBLIC_URL', async () => {
  const port = await freePort();
  const cwd = mkdtempSync(path.join(os.tmpdir(), 'lilypad-reg-'));
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'start'], {
    cwd,
    env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', LILYPAD_PUBLIC_URL: 'https://lilypad.example.com/', GH_ORG: 'acme' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  try {
    await waitFor(() => /no GitHub App credentials: open https:\/\/lilypad\.example\.com\/setup/.test(out), 'the setup server', 30_000);
    // Probot's old address still leads there.
    const old = await fetch(`http://127.0.0.1:${port}/probot`, { redirect: 'manual' });
    assert.equal(old.status, 302);
    assert.equal(old.headers.get('location'), '/setup');
    // The log prints the setup link under the public URL; opened here, where Lilypad listens.
    const link = setupLinkIn(out);
    assert.match(link ?? '', /^https:\/\/lilypad\.example\.com\/setup\?token=[0-9a-f]{64}$/);
    const bare = await fetch(`http://127.0.0.1:${port}/setup`);
    assert.equal(bare.status, 403);
    const res = await fetch(`http://127.0.0.1:${port}/setup${new URL(link!).search}`);
    assert.equal(res.status, 200);
    // An https public URL: the setup cookie is only ever sent back over https.
    assert.match(res.headers.get('set-cookie') ?? '', /; Secure/);
    const html = await res.text();
    assert.match(html, /<form action="https:\/\/github\.com\/organizations\/acme\/settings\/apps\/new\?state=[0-9a-f]+" method="post">/);
    assert.match(html, /&quot;hook_attributes&quot;:\{&quot;url&quot;:&quot;https:\/\/lilypad\.example\.com\/api\/github\/webhooks&quot;/);
    assert.doesNotMatch(html, /GitHub cannot reach/);
    // The page states the permissions app.yml asks for, the CI-reading ones included.
    for (const p of ['contents: write', 'issues: write', 'pull_requests: write', 'checks: read', 'actions: read', 'statuses: read']) assert.ok(html.includes(`<code>${p}</code>`), p);
    // Without credentials every delivery is refused with a reason, including one signed with
    // Probot's built-in development secret.
    const body = JSON.stringify({ zen: 'hi' });
    const sig = `sha256=${createHmac('sha256', 'development').update(body).digest('hex')}`;
    const hook = await fetch(`http://127.0.0.1:${port}/api/github/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-github-event': 'ping', 'x-github-delivery': 'd-1', 'x-hub-signature-256': sig },
      body,
    });
    assert.equal(hook.status, 503);
    assert.match(((await hook.json()) as { message: string }).message, /not registered yet: open https:\/\/lilypad\.example\.com\/setup/);
    assert.doesNotMatch(out, /ECONNREFUSED|SmeeClient/);
  } finally {
    child.kill('SIGINT');
  }
});

test('a malformed .env stops every command with the file, the line and the fix', async () => {
  const cwd = mkdtempSync(path.join(os.tmpdir(), 'lilypad-badenv-'));
  writeFileSync(path.join(cwd, '.env'), 'OPENAI_BASE_URL=http://127.0.0.1:1/v1\nthis is not a setting\n');
  for (const command of ['start', 'doctor']) {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), command], { cwd, env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir() }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 2, command);
    assert.match(err, /\.env, line 2: "this is not a setting" has no KEY=.*fix or remove the line/);
    assert.doesNotMatch(err, /at .*\.ts:\d+/);
  }
});

test('LILYPAD_ENV_FILE names the settings file; a variable in the environment wins over it', async () => {
  const cwd = mkdtempSync(path.join(os.tmpdir(), 'lilypad-envfile-'));
  const file = path.join(cwd, 'lilypad.env');
  writeFileSync(file, 'LILYPAD_MAX_STEPS=many\nLOG_LEVEL=loud\n');
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'start'], {
    cwd: os.tmpdir(),
    env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), LILYPAD_ENV_FILE: file, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  assert.equal(code, 2);
  assert.match(err, /LILYPAD_MAX_STEPS="many"/); // from the file
  assert.doesNotMatch(err, /LOG_LEVEL/); // the environment's value won
});

test('a worker without credentials stops with a message saying what to set', async () => {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'worker'], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  assert.equal(code, 2);
  assert.match(err, /APP_ID and PRIVATE_KEY .* are required for a worker/);
});

test('with credentials but no Redis, start stops at once and says what to do', async () => {
  const { generateKeyPairSync } = await import('node:crypto');
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'start'], {
    cwd: ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      HOME: os.tmpdir(),
      APP_ID: '1',
      PRIVATE_KEY: privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
      WEBHOOK_SECRET: 'x',
      REDIS_URL: 'redis://127.0.0.1:9',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  assert.equal(code, 2);
  assert.match(err, /cannot reach Redis at redis:\/\/127\.0\.0\.1:9 \(connect ECONNREFUSED.*\)\. Start Redis, or point REDIS_URL at it\./);
});

test('once registered, the setup addresses answer: GitHub sends the browser to /setup/installed after an installation', async () => {
  const { generateKeyPairSync } = await import('node:crypto');
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const port = await freePort();
  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
  const prefix = `lilypad-installed-test-${process.pid}`;
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'web'], {
    cwd: mkdtempSync(path.join(os.tmpdir(), 'lilypad-installed-')),
    env: {
      PATH: process.env['PATH'] ?? '',
      HOME: os.tmpdir(),
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      APP_ID: '7',
      PRIVATE_KEY: privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
      WEBHOOK_SECRET: 'x',
      REDIS_URL: redisUrl,
      LILYPAD_QUEUE_PREFIX: prefix,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  try {
    await waitFor(() => out.includes('webhook server listening'), 'the webhook server', 30_000);
    const installed = await fetch(`http://127.0.0.1:${port}/setup/installed?installation_id=1&setup_action=install`);
    assert.equal(installed.status, 200);
    assert.match(await installed.text(), /Lilypad is installed.*Label an issue <code>lilypad<\/code>/s);
    const setup = await fetch(`http://127.0.0.1:${port}/setup`);
    assert.equal(setup.status, 200);
    const html = await setup.text();
    assert.match(html, /already registered.*id 7.*remove <code>APP_ID<\/code>/s);
    assert.doesNotMatch(html, /<form/);
  } finally {
    const exited = new Promise((resolve) => child.once('close', resolve));
    child.kill('SIGINT');
    await exited;
    // The queues' keys this process made in the shared Redis.
    const { Redis } = await import('ioredis');
    const redis = new Redis(redisUrl);
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  }
});
