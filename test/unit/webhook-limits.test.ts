import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http, { type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';

import { createLimitedServer, type GuardedRequest, type WebhookLimits } from '../../src/github/webhook-limits.ts';

const LIMITS: WebhookLimits = {
  maxBodyBytes: 80 * 1024,
  maxInFlightBodyBytes: 100 * 1024,
  headersTimeoutMs: 400,
  requestTimeoutMs: 1500,
  keepAliveTimeoutMs: 500,
  checkIntervalMs: 100,
  maxConnections: 50,
};

let server: Server;
let port = 0;
const seen: Array<{ url: string; rawBody: Buffer | undefined }> = [];

before(async () => {
  server = createLimitedServer((req: GuardedRequest, res) => {
    seen.push({ url: req.url ?? '', rawBody: req.rawBody });
    res.writeHead(200).end(String(req.rawBody?.length ?? -1));
  }, LIMITS);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
after(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

async function waitFor(pred: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A POST whose body is written in `parts` (each `bytes` long, `gapMs` apart); resolves with the status. */
function post(url: string, parts: number, bytes: number, opts: { gapMs?: number; contentLength?: number; firstBytes?: number } = {}): Promise<{ status: number | null; body: string }> {
  return new Promise((resolve) => {
    const headers: Record<string, number> = {};
    if (opts.contentLength !== undefined) headers['content-length'] = opts.contentLength;
    const req = http.request({ host: '127.0.0.1', port, path: url, method: 'POST', headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? null, body }));
      res.on('error', () => resolve({ status: res.statusCode ?? null, body }));
    });
    req.on('error', () => resolve({ status: null, body: '' }));
    if (opts.firstBytes) req.write(Buffer.alloc(opts.firstBytes, 'x'));
    let sent = 0;
    const next = () => {
      if (req.destroyed) return;
      if (sent === parts) {
        req.end();
        return;
      }
      sent++;
      req.write(Buffer.alloc(bytes, 'x'));
      setTimeout(next, opts.gapMs ?? 0);
    };
    next();
  });
}

describe('createLimitedServer', () => {
  test('a body within the limit reaches the handler whole, as rawBody', async () => {
    const res = await post('/ok', 4, 20 * 1024);
    assert.equal(res.status, 200);
    assert.equal(res.body, String(80 * 1024));
    assert.equal(seen.find((s) => s.url === '/ok')?.rawBody?.length, 80 * 1024);
  });

  test('a Content-Length over the limit gets 413 without the handler', async () => {
    const res = await post('/too-big-declared', 1, 1024, { contentLength: 10 * 1024 * 1024 });
    assert.equal(res.status, 413);
    assert.equal(seen.some((s) => s.url === '/too-big-declared'), false);
  });

  test('a chunked body is cut off once it passes the limit: 413, handler never called', async () => {
    const res = await post('/too-big-chunked', 100, 8 * 1024, { gapMs: 5 });
    assert.equal(res.status, 413);
    assert.equal(seen.some((s) => s.url === '/too-big-chunked'), false);
  });

  test('bodies read at the same time share one budget: past it, 503', async () => {
    // The first holds 60 KB while it trickles on; the second would take the total past 100 KB.
    let slowBytes = 0;
    const watch = (req: http.IncomingMessage) => {
      // Registered after the server's own listener: it sees each chunk after the budget counted it.
      if (req.url === '/slow') req.on('data', (chunk: Buffer) => void (slowBytes += chunk.length));
    };
    server.on('request', watch);
    const slow = post('/slow', 10, 1024, { firstBytes: 60 * 1024, gapMs: 100 });
    await waitFor(() => slowBytes >= 60 * 1024, 'the server to hold the first 60 KB of /slow', 5000);
    server.off('request', watch);
    const second = await post('/second', 1, 60 * 1024);
    assert.equal(second.status, 503);
    assert.equal((await slow).status, 200);
    // With the first done, the budget is free again.
    assert.equal((await post('/third', 1, 60 * 1024)).status, 200);
  });

  test('a connection that never finishes its headers is closed by the headers timeout', async () => {
    const started = Date.now();
    const closedAfter = await new Promise<number>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => s.write('POST /drip HTTP/1.1\r\nHost: x\r\n'));
      s.on('error', () => undefined);
      s.resume(); // read the server's 408, so that its close is seen
      s.on('close', () => resolve(Date.now() - started));
    });
    assert.ok(closedAfter < 1500, `closed after ${closedAfter} ms`);
  });
});

describe('a refused body: the client gets the answer even while it is still sending', () => {
  // A client that writes a large body before it reads (as most HTTP clients do) must still see the
  // 413: closing a socket with unread data sends a reset, which throws away the answer on the
  // client's side before it reads it. The server half-closes and stops reading instead.
  const refusedWhileSending = (contentLength: number | undefined) =>
    new Promise<string>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      let got = '';
      s.on('error', (err) => resolve(`${got}<error ${(err as NodeJS.ErrnoException).code}>`));
      s.on('close', () => resolve(got));
      const head = contentLength === undefined ? 'transfer-encoding: chunked\r\n' : `content-length: ${contentLength}\r\n`;
      s.write(`POST /big HTTP/1.1\r\nhost: x\r\n${head}\r\n`);
      const chunk = Buffer.alloc(256 * 1024, 'x');
      const frame = contentLength === undefined ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]) : chunk;
      for (let i = 0; i < 16; i++) s.write(frame);
      // Read only after a while, as a client busy sending would.
      s.pause();
      setTimeout(() => {
        s.on('data', (d: Buffer) => (got += d.toString('latin1')));
        s.resume();
      }, 300);
    });

  test('declared too large (Content-Length)', async () => {
    assert.match(await refusedWhileSending(200 * 1024 * 1024), /^HTTP\/1\.1 413 /);
  });

  test('found too large while reading (chunked)', async () => {
    assert.match(await refusedWhileSending(undefined), /^HTTP\/1\.1 413 /);
  });
});
