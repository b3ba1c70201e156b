/**
 * GitHub's published example deliveries (@octokit/webhooks-examples: api.github.com and every
 * Enterprise Server set the package ships), unchanged, for every event app.yml subscribes to,
 * signed with the app's secret and sent to the real `lilypad start`: each is answered 2xx, the
 * app stays up, nothing is started (no job in the runs queue, no write to GitHub) and nothing is
 * logged at error. None of them carries Lilypad's label, a `/lilypad` command or one of its
 * branches, so none may start anything; odd and mutated payloads are webhook-payloads.test.ts's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { parse as parseYaml } from 'yaml';
import { startApp, type AppHarness } from '../support/app-harness.ts';
import { RUNS_QUEUE } from '../../src/store/jobs.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const SUBSCRIBED = (parseYaml(readFileSync(path.join(ROOT, 'app.yml'), 'utf8')) as { default_events: string[] }).default_events;

interface Example {
  set: string;
  event: string;
  payload: Record<string, unknown>;
}

/** Every published example of the subscribed events, each distinct payload once, with its set. */
function publishedExamples(): Example[] {
  const dir = path.dirname(createRequire(import.meta.url).resolve('@octokit/webhooks-examples/package.json'));
  const seen = new Set<string>();
  const out: Example[] = [];
  for (const set of readdirSync(dir).sort()) {
    let events: Array<{ name: string; examples: Array<Record<string, unknown>> }>;
    try {
      events = JSON.parse(readFileSync(path.join(dir, set, 'index.json'), 'utf8')) as typeof events;
    } catch {
      continue; // not a set (README.md, index.d.ts)
    }
    for (const e of events) {
      if (!SUBSCRIBED.includes(e.name)) continue;
      for (const payload of e.examples) {
        const key = `${e.name} ${JSON.stringify(payload)}`;
        if (seen.has(key)) continue;
        seen.add(key);
        out.push({ set, event: e.name, payload });
      }
    }
  }
  return out;
}

describe("GitHub's published example deliveries into the running app", () => {
  let app: AppHarness;
  let redis: Redis;
  const examples = publishedExamples();

  before(async () => {
    redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    app = await startApp({ book: {}, env: { LOG_LEVEL: 'debug' } });
  });
  after(async () => {
    await app?.stop();
    if (app) {
      const keys = await redis.keys(`${app.prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
    }
    redis?.disconnect();
  });

  test('every example of every subscribed event: 2xx, still alive, nothing started, nothing logged at error', async () => {
    // Each subscribed event has examples in api.github.com's set and an Enterprise Server set.
    for (const event of SUBSCRIBED) {
      const sets = new Set(examples.filter((e) => e.event === event).map((e) => e.set));
      assert.ok(sets.has('api.github.com') && [...sets].some((s) => s.startsWith('ghes-')), `${event}: examples from ${[...sets].join(', ')}`);
    }
    const answers: string[] = [];
    for (const ex of examples) {
      const action = typeof ex.payload['action'] === 'string' ? `.${ex.payload['action']}` : '';
      const res = await app.send(ex.event, ex.payload);
      if (res.status < 200 || res.status >= 300) answers.push(`${ex.set} ${ex.event}${action}: ${res.status} ${res.body.slice(0, 200)}`);
    }
    assert.deepEqual(answers, [], `${answers.length} of ${examples.length} examples were not answered 2xx`);

    // Deliveries are handled after the answer: wait until each is in the log (ignored, received or
    // handled) and the log has been quiet for a second, so that what handlers do is over.
    const ids = app.gh.deliveries.map((d) => d.deliveryId);
    const started = Date.now();
    let last = -1;
    let quietSince = Date.now();
    while (Date.now() - started < 30_000) {
      const log = app.logs();
      if (log.length !== last) [last, quietSince] = [log.length, Date.now()];
      if (ids.every((id) => log.includes(id)) && Date.now() - quietSince >= 1000) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(ids.filter((id) => !app.logs().includes(id)), [], 'every delivery reached the app');

    assert.equal(app.proc.exitCode, null, 'the app is still running');
    assert.equal(app.proc.signalCode, null, 'the app is still running');
    const ping = await app.send('ping', { zen: 'Keep it logically awesome.', hook_id: 1, sender: { login: 'octocat', id: 1, type: 'User' } });
    assert.ok(ping.status >= 200 && ping.status < 300, `a ping after the examples: ${ping.status} ${ping.body}`);

    const connection = redis.duplicate();
    const queue = new Queue(RUNS_QUEUE, { connection, prefix: app.prefix });
    try {
      const counts = await queue.getJobCounts();
      assert.deepEqual(Object.entries(counts).filter(([, n]) => n > 0), [], 'no job was queued');
    } finally {
      await queue.close();
      connection.disconnect(); // a connection given to BullMQ is the giver's to close
    }
    const writes = app.gh.requests.filter((r) => r.kind !== 'api' || !['GET', 'HEAD'].includes(r.method)).filter((r) => !/\/access_tokens$/.test(r.path));
    assert.deepEqual(writes.map((r) => `${r.method} ${r.path}`), [], 'nothing was written to GitHub');

    const lines = app.logs().split('\n').filter((l) => l.startsWith('{'));
    const errors = lines.filter((l) => (JSON.parse(l) as { level: number }).level >= 50);
    assert.deepEqual(errors.slice(0, 5).map((l) => l.slice(0, 400)), [], `${errors.length} lines logged at error`);
    assert.ok(examples.length >= 100, `${examples.length} examples`);
  });
});
