// A Redis that requires a password (REDIS_URL=redis://:password@host:port), against the real app
// and `lilypad doctor` (issue 26, L4): the app connects and runs jobs through it, and the password
// is in no log line, doctor line, run record (what the run pages show), stored file or published
// text. The scripted model writes the bare password into the change and prints the URL, as a
// model that found them in a repository might; the change is refused as holding a secret.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { RunStore } from '../../src/observability/run-store.ts';
import { startApp, waitFor, type AppHarness, type ScriptBook } from '../support/app-harness.ts';
import { CALC_REPO } from '../support/fixture-repo.ts';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const OWNER = 'acme';
const PW = `Rq-${randomBytes(12).toString('hex')}`;
const TITLE = 'add() returns the wrong result';
const RUN_DEADLINE = 180_000;

function doctor(env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'doctor'], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), OPENAI_BASE_URL: 'http://127.0.0.1:9/v1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.on('close', () => resolve(out)));
}

/** Every key of the Redis and what it holds, as text (compressed run records are read below). */
async function redisText(client: Redis): Promise<string> {
  const parts: string[] = [];
  for (const key of await client.keys('*')) {
    const type = await client.type(key);
    const value =
      type === 'string' ? await client.getBuffer(key)
      : type === 'hash' ? await client.hgetall(key)
      : type === 'list' ? await client.lrange(key, 0, -1)
      : type === 'set' ? await client.smembers(key)
      : type === 'zset' ? await client.zrange(key, 0, -1)
      : type === 'stream' ? await client.xrange(key, '-', '+')
      : null;
    parts.push(key, Buffer.isBuffer(value) ? value.toString('latin1') : JSON.stringify(value));
  }
  return parts.join('\n');
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
}

describe('a Redis with a password', () => {
  let redis: PrivateRedis;
  let app: AppHarness;

  before(async () => {
    redis = await startPrivateRedis({ password: PW });
  });
  after(async () => {
    await app?.stop();
    await redis?.close();
  });

  test('doctor names the Redis without its password, in a warning and in a failure', async () => {
    const where = `redis://127.0.0.1:${redis.port}`;
    await redis.client.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const out = await doctor({ REDIS_URL: redis.url });
      const line = out.split('\n').find((l) => l.includes(' redis:')) ?? '';
      assert.match(line, new RegExp(`^WARN redis: Redis \\S+ at ${where} uses maxmemory-policy allkeys-lru$`), out);
      assert.ok(!out.includes(PW), out);
    } finally {
      await redis.client.config('SET', 'maxmemory-policy', 'noeviction');
    }
    const wrong = 'not-the-password-0451';
    const refused = await doctor({ REDIS_URL: `redis://lilypad:${wrong}@127.0.0.1:${redis.port}` });
    const line = refused.split('\n').find((l) => l.includes(' redis:')) ?? '';
    assert.match(line, new RegExp(`^FAIL redis: cannot reach ${where}: `), refused);
    assert.ok(!refused.includes(wrong), refused);
  });

  test('the app connects through it; a change holding the password is refused, and the password is nowhere', async () => {
    const book: ScriptBook = {
      [TITLE]: [
        {
          toolCalls: [
            { name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } },
            { name: 'Write', arguments: { file_path: 'ops.md', content: `The queue's password is ${PW}.\n` } },
          ],
        },
        { toolCalls: [{ name: 'Bash', arguments: { command: 'cat ops.md' } }] },
        { content: `Fixed add(). The queue lives at redis://:${PW}@127.0.0.1:${redis.port}.` },
      ],
    };
    app = await startApp({ book, env: { REDIS_URL: redis.url } });
    app.gh.createInstallation({ login: OWNER, type: 'Organization' });
    app.gh.createUser('alice');
    app.gh.createRepo(OWNER, 'calc', { files: { ...CALC_REPO, '.github/lilypad.yml': 'test: python3 -m unittest -q\n' } });
    app.gh.addCollaborator(OWNER, 'calc', 'alice', 'maintain');

    const issue = app.gh.createIssue(OWNER, 'calc', { title: TITLE, body: 'add(2, 3) gives -1.', author: 'alice' });
    await app.send('issues', app.gh.labelIssue(OWNER, 'calc', issue.number, 'lilypad', 'alice'));
    const status = () => app.gh.comments(OWNER, 'calc', issue.number).find((c) => c.body.startsWith('<!-- lilypad:status -->'))?.body ?? '';
    await waitFor(() => /Done|Failed|No change/.test(status()), 'the issue run', RUN_DEADLINE);
    // The job went through this Redis's queue and ran to its end: the app is connected.
    assert.match(status(), /looks like a secret[\s\S]*a secret value held by this process/, status());
    assert.deepEqual(app.gh.pulls(OWNER, 'calc'), [], 'nothing was published');

    // The run record, which is what the run pages show: the steps are there, redacted.
    const store = new RunStore(redis.client, { prefix: app.prefix, retentionDays: 1, maxBytes: 8 * 1024 * 1024 });
    const runs = await store.list();
    assert.equal(runs.length, 1);
    await waitFor(async () => (await store.summary(runs[0]!.runId))?.finishedAt != null, 'the run record to be finished', 30_000);
    const record = JSON.stringify((await store.load(runs[0]!.runId))?.view);
    assert.match(record, /cat ops\.md/, 'the record holds the steps');
    assert.match(record, /\[REDACTED\]/);
    assert.ok(!record.includes(PW), 'the run record holds the password');

    const texts: Array<[string, string]> = [
      ['the log', app.logs()],
      ['Redis', await redisText(redis.client)],
      ['the comments', JSON.stringify(app.gh.comments(OWNER, 'calc', issue.number))],
      ...filesUnder(app.dataDir).map((f): [string, string] => [f, readFileSync(f, 'latin1')]),
    ];
    for (const [where, text] of texts) assert.ok(!text.includes(PW), `the password is in ${where}`);
    assert.match(app.logs(), /job failed/, 'the log was read');
  });
});
