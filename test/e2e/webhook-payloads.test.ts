/**
 * Every signed delivery the app can receive, with or without the fields a handler expects, gets a
 * 2xx (ignored) or a 4xx with one sentence: never a 500, never a stack trace in the log. GitHub sends
 * events without `repository` (installation, marketplace and authorization events) to every app,
 * and a payload can lack, or null, any field. The real `lilypad web` over HTTP, signed with the
 * app's webhook secret: the subscribed events of app.yml with GitHub's example payloads and their
 * mutations, the events every app gets, and bodies that are not JSON objects.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { parse as parseYaml } from 'yaml';
import { startApp, type AppHarness } from '../support/app-harness.ts';
import { webhookSignatures } from '../support/github-standin/index.ts';
import { webhookExamples } from '../support/github-standin/webhooks.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const SUBSCRIBED = (parseYaml(readFileSync(path.join(ROOT, 'app.yml'), 'utf8')) as { default_events: string[] }).default_events;
/** Sent to every GitHub App whatever it subscribes to. */
const TO_EVERY_APP = ['installation', 'installation_repositories', 'github_app_authorization', 'marketplace_purchase', 'security_advisory', 'meta', 'ping'];
/** The actions Lilypad acts on (src/github/webhooks.ts); the rest are sent too, and ignored. */
const ACTED_ON: Record<string, string[]> = {
  issues: ['labeled', 'unlabeled', 'closed', 'edited'],
  issue_comment: ['created'],
  pull_request: ['closed', 'unlabeled'],
  pull_request_review: ['submitted'],
  pull_request_review_comment: ['created'],
  check_run: ['completed'],
  check_suite: ['completed'],
};

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

const isObj = (v: Json | undefined): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const copy = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** A payload that goes as deep into the handler as it can: a failed check, a `/lilypad` comment. */
function deepest(event: string, p: Obj): Obj {
  const out = copy(p);
  const set = (key: string, field: string, value: Json) => {
    const o = out[key];
    if (isObj(o)) o[field] = value;
  };
  set('comment', 'body', '/lilypad please');
  set('review', 'state', 'changes_requested');
  set('check_run', 'conclusion', 'failure');
  set('check_suite', 'conclusion', 'failure');
  if (event === 'status') out['state'] = 'failure';
  if (event === 'issues' && !isObj(out['label'])) out['label'] = { id: 1, name: 'lilypad', color: 'ffffff' };
  if (event === 'issues' && !isObj(out['changes'])) out['changes'] = { title: { from: 'old' } };
  out['installation'] = { id: 4242, node_id: 'x' };
  return out;
}

/** The examples GitHub ships for `event`, plus each acted-on action the examples lack. */
function basesFor(event: string): Obj[] {
  const examples = (webhookExamples().find((e) => e.name === event)?.examples ?? []) as Obj[];
  const bases = examples.map(copy);
  const template = examples[0] ?? { action: 'x', sender: { login: 'octocat', type: 'User', id: 1 } };
  for (const action of ACTED_ON[event] ?? []) {
    if (!examples.some((e) => e['action'] === action)) bases.push({ ...copy(template), action });
  }
  if (event === 'marketplace_purchase' && bases.length === 1) bases[0] = { action: 'purchased', marketplace_purchase: { account: { login: 'acme', id: 1 } }, sender: { login: 'octocat', type: 'User', id: 1 } };
  return bases;
}

/**
 * The payload, then: without each of repository, installation, sender; each top-level field null
 * or a string; and, for payloads a handler acts on, each field of each top-level object (and of
 * repository.owner and the first element of arrays) null or missing.
 */
function mutations(event: string, base: Obj): Obj[] {
  const acted = event === 'status' || (ACTED_ON[event] ?? []).includes(String(base['action']));
  const p = acted ? deepest(event, base) : base;
  const out: Obj[] = [p, {}, { action: p['action'] ?? null }];
  for (const key of ['repository', 'installation', 'sender']) {
    const without = copy(p);
    delete without[key];
    out.push(without);
  }
  out.push({ ...copy(p), repository: null, installation: null, sender: null });
  for (const key of Object.keys(p)) {
    out.push({ ...copy(p), [key]: null });
    out.push({ ...copy(p), [key]: 'x' });
  }
  if (!acted) return out;
  const nested = (obj: Obj, at: (root: Obj) => Obj | undefined) => {
    for (const field of Object.keys(obj)) {
      for (const value of [null, undefined] as const) {
        const m = copy(p);
        const target = at(m);
        if (!target) continue;
        if (value === undefined) delete target[field];
        else target[field] = value;
        out.push(m);
      }
    }
  };
  for (const [key, value] of Object.entries(p)) {
    if (isObj(value)) nested(value, (m) => m[key] as Obj);
    if (isObj(value)) {
      for (const [sub, inner] of Object.entries(value)) {
        if (Array.isArray(inner) && isObj(inner[0])) nested(inner[0], (m) => ((m[key] as Obj)[sub] as Json[])[0] as Obj);
      }
    }
  }
  const owner = isObj(p['repository']) ? p['repository']['owner'] : undefined;
  if (isObj(owner)) nested(owner, (m) => (m['repository'] as Obj)['owner'] as Obj);
  return out;
}

