/**
 * Load time of a 150-step run's page through the real web role: `lilypad web` against the GitHub
 * stand-in, a run of 150 steps recorded in Redis as a worker records it, and a signed-in session.
 * Prints the median and p95 of 30 loads (the target: under 300 ms). Run: `npx tsx bench/run-page.ts`.
 */
import { Redis } from 'ioredis';
import { buildUserMessage, SYSTEM_PROMPT } from '../src/agent/prompt.ts';
import type { StepRecord } from '../src/agent/trajectory.ts';
import { RunStore } from '../src/observability/run-store.ts';
import { SecretScanner } from '../src/observability/secrets.ts';
import { startApp } from '../test/support/app-harness.ts';
import { startGitHubStandin } from '../test/support/github-standin/index.ts';
import { standinOAuthClient } from '../test/support/github-standin/oauth.ts';

const STEPS = 150;
const LOADS = 30;
const TARGET_MS = 300;

function step(n: number): StepRecord {
  // A realistic mix: reasoning, a Read or Bash call, observations of a few KB (a file, test output).
  const body = Array.from({ length: 60 }, (_, i) => `${String(i + 1).padStart(4)}\tdef function_${n}_${i}(value):  # a line of code that a Read would show\n`).join('');
  return {
    step: n,
    started_at: new Date(Date.now() - (STEPS - n) * 4000).toISOString(),
    model_ms: 1500 + (n % 7) * 300,
    attempts: 1,
    retries: [],
    usage: { prompt_tokens: 3000 + n * 500, completion_tokens: 120, total_tokens: 3120 + n * 500, cached_tokens: 2800 + n * 480 },
    finish_reason: 'tool_calls',
    assistant: {
      role: 'assistant',
      content: '',
      reasoning_content: `Step ${n}: the failing test points at the parser; read the next part of the module and check the boundary case. `.repeat(6),
      tool_calls: [{ id: `call_${n}`, type: 'function', function: { name: n % 3 === 0 ? 'Bash' : 'Read', arguments: JSON.stringify(n % 3 === 0 ? { command: 'python3 -m pytest -q tests/test_parser.py' } : { file_path: `src/module_${n}.py` }) } }],
    },
    rescued_tool_calls: false,
    tools: [{ id: `call_${n}`, name: n % 3 === 0 ? 'Bash' : 'Read', arguments: n % 3 === 0 ? '{"command":"python3 -m pytest -q"}' : `{"file_path":"src/module_${n}.py"}`, observation: body, duration_ms: 40 + (n % 5) * 200 }],
    warnings: [],
  };
}

async function main(): Promise<void> {
  const gh = await startGitHubStandin({ appSlug: 'lilypad' });
  const oauth = standinOAuthClient(gh);
  const app = await startApp({ book: {}, role: 'web', share: { gh }, env: { GITHUB_CLIENT_ID: oauth.clientId, GITHUB_CLIENT_SECRET: oauth.clientSecret } });
  const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  try {
    gh.createInstallation({ login: 'acme', type: 'Organization' });
    gh.createUser('alice');
    const repo = gh.createRepo('acme', 'calc', { private: true });
    gh.addCollaborator('acme', 'calc', 'alice', 'maintain');
    const store = new RunStore(redis, { prefix: app.prefix, retentionDays: 1, maxBytes: 8 * 1024 * 1024 });
    const rec = store.recorder({ runId: 'bench-150', jobId: 'run-1-1', owner: 'acme', repo: 'calc', repoId: repo.id, issueNumber: 1, triggeredBy: 'alice', attempt: 1, workerId: 'bench' }, new SecretScanner([]));
    rec.task({ system: SYSTEM_PROMPT, user: buildUserMessage('A parser bug', 'The parser drops the last token.') });
    rec.config({ model: 'frognano', max_steps: 150 });
    for (let n = 1; n <= STEPS; n++) rec.step(step(n));
    const diff = Array.from({ length: 20 }, (_, f) => `diff --git a/src/m${f}.py b/src/m${f}.py\n--- a/src/m${f}.py\n+++ b/src/m${f}.py\n@@ -1,3 +1,3 @@\n def f():\n-    return 1\n+    return 2\n     pass\n`).join('');
    await rec.finish({ outcome: 'pull_request', exitReason: 'max_turns', diff, pr: { number: 1, url: `${gh.origin}/acme/calc/pull/1` } });

    // Sign in as a browser would: follow the redirects, keep the cookies.
    const jar = new Map<string, string>();
    const cookieHeader = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const keep = (res: Response) => {
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(';');
        const eq = pair!.indexOf('=');
        jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
      }
    };
    const login = await fetch(`${app.baseUrl}/auth/login`, { redirect: 'manual' });
    keep(login);
    const authorize = new URL(login.headers.get('location')!);
    const form = new URLSearchParams({ client_id: authorize.searchParams.get('client_id')!, redirect_uri: authorize.searchParams.get('redirect_uri')!, state: authorize.searchParams.get('state')!, login: 'alice' });
    const approved = await fetch(`${gh.origin}/login/oauth/authorize`, { method: 'POST', body: form, redirect: 'manual' });
    const callback = await fetch(approved.headers.get('location')!, { redirect: 'manual', headers: { cookie: cookieHeader() } });
    keep(callback);
    if (callback.status !== 302) throw new Error(`sign-in failed: HTTP ${callback.status}`);

    const url = `${app.baseUrl}/runs/bench-150`;
    const times: number[] = [];
    let bytes = 0;
    for (let i = 0; i < LOADS + 3; i++) {
      const t = performance.now();
      const res = await fetch(url, { headers: { cookie: cookieHeader() } });
      const text = await res.text();
      const ms = performance.now() - t;
      if (res.status !== 200 || !text.includes('id="step-150"')) throw new Error(`the page did not load: HTTP ${res.status}`);
      bytes = text.length;
      if (i >= 3) times.push(ms); // the first loads warm up the process and the access cache
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)]!;
    const p95 = times[Math.floor(times.length * 0.95)]!;
    console.log(`run page, ${STEPS} steps (${(bytes / 1024).toFixed(0)} KiB of HTML), ${LOADS} loads: median ${median.toFixed(1)} ms, p95 ${p95.toFixed(1)} ms (target < ${TARGET_MS} ms) ${p95 < TARGET_MS ? 'OK' : 'OVER'}`);
    process.exitCode = p95 < TARGET_MS ? 0 : 1;
  } finally {
    const keys = await redis.keys(`${app.prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    await app.stop();
    await gh.close();
  }
}

await main();
