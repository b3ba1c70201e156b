import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort, startApp, waitFor } from '../support/app-harness.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

interface LogLine {
  level: number;
  msg?: string;
  [k: string]: unknown;
}

/** Every line of a piped log is JSON; returns them parsed. */
function jsonLines(output: string): LogLine[] {
  return output
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      try {
        return JSON.parse(l) as LogLine;
      } catch {
        assert.fail(`not a JSON log line on a pipe: ${l}`);
      }
    });
}

function assertNoNoise(output: string) {
  assert.doesNotMatch(output, /smee/i, 'no webhook-proxy (Smee) chatter from Probot');
  for (const line of jsonLines(output)) {
    assert.ok(!('req' in line) && !('res' in line) && !JSON.stringify(line).includes('user-agent'), `no per-request access log with headers: ${JSON.stringify(line)}`);
  }
}

test('lilypad start outside production: JSON on a pipe, no Smee line, no per-request access log at info', async () => {
  // NODE_ENV other than production is where Probot's own setup would look for a Smee proxy.
  const app = await startApp({ book: {}, env: { NODE_ENV: 'development', LOG_LEVEL: 'info' } });
  try {
    assert.equal((await fetch(`${app.baseUrl}/ping`)).status, 200);
    assert.equal((await app.send('ping', { zen: 'Keep it logically awesome.', hook_id: 1 })).status, 200);
    await fetch(`${app.baseUrl}/no-such-page`);
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    await app.stop();
  }
  const output = app.logs();
  assertNoNoise(output);
  const info = jsonLines(output).filter((l) => l.level >= 30);
  assert.ok(!info.some((l) => /\b(GET|POST) \//.test(l.msg ?? '')), `no request lines at info:\n${output}`);
});

test('lilypad start before registration: the setup line and no Smee line', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-cli-logs-'));
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'start'], {
    cwd: dir,
    env: { PATH: process.env['PATH'] ?? '', HOME: dir, LILYPAD_DATA_DIR: dir, HOST: '127.0.0.1', PORT: String(port), REDIS_URL: 'redis://127.0.0.1:6379' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    await waitFor(() => output.includes('no GitHub App credentials'), 'the registration line', 30_000);
    await fetch(`http://127.0.0.1:${port}/setup`);
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
  assertNoNoise(output);
});
