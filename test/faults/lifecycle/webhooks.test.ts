import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { startApp, waitFor, type AppHarness } from '../../support/app-harness.ts';
import { faultTest } from '../../support/fault-table.ts';

/** Resident memory of a process, from /proc (kB -> MB). */
function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? NaN) / 1024;
}

interface BigPostResult {
  status: number | null;
  ms: number;
  sentMb: number;
}

/**
 * POSTs up to `totalMb` of zeros to the webhook URL without a signature, as fast as the server takes
 * them, and stops once an answer (or a closed connection) arrives. `chunked` leaves out Content-Length.
 */
function bigPost(url: string, totalMb: number, chunked: boolean): Promise<BigPostResult> {
  const started = Date.now();
  const target = new URL(url);
  const total = totalMb * 1024 * 1024;
  const chunk = Buffer.alloc(1024 * 1024);
  return new Promise((resolve) => {
    let sent = 0;
    let done = false;
    const finish = (status: number | null) => {
      if (done) return;
      done = true;
      req.destroy();
      resolve({ status, ms: Date.now() - started, sentMb: sent / (1024 * 1024) });
    };
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': 'big-1', 'x-hub-signature-256': 'sha256=00' };
    if (!chunked) headers['content-length'] = total;
    const req = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: 'POST', headers, agent: false }, (res) => {
      res.resume();
      finish(res.statusCode ?? null);
    });
    req.on('error', () => finish(null));
    const pump = () => {
      while (!done && sent < total) {
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (!done) req.end();
    };
    pump();
    setTimeout(() => finish(null), 30_000).unref();
  });
}