describe('signed deliveries of every event, with odd payloads: 2xx or 4xx, never a 500 or a stack', () => {
  let app: AppHarness;
  const failures: string[] = [];
  let sent = 0;
  const counts = { ok: 0, refused: 0 };

  /** Well-formed deliveries Lilypad acts on, and what they were answered: they must reach a handler. */
  const wellFormed: string[] = [];

  async function post(event: string, body: string, what: string, handled = false): Promise<void> {
    const sig = webhookSignatures(app.gh.webhookSecret, body);
    const res = await fetch(app.webhookUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': randomUUID(), 'x-hub-signature-256': sig.sha256 },
      body,
    });
    const text = await res.text();
    sent++;
    if (handled && (res.status !== 200 || text.trim() !== 'ok')) wellFormed.push(`${what}: ${res.status} ${text.slice(0, 200)}`);
    if (res.status >= 200 && res.status < 300) {
      counts.ok++;
      return;
    }
    if (res.status >= 400 && res.status < 500) {
      counts.refused++;
      // One sentence: a short message on one line.
      const message = (JSON.parse(text) as { message?: unknown }).message;
      if (typeof message !== 'string' || message.includes('\n') || message.length > 300 || !/[.)]$/.test(message)) {
        failures.push(`${what}: ${res.status} without a one-sentence message: ${text.slice(0, 200)}`);
      }
      return;
    }
    failures.push(`${what}: ${res.status} ${text.slice(0, 200)}`);
  }

  async function postAll(items: Array<{ event: string; body: string; what: string; handled?: boolean }>): Promise<void> {
    const queue = [...items];
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        for (let item = queue.shift(); item; item = queue.shift()) await post(item.event, item.body, item.what, item.handled);
      }),
    );
  }

  before(async () => {
    app = await startApp({ book: {}, role: 'web', env: { LOG_LEVEL: 'debug' } });
  });
  after(async () => {
    await app?.stop();
    if (!app) return;
    const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    const keys = await redis.keys(`${app.prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  test('app.yml subscribes to the events this test sends', () => {
    assert.deepEqual([...SUBSCRIBED].sort(), ['check_run', 'check_suite', 'issue_comment', 'issues', 'pull_request', 'pull_request_review', 'pull_request_review_comment', 'status']);
  });

  test('subscribed events and the events every app gets, as GitHub sends them and mutated', async () => {
    const items: Array<{ event: string; body: string; what: string; handled?: boolean }> = [];
    for (const event of [...SUBSCRIBED, ...TO_EVERY_APP]) {
      for (const base of basesFor(event)) {
        const acted = event === 'status' || (ACTED_ON[event] ?? []).includes(String(base['action']));
        mutations(event, base).forEach((m, i) => items.push({ event, body: JSON.stringify(m), what: `${event}.${String(base['action'] ?? '')} #${i}`, handled: acted && i === 0 }));
      }
    }
    await postAll(items);
    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} of ${sent} deliveries failed`);
    // The guard lets every well-formed delivery of an action Lilypad acts on through to its handler.
    assert.deepEqual(wellFormed, []);
    assert.ok(items.filter((i) => i.handled).length >= 12);
    // Both answers occur: deliveries acted on or ignored, and payloads refused for their shape.
    assert.ok(counts.ok > 0 && counts.refused > 0, JSON.stringify(counts));
  });

  test('a body that is not a JSON object gets a 4xx with one sentence', async () => {
    for (const event of ['issues', 'installation', 'status']) {
      for (const body of ['[]', '"x"', 'null', '1', 'true', '[{"action":"labeled"}]', '{"action":']) {
        const sig = webhookSignatures(app.gh.webhookSecret, body);
        const res = await fetch(app.webhookUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-github-event': event, 'x-github-delivery': randomUUID(), 'x-hub-signature-256': sig.sha256 },
          body,
        });
        const text = await res.text();
        assert.ok(res.status >= 400 && res.status < 500, `${event} ${body}: ${res.status} ${text}`);
        const message = (JSON.parse(text) as { message?: unknown }).message;
        assert.equal(typeof message, 'string', text);
      }
    }
  });

  test('an unsigned or wrongly signed delivery is refused (400, 401) before any shape check, without a stack in the log', async () => {
    const body = JSON.stringify({ action: 'labeled', installation: { id: 1 } });
    for (const [signature, status] of [
      [undefined, 400],
      [webhookSignatures('not-the-secret', body).sha256, 401],
      ['sha256=00', 401],
    ] as const) {
      const res = await fetch(app.webhookUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-github-event': 'issues', 'x-github-delivery': randomUUID(), ...(signature ? { 'x-hub-signature-256': signature } : {}) },
        body,
      });
      const text = await res.text();
      assert.equal(res.status, status, text);
      assert.doesNotMatch(text, /repository/, 'a stranger learns nothing about the shape check');
    }
  });

  test('the log holds no stack trace and no error line; an ignored delivery leaves one debug line', async () => {
    await new Promise((r) => setTimeout(r, 300));
    const lines = app.logs().split('\n').filter((l) => l.startsWith('{'));
    const stacks = lines.filter((l) => /TypeError|\\n\s+at |"stack"/.test(l));
    assert.deepEqual(stacks.slice(0, 3).map((l) => l.slice(0, 400)), [], `${stacks.length} log lines with a stack`);
    const errors = lines.filter((l) => (JSON.parse(l) as { level: number }).level >= 50);
    assert.deepEqual(errors.slice(0, 3).map((l) => l.slice(0, 400)), [], `${errors.length} error lines`);
    assert.ok(lines.some((l) => /"level":20.*webhook ignored/.test(l)), 'an ignored delivery is logged at debug');
  });
});
