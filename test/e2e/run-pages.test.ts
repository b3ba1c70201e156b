import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ModelClient } from '../../src/agent/model-client.ts';
import { buildUserMessage, prepareIssue, SYSTEM_PROMPT } from '../../src/agent/prompt.ts';
import { JsonlTrajectory } from '../../src/agent/trajectory.ts';
import { RunStore } from '../../src/observability/run-store.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { runSandboxSession } from '../../src/pipeline/sandbox-session.ts';
import { createDockerClient } from '../../src/sandbox/sandbox.ts';
import { runPageUrl } from '../../src/config/public-urls.ts';
import { startApp, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';
import { launchBrowser, testOutputDir } from '../support/browser.ts';
import { CALC_REPO, makeRepo } from '../support/fixture-repo.ts';
import { startGitHubStandin, type GitHubStandin } from '../support/github-standin/index.ts';
import { standinOAuthClient } from '../support/github-standin/oauth.ts';
import { TEST_IMAGE } from '../support/sandbox-harness.ts';

/**
 * The run pages in a real browser (Debian's Chromium through playwright-core) against the real web
 * role (`lilypad web`), signing in through the GitHub stand-in's OAuth flow. The runs are real
 * agent runs: the scripted model server, a real sandbox, the repository's tests before and after,
 * recorded through the trajectory's tee into Redis exactly as a worker records them.
 */

const OWNER = 'acme';
const METRICS_TOKEN = 'metrics-token-for-tests-0123456789';
const docker = createDockerClient();
const shots = testOutputDir('run-pages');

let gateOpen = false;
const book: ScriptBook = {
  'add() returns the wrong result': [
    {
      reasoning: 'The bug report says add subtracts. Read calc.py first.',
      toolCalls: [{ name: 'Read', arguments: { file_path: 'calc.py' } }],
      usage: { prompt_tokens: 1200, completion_tokens: 40, cached_tokens: 0 },
    },
    {
      reasoning: 'It returns a - b. Fix it.',
      toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }],
      usage: { prompt_tokens: 1500, completion_tokens: 60, cached_tokens: 1200 },
    },
    {
      reasoning: 'Run the tests.',
      toolCalls: [{ name: 'Bash', arguments: { command: 'python3 -m unittest -q 2>&1 | tail -3' } }],
      usage: { prompt_tokens: 1800, completion_tokens: 30, cached_tokens: 1500 },
    },
    { content: 'Fixed `add()`: it returned a - b.', usage: { prompt_tokens: 2100, completion_tokens: 20, cached_tokens: 1800 } },
  ],
  // The live run: step 2 waits (the model server answers 503, the client retries) until the test opens the gate.
  'Live: add() is wrong': (turn) => {
    if (turn === 0) return { reasoning: 'Look at the code.', toolCalls: [{ name: 'Read', arguments: { file_path: 'calc.py' } }] };
    if (turn === 1) {
      if (!gateOpen) return { status: 503, headers: { 'retry-after': '0.5' } };
      return { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] };
    }
    return { content: 'Fixed.' };
  },
};

