import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { GitHubApp, RepoToken } from '../../src/github/app-auth.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { loadEnv } from '../../src/config/env.ts';
import { writePacing } from '../../src/github/write-pacing.ts';

// Lilypad spaces its writes to GitHub as GitHub asks (a second apart, three before a request that
// notifies people), for every client of the process at once; LILYPAD_GITHUB_WRITE_SPACING_MS sets
// the spacing, and only tests against the stand-in shorten it.
describe('GitHub write pacing', () => {
  let server: http.Server;
  let arrivals: { at: number; method: string; path: string }[] = [];
  let apiUrl = '';
  before(async () => {
    server = http.createServer((req, res) => {
      // Token requests answer as GitHub does and are not counted: they are not paced writes.
      const minting = /\/access_tokens$/.test(req.url ?? '');
      if (!minting) arrivals.push({ at: Date.now(), method: req.method ?? '', path: req.url ?? '' });
      req.resume();
      req.on('end', () => {
        res.writeHead(minting ? 201 : 200, { 'content-type': 'application/json' });
        res.end(minting ? JSON.stringify({ token: 'ghs_test', expires_at: new Date(Date.now() + 3_600_000).toISOString(), permissions: {}, repository_selection: 'selected' }) : '{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => server.close());

  const client = (spacingMs?: number) => new RepoToken('t0ken', new Date(Date.now() + 3_600_000).toISOString(), apiUrl, writePacing(spacingMs)).rest();
  // The queue spaces the starts of requests: the last of n paced requests cannot arrive before
  // (n - 1) spacings have passed since they were made, however busy the machine. Upper bounds only
  // tell a shortened spacing from the default one, so they are loose.
  const lastArrivalAfter = (t0: number) => Math.max(...arrivals.map((a) => a.at)) - t0;
  /** Label writes: a write that notifies nobody. */
  const label = (c: ReturnType<typeof client>, n: number) => c.request('POST /repos/{owner}/{repo}/issues/{issue_number}/labels', { owner: 'o', repo: 'r', issue_number: n, labels: ['x'] });

  test('by default, writes are a second apart, even from two clients at once', async () => {
    arrivals = [];
    const [a, b] = [client(), client()];
    const t0 = Date.now();
    await Promise.all([label(a, 1), label(b, 2), label(a, 3)]);
    assert.equal(arrivals.length, 3);
    const ms = lastArrivalAfter(t0);
    assert.ok(ms >= 2000, `three writes within ${ms} ms; GitHub asks for a second between them`);
  });

  test('a shorter spacing is kept, and requests that notify people wait three times as long', async () => {
    arrivals = [];
    const c = client(150);
    let t0 = Date.now();
    await Promise.all([label(c, 1), label(c, 2), label(c, 3)]);
    let ms = lastArrivalAfter(t0);
    assert.ok(ms >= 300 && ms < 1800, `three label writes over ${ms} ms with a 150 ms spacing`);

    arrivals = [];
    const comment = (n: number) => c.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', { owner: 'o', repo: 'r', issue_number: n, body: 'hi' });
    t0 = Date.now();
    await Promise.all([comment(1), comment(2)]);
    ms = lastArrivalAfter(t0);
    assert.ok(ms >= 450 && ms < 2500, `two comments over ${ms} ms with a 150 ms spacing (450 ms before a notification; 3 s by default)`);
  });

  test("a GitHubApp's installation clients and repository tokens keep the app's spacing (LILYPAD_GITHUB_WRITE_SPACING_MS reaches them)", async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs1', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const app = new GitHubApp({ appId: 1, privateKey, endpoints: { apiUrl }, log: createLogger({ level: 'silent' }), writeSpacingMs: 150 });
    const installation = await app.installation(7);
    const token = await app.mintRepoToken(7, 'r');
    // Four writes each: at least 450 ms apart in all with a 150 ms spacing, 3 s with GitHub's.
    const fourWrites = async (write: (n: number) => Promise<unknown>) => {
      arrivals = [];
      const t0 = Date.now();
      await Promise.all([1, 2, 3, 4].map(write));
      assert.equal(arrivals.length, 4);
      return lastArrivalAfter(t0);
    };
    const viaInstallation = await fourWrites((n) => installation.request('POST /repos/{owner}/{repo}/issues/{issue_number}/labels', { owner: 'o', repo: 'r', issue_number: n, labels: ['x'] }));
    assert.ok(viaInstallation >= 450 && viaInstallation < 2000, `four writes from an installation client over ${viaInstallation} ms with a 150 ms spacing`);
    const rest = token.rest();
    const viaToken = await fourWrites((n) => label(rest, n));
    assert.ok(viaToken >= 450 && viaToken < 2000, `four writes with a repository token over ${viaToken} ms with a 150 ms spacing`);
  });

  test('reads are not paced', async () => {
    arrivals = [];
    const c = client();
    const t0 = Date.now();
    await Promise.all([1, 2, 3].map((n) => c.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner: 'o', repo: 'r', pull_number: n })));
    const ms = lastArrivalAfter(t0);
    assert.ok(ms < 1500, `three reads over ${ms} ms (paced as writes they would take 2 s)`);
  });

  test('the setting: 1000 unless set, a whole number of milliseconds, 0 or more', () => {
    assert.equal(loadEnv({}).LILYPAD_GITHUB_WRITE_SPACING_MS, 1000);
    assert.equal(loadEnv({ LILYPAD_GITHUB_WRITE_SPACING_MS: '20' }).LILYPAD_GITHUB_WRITE_SPACING_MS, 20);
    assert.throws(() => loadEnv({ LILYPAD_GITHUB_WRITE_SPACING_MS: '-5' }), /LILYPAD_GITHUB_WRITE_SPACING_MS="-5": must be 0 or more milliseconds; .*1000 GitHub asks for/);
    assert.throws(() => writePacing(-1), /0 or more/);
  });
});
