import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { RepoToken } from '../../src/github/app-auth.ts';
import { waitFor } from '../support/poll.ts';

// A cancelled or stopping job aborts its GitHub calls with a reason of Lilypad's own. Without
// src/github/abort-without-retry.ts, @octokit/plugin-retry took that for an HTTP 500 and retried
// it three times over 14 s, which kept a stopping worker past its grace period.
describe('GitHub calls under an aborted signal', () => {
  let server: http.Server;
  let hits = 0;
  let apiUrl = '';
  before(async () => {
    server = http.createServer((_req, res) => {
      hits++;
      setTimeout(() => {
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end('{}');
      }, 500);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());

  // A read: writes also wait in Octokit's write throttle, which is not what this is about.
  const call = async (signal: AbortSignal) => {
    const client = new RepoToken('t0ken', new Date(Date.now() + 3_600_000).toISOString(), apiUrl).rest();
    const t0 = Date.now();
    const err = await client
      .request('GET /repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers', { owner: 'o', repo: 'r', pull_number: 1, request: { signal } })
      .then(() => null, (e: unknown) => e as Error);
    return { err, ms: Date.now() - t0 };
  };

  test('already aborted: fails at once, sends nothing, is not retried', async () => {
    hits = 0;
    const { err, ms } = await call(AbortSignal.abort(new Error('the worker is stopping')));
    assert.equal(err?.name, 'AbortError');
    assert.match(err?.message ?? '', /the worker is stopping/);
    assert.equal(hits, 0);
    assert.ok(ms < 1000, `${ms} ms`);
  });

  test('aborted while the request is in flight: fails at once, one request, not retried', async () => {
    hits = 0;
    const controller = new AbortController();
    // Aborted once the server holds the request (it answers after 500 ms), not after a guessed
    // 100 ms: on a loaded machine the request may not have arrived by then.
    const pending = call(controller.signal);
    await waitFor(() => hits === 1, { what: 'the request to reach the server', timeoutMs: 5000, intervalMs: 5 });
    controller.abort(new Error('cancelled by @alice'));
    const { err, ms } = await pending;
    assert.equal(err?.name, 'AbortError');
    assert.ok(ms < 1000, `${ms} ms`);
    // A fixed window on purpose: the point is that no retry reaches the server within it; there is
    // no event to poll for.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(hits, 1, 'no retry reached the server');
  });

  test('a signal that never fires changes nothing', async () => {
    hits = 0;
    const { err } = await call(new AbortController().signal);
    assert.equal(err, null);
    assert.equal(hits, 1);
  });
});