// The webhook server (lilypad web) bounds what strangers can send.
{
  let app: AppHarness;
  // A stand-in for a bug somewhere in the process: on SIGUSR2 it throws from a callback and leaves
  // a rejected promise unhandled, the two failures that by default end a Node process.
  const plantDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-plant-'));
  const plant = path.join(plantDir, 'plant.mjs');
  writeFileSync(
    plant,
    "process.on('SIGUSR2', () => { setTimeout(() => { throw new Error('planted uncaught exception'); }); void Promise.reject(new Error('planted unhandled rejection')); });\n",
  );

  before(async () => {
    app = await startApp({ book: {}, role: 'web', env: { NODE_OPTIONS: `--import ${plant}` } });
    app.gh.createInstallation({ login: 'acme', type: 'Organization' });
    app.gh.createUser('alice');
    app.gh.createRepo('acme', 'calc', { files: { 'README.md': '# calc\n' } });
  });
  after(async () => {
    await app?.stop();
    rmSync(plantDir, { recursive: true, force: true });
  });

  const pid = () => {
    assert.ok(app.proc.pid);
    return app.proc.pid;
  };

  const signedWebhook = async () => {
    const issue = app.gh.createIssue('acme', 'calc', { title: 'Hello', body: 'x', author: 'alice' });
    const started = Date.now();
    const res = await app.send('issues', app.gh.closeIssue('acme', 'calc', issue.number, 'alice'));
    return { status: res.status, ms: Date.now() - started };
  };

  faultTest('a 200 MB unsigned webhook announcing its size', '413 at once, before the body is read; the web role\'s memory stays bounded', async () => {
    const before = rssMb(pid());
    const res = await bigPost(app.webhookUrl, 200, false);
    const grew = rssMb(pid()) - before;
    return {
      observed: `HTTP ${res.status} after ${res.ms} ms, ${res.sentMb.toFixed(0)} MB sent; RSS grew ${grew.toFixed(1)} MB`,
      pass: res.status === 413 && res.ms < 3000 && res.sentMb < 200 && grew < 40,
    };
  });

  faultTest('a chunked 200 MB unsigned webhook (no Content-Length)', 'cut off at 25 MB with 413; memory bounded; the next signed webhook is answered', async () => {
    const before = rssMb(pid());
    const res = await bigPost(app.webhookUrl, 200, true);
    const grew = rssMb(pid()) - before;
    const ok = await signedWebhook();
    return {
      observed: `HTTP ${res.status} after ${res.ms} ms, ${res.sentMb.toFixed(0)} MB sent; RSS grew ${grew.toFixed(1)} MB; then a signed webhook: HTTP ${ok.status}`,
      pass: res.status === 413 && res.ms < 10_000 && res.sentMb < 120 && grew < 100 && ok.status >= 200 && ok.status < 300,
    };
  });

  faultTest('100 slow-drip connections (headers one byte a second)', 'the web role keeps answering: a signed webhook meanwhile; every drip is cut off by the headers timeout', async () => {
    const url = new URL(app.webhookUrl);
    const sockets: net.Socket[] = [];
    const closedAt: number[] = [];
    const started = Date.now();
    const timers: NodeJS.Timeout[] = [];
    let connected = 0;
    try {
      for (let i = 0; i < 100; i++) {
        const s = net.connect({ host: url.hostname, port: Number(url.port) });
        s.on('error', () => undefined);
        s.resume(); // read whatever the server answers (408), so that its close is seen
        s.on('close', () => closedAt.push(Date.now() - started));
        sockets.push(s);
        // Headers one byte a second: never complete.
        const line = `POST ${url.pathname} HTTP/1.1\r\nHost: x\r\nX-Drip: ${'d'.repeat(200)}`;
        let at = 0;
        s.on('connect', () => {
          connected++;
          const t = setInterval(() => {
            if (s.destroyed || at >= line.length) return;
            s.write(line[at++]!);
          }, 1000);
          timers.push(t);
        });
      }
      await waitFor(() => connected === 100, 'the drip connections', 10_000);
      const ok = await signedWebhook();

      // The server's headers timeout (10 s, checked every second) closes every drip.
      // On a timeout the row below reports how many were closed.
      await waitFor(() => closedAt.length === 100, 'the server to close every drip', 20_000).catch(() => undefined);
      return {
        observed: `signed webhook: HTTP ${ok.status} in ${ok.ms} ms; ${closedAt.length} of 100 drips closed by the server, the last after ${Math.max(...closedAt)} ms`,
        pass: ok.status >= 200 && ok.status < 300 && ok.ms < 3000 && closedAt.length === 100 && Math.max(...closedAt) < 15_000,
      };
    } finally {
      for (const t of timers) clearInterval(t);
      for (const s of sockets) s.destroy();
    }
  });

  faultTest('GET /ping and an unknown path', 'PONG; 404', async () => {
    const ping = await fetch(new URL('/ping', app.webhookUrl));
    const text = await ping.text();
    const nope = (await fetch(new URL('/nope', app.webhookUrl))).status;
    return { observed: `/ping: ${ping.status} ${text}; /nope: ${nope}`, pass: ping.status === 200 && text === 'PONG' && nope === 404 };
  });

  faultTest('an uncaught exception and an unhandled rejection inside the process', 'both logged with their error; the process keeps serving', async () => {
    process.kill(pid(), 'SIGUSR2');
    // On a timeout the row below says which one is missing.
    const planted = () => app.logs().includes('planted uncaught exception') && app.logs().includes('planted unhandled rejection');
    await waitFor(planted, 'both planted errors in the log', 10_000).catch(() => undefined);
    const lines = app.logs().split('\n').filter((l) => l.includes('planted'));
    const exception = lines.some((l) => /uncaught exception/.test(l) && /"stack"/.test(l));
    const rejection = lines.some((l) => /unhandled promise rejection/.test(l) && /planted unhandled rejection/.test(l));
    const ok = await signedWebhook();
    return {
      observed: `exception logged: ${exception}; rejection logged: ${rejection}; still running: ${app.proc.exitCode === null}; next webhook HTTP ${ok.status}`,
      pass: exception && rejection && app.proc.exitCode === null && ok.status >= 200 && ok.status < 300,
    };
  });
}
