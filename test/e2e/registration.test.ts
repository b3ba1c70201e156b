import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort, waitFor } from '../support/app-harness.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

test('without app credentials, lilypad start offers the registration flow built from app.yml', async () => {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'start'], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', NODE_ENV: 'development' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  try {
    await waitFor(() => /Listening on/.test(out), 'the setup server', 30_000);
    assert.match(out, /register Lilypad from app\.yml/);
    const res = await fetch(`http://127.0.0.1:${port}/probot`);
    assert.equal(res.status, 200);
    const html = await res.text();
    // The page posts the manifest from app.yml to GitHub's app-creation form.
    assert.match(html, /Lilypad/);
    assert.match(html, /manifest/i);
  } finally {
    child.kill('SIGINT');
  }
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