describe('run pages in a browser (lilypad web, GitHub sign-in through the stand-in)', () => {
  let gh: GitHubStandin;
  let app: AppHarness;
  let redis: Redis;
  let store: RunStore;
  let browser: Browser;
  let repoId: number;
  const finishedRunId = `run-e2e-finished-${Date.now().toString(36)}`;
  const liveRunId = `run-e2e-live-${Date.now().toString(36)}`;

  /** One real agent run, recorded as a worker records it. */
  async function recordRun(runId: string, title: string, issueNumber: number): Promise<void> {
    const checkoutDir = makeRepo(CALC_REPO);
    const baseCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: checkoutDir }).toString().trim();
    const scanner = new SecretScanner([]);
    const recorder = store.recorder({ runId, jobId: `run-${repoId}-${issueNumber}`, owner: OWNER, repo: 'calc', repoId, issueNumber, triggeredBy: 'alice', attempt: 1, workerId: 'e2e-worker' }, scanner);
    const prepared = prepareIssue(title, 'add(2, 3) gives -1 instead of 5.');
    recorder.task({ system: SYSTEM_PROMPT, user: buildUserMessage(prepared.title, prepared.body) });
    const budgets = { maxSteps: 10, maxContextTokens: 131072, maxTokensPerTurn: 8192, maxWallSeconds: 300, bashTimeoutCapSeconds: 1800 };
    recorder.config({ model: 'frognano', image: TEST_IMAGE, test: 'python3 -m unittest -q', budgets });
    const trajectory = new JsonlTrajectory(path.join(mkdtempSync(path.join(os.tmpdir(), 'lilypad-e2e-traj-')), 'trajectory.jsonl'), scanner, (r) => recorder.step(r));
    // Retries enough to outlast the gate: signing in under CI's load took longer than ten retries
    // 0.2 s apart, the client gave up, and the run ended without its edit (no diff on the page).
    const client = new ModelClient({ baseURL: app.model.url, timeoutMs: 30_000, maxRetries: 240, retryBaseMs: 50 });
    const session = await runSandboxSession({
      docker,
      checkoutDir,
      baseCommit,
      sandbox: { image: TEST_IMAGE, workdir: '/testbed', memoryMb: 1024, cpus: 1, pids: 256 },
      runId,
      workerId: app.prefix,
      setup: [],
      setupNetwork: null,
      setupTimeoutSeconds: 60,
      testCommand: 'python3 -m unittest -q',
      testTimeoutSeconds: 60,
      issue: prepared,
      model: 'frognano',
      client,
      budgets,
      trajectory,
      phase: async (name, fn) => {
        const t = Date.now();
        try {
          return await fn();
        } finally {
          recorder.phase(name, Date.now() - t);
        }
      },
    });
    await trajectory.close();
    recorder.tests('before', session.tests?.before ?? null);
    recorder.tests('after', session.tests?.after ?? null);
    for (const w of session.agent.warnings) recorder.warning(w);
    await recorder.finish({ outcome: 'pull_request', exitReason: session.agent.exitReason, diff: session.patch?.diff ?? null, pr: { number: 7, url: `${gh.origin}/${OWNER}/calc/pull/7` } });
  }

  async function signIn(login: string): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${app.baseUrl}/runs`);
    // Not signed in: sent to GitHub's authorize page (the stand-in's), which asks who signs in.
    await page.waitForURL((u) => u.pathname === '/login/oauth/authorize');
    await page.fill('#login', login);
    await Promise.all([page.waitForURL((u) => u.origin === app.baseUrl && u.pathname === '/runs'), page.click('#authorize')]);
    return { context, page };
  }

  before(async () => {
    gh = await startGitHubStandin({ appSlug: 'lilypad' });
    const oauth = standinOAuthClient(gh);
    app = await startApp({ book, role: 'web', share: { gh }, env: { GITHUB_CLIENT_ID: oauth.clientId, GITHUB_CLIENT_SECRET: oauth.clientSecret, LILYPAD_METRICS_TOKEN: METRICS_TOKEN } });
    gh.createInstallation({ login: OWNER, type: 'Organization' });
    gh.createUser('alice');
    gh.createUser('mallory');
    repoId = gh.createRepo(OWNER, 'calc', { files: CALC_REPO, private: true }).id;
    gh.addCollaborator(OWNER, 'calc', 'alice', 'maintain');
    redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 2 });
    store = new RunStore(redis, { prefix: app.prefix, retentionDays: 1, maxBytes: 8 * 1024 * 1024 });
    browser = await launchBrowser();
    await recordRun(finishedRunId, 'add() returns the wrong result', 1);
  });

  after(async () => {
    await browser?.close();
    if (redis && app) {
      const keys = await redis.keys(`${app.prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
    await app?.stop();
    await gh?.close();
  });

  test('nothing is visible without signing in, and every POST needs the session\'s CSRF token', async () => {
    const page = await fetch(`${app.baseUrl}/runs/${finishedRunId}`, { redirect: 'manual' });
    assert.equal(page.status, 302);
    assert.match(page.headers.get('location') ?? '', new RegExp(`^/auth/login\\?next=%2Fruns%2F${finishedRunId}`));
    assert.equal((await fetch(`${app.baseUrl}/runs/${finishedRunId}/events`, { redirect: 'manual' })).status, 401);
    assert.equal((await fetch(`${app.baseUrl}/assets/run-pages.css`, { redirect: 'manual' })).status, 401);
    const login = await fetch(`${app.baseUrl}/auth/login`, { redirect: 'manual' });
    assert.match(login.headers.get('location') ?? '', new RegExp(`^${gh.origin}/login/oauth/authorize\\?client_id=`));
    assert.match(login.headers.get('set-cookie') ?? '', /HttpOnly; SameSite=Lax/);
    assert.equal((await fetch(`${app.baseUrl}/auth/logout`, { method: 'POST', redirect: 'manual' })).status, 403);
    // A forged callback (state not from this browser) is refused.
    assert.equal((await fetch(`${app.baseUrl}/auth/callback?code=x&state=forged`, { redirect: 'manual' })).status, 400);
  });

  test('a finished run: task, config, timeline, tests, diff and chart render, statically', async () => {
    const { context, page } = await signIn('alice');
    try {
      await page.goto(runPageUrl(app.baseUrl, finishedRunId));
      assert.equal(await page.locator('#run').getAttribute('data-live'), null, 'a finished run is static');
      assert.equal(await page.locator('#task-user').innerText(), 'add() returns the wrong result\nadd(2, 3) gives -1 instead of 5.');
      assert.match(await page.locator('pre.config').innerText(), /"maxSteps": 10/);
      // Timeline: four steps; reasoning collapsed; tool calls with arguments; observations as the model saw them.
      assert.equal(await page.locator('li.step').count(), 4);
      const step1 = page.locator('#step-1');
      assert.equal(await step1.locator('details.reasoning').getAttribute('open'), null, 'reasoning is collapsed');
      assert.match(await step1.locator('details.reasoning pre').textContent() ?? '', /Read calc.py first/);
      assert.equal(await step1.locator('.tool-name').innerText(), 'Read');
      assert.equal(await step1.locator('pre.args').innerText(), '{"file_path":"calc.py"}');
      assert.match(await step1.locator('pre.observation').innerText(), /return a - b/);
      assert.match(await page.locator('#step-2 .tokens').innerText(), /1,500 prompt \(1,200 cached\) · 60 completion/);
      // Tests before and after, with their output.
      assert.match(await page.locator('#tests').innerText(), /Before: failed[\s\S]*After: passed/);
      assert.match(await page.locator('#tests details').first().locator('pre').textContent() ?? '', /FAILED|AssertionError/);
      // The diff, rendered by diff2html.
      assert.equal(await page.locator('.d2h-file-wrapper').count(), 1);
      assert.match(await page.locator('.d2h-file-wrapper').innerText(), /return a \+ b/);
      // The chart: a context line and one bar per step.
      assert.equal(await page.locator('svg.chart path.context-line').count(), 1);
      assert.equal(await page.locator('svg.chart rect.bar').count(), 4);
      const box = await page.locator('svg.chart').boundingBox();
      assert.ok(box && box.width > 300 && box.height > 100, 'the chart is drawn');
      assert.match(await page.locator('#stats').innerText(), /Cached tokens\s+4,500/);
      await page.screenshot({ path: path.join(shots, 'run-page.png'), fullPage: true });

      await page.goto(`${app.baseUrl}/runs`);
      assert.equal(await page.locator('tr.run-row').count(), 1);
      assert.match(await page.locator('tr.run-row').innerText(), /acme\/calc\s+#1 · PR #7\s+pull request/);
      assert.match(await page.locator('#queue').innerText(), /Waiting\s+0[\s\S]*Oldest waiting\s+—/);
      // Filters: by outcome and by repository.
      await page.goto(`${app.baseUrl}/runs?outcome=failed`);
      assert.equal(await page.locator('tr.run-row').count(), 0);
      await page.goto(`${app.baseUrl}/runs?repo=acme%2Fcalc&outcome=pull_request`);
      assert.equal(await page.locator('tr.run-row').count(), 1);
      await page.screenshot({ path: path.join(shots, 'runs-list.png'), fullPage: true });
      if (process.env['LILYPAD_DOCS_SCREENSHOTS'] === '1') {
        copyFileSync(path.join(shots, 'run-page.png'), path.join(import.meta.dirname, '../../docs/run-page.png'));
        copyFileSync(path.join(shots, 'runs-list.png'), path.join(import.meta.dirname, '../../docs/runs-list.png'));
      }

      // Signing out needs the page's form (with its CSRF token); afterwards nothing is visible.
      await Promise.all([page.waitForURL((u) => u.pathname === '/auth/signed-out'), page.click('form.signout button')]);
      const res = await page.goto(runPageUrl(app.baseUrl, finishedRunId));
      assert.equal(new URL(res!.url()).pathname, '/login/oauth/authorize');
    } finally {
      await context.close();
    }
  });

  test('a user whose GitHub account cannot read the repository gets 404, and no runs in the list', async () => {
    const { context, page } = await signIn('mallory');
    try {
      const res = await page.goto(runPageUrl(app.baseUrl, finishedRunId));
      assert.equal(res?.status(), 404);
      assert.doesNotMatch(await page.content(), /return a/);
      assert.equal((await page.goto(`${app.baseUrl}/runs/${finishedRunId}/events`))?.status(), 404);
      assert.equal((await page.goto(runPageUrl(app.baseUrl, 'run-does-not-exist')))?.status(), 404);
      await page.goto(`${app.baseUrl}/runs`);
      assert.equal(await page.locator('tr.run-row').count(), 0);
    } finally {
      await context.close();
    }
  });

  test('a live run updates through server-sent events, then turns into the static page', async () => {
    gateOpen = false;
    const running = recordRun(liveRunId, 'Live: add() is wrong', 2);
    running.catch(() => undefined);
    await waitFor(async () => ((await store.summary(liveRunId))?.steps ?? 0) >= 1, 'the live run to record its first step', 90_000);
    const { context, page } = await signIn('alice');
    try {
      await page.goto(runPageUrl(app.baseUrl, liveRunId));
      assert.equal(await page.locator('#run').getAttribute('data-live'), '1');
      assert.equal(await page.locator('li.step').count(), 1);
      await page.evaluate(() => ((globalThis as unknown as { sameDocument: boolean }).sameDocument = true));
      gateOpen = true;
      // Step 2 arrives without a reload (the model's retries show with it).
      await page.locator('#step-2').waitFor({ timeout: 60_000 });
      assert.equal(await page.evaluate(() => (globalThis as unknown as { sameDocument?: boolean }).sameDocument), true, 'step 2 came through SSE, not a reload');
      assert.match(await page.locator('#step-2 .retry-note').innerText(), /model retr(y|ies) before this answer/);
      // The chart is redrawn from the events too (step 3 may already be in).
      await waitFor(async () => (await page.locator('svg.chart rect.bar').count()) >= 2, 'the chart to show step 2', 10_000);
      await running;
      // When the run finishes the page reloads as the static record, diff included.
      await page.locator('#run:not([data-live]) .d2h-file-wrapper').waitFor({ timeout: 30_000 });
      assert.equal(await page.locator('li.step').count(), 3);
      assert.match(await page.locator('#warnings').innerText(), /503/);
      await page.screenshot({ path: path.join(shots, 'run-page-live-finished.png'), fullPage: true });
    } finally {
      await context.close();
    }
  });

  test('/metrics needs the bearer token and serves Prometheus text with process and queue metrics', async () => {
    assert.equal((await fetch(`${app.baseUrl}/metrics`)).status, 401);
    assert.equal((await fetch(`${app.baseUrl}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status, 401);
    const res = await fetch(`${app.baseUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /^process_resident_memory_bytes \d+/m);
    assert.match(text, /^lilypad_queue_jobs\{state="waiting"\} 0$/m);
    assert.match(text, /^lilypad_queue_oldest_waiting_seconds 0$/m);
    assert.match(text, /^# TYPE lilypad_jobs_total counter$/m);
  });
});
