import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startGitHubStandin } from '../support/github-standin/index.ts';
import { startModelServer, type ModelServer, type ModelServerOptions } from '../support/model-server.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

function doctor(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), 'doctor'], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: os.tmpdir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })));
}

const line = (out: string, name: string) => out.split('\n').find((l) => l.includes(` ${name}:`)) ?? '';

describe('lilypad doctor', () => {
  const servers: ModelServer[] = [];
  const serve = async (opts: ModelServerOptions) => {
    const s = await startModelServer(opts);
    servers.push(s);
    return s;
  };
  after(async () => {
    for (const s of servers) await s.close();
  });

  test('a sandbox runtime the engine does not have fails, naming the setting and the fix', async () => {
    const server = await serve({ script: [{ toolCalls: [{ name: 'Glob', arguments: { pattern: '**/*.py' } }] }] });
    const { code, out } = await doctor({ OPENAI_BASE_URL: server.url, LILYPAD_SANDBOX_RUNTIME: 'nosuchruntime' });
    assert.equal(code, 1);
    assert.match(line(out, 'sandbox runtime'), /^FAIL sandbox runtime: LILYPAD_SANDBOX_RUNTIME=nosuchruntime: the Docker engine has no runtime named nosuchruntime/);
    const fine = await doctor({ OPENAI_BASE_URL: server.url });
    assert.match(line(fine.out, 'sandbox runtime'), /^OK +sandbox runtime: the engine's default/);
    assert.match(line(fine.out, 'file listing'), /^OK +file listing: `ls -l` and `stat` work/);
  });

  test('under gVisor, doctor says whether `ls -l` works in the sandbox, as a container under it shows', async () => {
    const server = await serve({ script: [{ toolCalls: [{ name: 'Glob', arguments: { pattern: '**/*.py' } }] }] });
    const { out } = await doctor({ OPENAI_BASE_URL: server.url, REDIS_URL: 'redis://127.0.0.1:6379', LILYPAD_SANDBOX_RUNTIME: 'runsc' });
    assert.match(line(out, 'sandbox runtime'), /^OK +sandbox runtime: runsc/, out);
    // What a plain container under the same runtime says, independently of Lilypad.
    const direct = await new Promise<number | null>((resolve) => {
      const child = spawn('docker', ['run', '--rm', '--runtime=runsc', '--network=none', 'lilypad-sandbox:latest', 'ls', '-ld', '/'], { stdio: 'ignore' });
      child.on('close', resolve);
    });
    if (direct === 0) assert.match(line(out, 'file listing'), /^OK +file listing/, out);
    else {
      assert.match(line(out, 'file listing'), /^WARN file listing: `ls -l` fails in the sandbox \(.*Invalid argument\)/, out);
      assert.match(out, /newer gVisor \(runsc\) release/, out);
    }
  });

  test('with REDIS_URL unset, doctor checks the private Redis that lilypad start would run', async () => {
    const server = await serve({ script: [{ toolCalls: [{ name: 'Glob', arguments: { pattern: '**/*.py' } }] }] });
    const { out } = await doctor({ OPENAI_BASE_URL: server.url, LILYPAD_DATA_DIR: path.join(os.tmpdir(), `doctor-${process.pid}`) });
    assert.match(line(out, 'redis'), /^OK +redis: REDIS_URL is unset: lilypad start will run a private redis-server/);
    const noRedis = await doctor({ OPENAI_BASE_URL: server.url, PATH: '/nonexistent', LILYPAD_REDIS_IMAGE: 'lilypad-redis:no-such-tag' });
    assert.match(line(noRedis.out, 'redis'), /^FAIL redis: REDIS_URL is unset, and there is neither a redis-server/);
  });

  test('a correctly served model passes every check', async () => {
    const server = await serve({ script: [{ toolCalls: [{ name: 'Glob', arguments: { pattern: '**/*.py' } }] }] });
    const { code, out } = await doctor({ OPENAI_BASE_URL: server.url, REDIS_URL: 'redis://127.0.0.1:6379' });
    assert.equal(code, 0, out);
    for (const name of ['docker engine', 'sandbox image', 'redis', 'model endpoint', 'tool-call parser', 'reasoning parser', 'context length', 'canary tool call']) {
      assert.match(line(out, name), /^OK /, `${name}: ${out}`);
    }
    assert.match(line(out, 'sandbox image'), /uid 1000, Python 3/);
    // The canary declares one tool and asks for a call to it.
    const canary = server.chatRequests().at(-1)!;
    assert.equal((canary.tools ?? []).length, 1);
  });

  test('SGLang without the qwen3_coder parser fails with the flag to fix it', async () => {
    const server = await serve({
      serverArgs: { tool_call_parser: null, reasoning_parser: 'qwen3' },
      script: [{ content: '<tool_call>\n<function=Glob>\n<parameter=pattern>\n**/*.py\n</parameter>\n</function>\n</tool_call>' }],
    });
    const { code, out } = await doctor({ OPENAI_BASE_URL: server.url });
    assert.equal(code, 1, out);
    assert.match(line(out, 'tool-call parser'), /^FAIL .*tool_call_parser=none/);
    assert.match(out, /fix: restart SGLang with --tool-call-parser qwen3_coder/);
    assert.match(line(out, 'canary tool call'), /^FAIL .*as text in content/);
  });

  test('vLLM with a short context window warns about the budget', async () => {
    const server = await serve({ flavour: 'vllm', contextLength: 32768, script: [{ toolCalls: [{ name: 'Glob', arguments: { pattern: '*' } }] }] });
    const { code, out } = await doctor({ OPENAI_BASE_URL: server.url });
    assert.equal(code, 0, out);
    assert.match(line(out, 'context length'), /^WARN .*32768.*131072/);
    assert.match(out, /--max-model-len/);
    assert.equal(line(out, 'tool-call parser'), '', 'vLLM has no /get_server_info');
    assert.match(line(out, 'canary tool call'), /^OK /);
  });

  test('unreachable services and a missing image fail with their fixes', async () => {
    const { code, out } = await doctor({
      OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
      LILYPAD_SANDBOX_IMAGE: 'lilypad-missing:never',
      REDIS_URL: 'redis://127.0.0.1:9',
    });
    assert.equal(code, 1, out);
    assert.match(line(out, 'sandbox image'), /^FAIL .*lilypad-missing:never is not present/);
    assert.match(out, /npm run images/);
    assert.match(line(out, 'redis'), /^FAIL /);
    assert.match(line(out, 'model endpoint'), /^FAIL .*127\.0\.0\.1:9/);
  });

  test('the GitHub App: not registered (and where to register), credentials GitHub accepts or refuses, installed or not', async () => {
    const model = await serve({});
    const gh = await startGitHubStandin({ appSlug: 'lilypad' });
    try {
      const base = { OPENAI_BASE_URL: model.url, GHE_HOST: gh.host, GHE_PROTOCOL: 'http' };
      const fixOf = (out: string, name: string) => out.split('\n')[out.split('\n').indexOf(line(out, name)) + 1] ?? '';

      const unregistered = await doctor(base);
      assert.match(line(unregistered.out, 'github app'), /^WARN github app: not registered yet/);
      assert.match(fixOf(unregistered.out, 'github app'), /fix: run `npm start` and open http:\/\/localhost:3000\/setup/);
      assert.match(line(unregistered.out, 'public address'), /^WARN public address: GitHub cannot reach http:\/\/localhost:3000/);

      const creds = { ...base, APP_ID: String(gh.appId), PRIVATE_KEY: gh.privateKeyPem, WEBHOOK_SECRET: gh.webhookSecret, LILYPAD_PUBLIC_URL: 'https://lilypad.example.com' };
      const nowhere = await doctor(creds);
      assert.match(line(nowhere.out, 'github app'), /^WARN github app: lilypad \(id \d+\) at http:\/\/127\.0\.0\.1:\d+\/api\/v3 is installed nowhere/);
      assert.match(fixOf(nowhere.out, 'github app'), /installations\/new/);
      assert.equal(line(nowhere.out, 'public address'), '');

      gh.createInstallation({ login: 'acme', type: 'Organization' });
      const installed = await doctor(creds);
      assert.match(line(installed.out, 'github app'), /^OK   github app: lilypad \(id \d+\) at .*, installed on acme$/);

      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      const wrongKey = await doctor({ ...creds, PRIVATE_KEY: privateKey.export({ type: 'pkcs1', format: 'pem' }).toString() });
      assert.equal(wrongKey.code, 1, wrongKey.out);
      assert.match(line(wrongKey.out, 'github app'), /^FAIL github app: GET .*\/app as app \d+ failed: HTTP 401/);
      assert.match(fixOf(wrongKey.out, 'github app'), /APP_ID and PRIVATE_KEY do not belong together/);
    } finally {
      await gh.close();
    }
  });
});
