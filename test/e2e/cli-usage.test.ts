import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startModelServer, type ModelServer } from '../support/model-server.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
// A directory without a .env, so that only what each test passes is configured.
const CWD = mkdtempSync(path.join(os.tmpdir(), 'lilypad-cli-usage-'));

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

function lilypad(args: string[], env: Record<string, string> = {}): Promise<Outcome> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lilypad.js'), ...args], {
    cwd: CWD,
    env: { PATH: process.env['PATH'] ?? '', HOME: CWD, LILYPAD_DATA_DIR: path.join(CWD, 'data'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** Exit 2, nothing on stdout, exactly one line on stderr, and no trace of a JavaScript exception. */
function assertUsageLine(r: Outcome, what: string): string {
  const detail = `${what}\nexit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
  assert.equal(r.code, 2, detail);
  assert.equal(r.stdout, '', detail);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, detail);
  assert.doesNotMatch(r.stderr, /TypeError|ERR_PARSE_ARGS|\n\s+at /, detail);
  return lines[0]!;
}

describe('lilypad usage errors', () => {
  const cases: Array<{ args: string[]; help: string }> = [
    { args: ['run', '--repo', '.', '--title', 't', '--bogus'], help: 'lilypad run --help' },
    { args: ['doctor', '--bogus'], help: 'lilypad doctor --help' },
    { args: ['eval', 'run', '--bogus'], help: 'lilypad eval run --help' },
    { args: ['eval', 'collect', '--bogus'], help: 'lilypad eval collect --help' },
    { args: ['start', '--bogus'], help: 'lilypad start --help' },
    { args: ['web', '--bogus'], help: 'lilypad web --help' },
    { args: ['worker', '--bogus'], help: 'lilypad worker --help' },
  ];
  for (const { args, help } of cases) {
    test(`an unknown option to \`lilypad ${args[0] === 'eval' ? `eval ${args[1]}` : args[0]}\` is one line naming it and the help, exit 2`, async () => {
      const line = assertUsageLine(await lilypad(args), args.join(' '));
      assert.ok(line.startsWith(`${help.replace(/ --help$/, '')}: `), line);
      assert.match(line, /unknown option --bogus/);
      assert.ok(line.includes(help), line);
    });
  }

  test('an unknown option before any command names it and shows the commands', async () => {
    const r = await lilypad(['--bogus']);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr.split('\n')[0], 'lilypad: unknown option --bogus');
    assert.match(r.stderr, /^Usage: lilypad <command>/m);
    assert.doesNotMatch(r.stderr, /TypeError|\n\s+at /);
  });

  test('a short unknown option is named as given', async () => {
    const line = assertUsageLine(await lilypad(['doctor', '-x']), 'doctor -x');
    assert.match(line, /unknown option -x\b/);
  });

  test('an option without its value, a value for a flag and a stray argument are one line each', async () => {
    assert.match(assertUsageLine(await lilypad(['run', '--repo']), 'run --repo'), /--repo needs a value.*lilypad run --help/);
    assert.match(assertUsageLine(await lilypad(['doctor', '--json=yes']), 'doctor --json=yes'), /--json takes no value.*lilypad doctor --help/);
    assert.match(assertUsageLine(await lilypad(['doctor', 'extra']), 'doctor extra'), /unexpected argument "extra".*lilypad doctor --help/);
    assert.match(assertUsageLine(await lilypad(['worker', 'extra']), 'worker extra'), /unexpected argument "extra".*lilypad worker --help/);
  });

  test('a bad number is a one-line usage error before any work starts', async () => {
    const run = assertUsageLine(await lilypad(['run', '--repo', '.', '--title', 't', '--max-steps', 'abc']), 'run --max-steps abc');
    assert.match(run, /--max-steps must be a positive whole number, got "abc".*lilypad run --help/);
    const time = assertUsageLine(await lilypad(['run', '--repo', '.', '--title', 't', '--max-time', '1.5']), 'run --max-time 1.5');
    assert.match(time, /--max-time must be a positive whole number, got "1.5"/);
    const ev = assertUsageLine(await lilypad(['eval', 'run', '--instances', 'x.jsonl', '--workers', '0']), 'eval run --workers 0');
    assert.match(ev, /--workers must be a positive whole number, got "0".*lilypad eval run --help/);
    const steps = assertUsageLine(await lilypad(['eval', 'run', '--instances', 'x.jsonl', '--max-steps', 'abc']), 'eval run --max-steps abc');
    assert.match(steps, /--max-steps must be a positive whole number, got "abc"/);
  });

  test('--help still prints the usage and exits 0', async () => {
    for (const args of [['run', '--help'], ['doctor', '-h'], ['eval', 'run', '--help'], ['start', '--help']]) {
      const r = await lilypad(args);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stdout, /^Usage: lilypad /, args.join(' '));
    }
  });
});

describe('lilypad --version', () => {
  for (const args of [['--version'], ['-V'], ['version']]) {
    test(`\`lilypad ${args[0]}\` prints the version from package.json`, async () => {
      const r = await lilypad(args);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${VERSION}\n`);
      assert.equal(r.stderr, '');
    });
  }
});

describe('lilypad doctor --base-url --model', () => {
  const servers: ModelServer[] = [];
  after(async () => {
    for (const s of servers) await s.close();
  });

  test('the flags override OPENAI_BASE_URL and LILYPAD_MODEL for the model checks', async () => {
    const server = await startModelServer({ modelId: 'frognano-4b', script: [{ toolCalls: [{ name: 'Glob', arguments: { pattern: '**/*.py' } }] }] });
    servers.push(server);
    const env = { OPENAI_BASE_URL: 'http://127.0.0.1:9/v1', LILYPAD_MODEL: 'not-served', REDIS_URL: 'redis://127.0.0.1:6379' };
    const r = await lilypad(['doctor', '--base-url', server.url, '--model', 'frognano-4b'], env);
    const out = r.stdout + r.stderr;
    const endpoint = out.split('\n').find((l) => l.includes(' model endpoint:')) ?? '';
    assert.match(endpoint, /^OK /, out);
    assert.ok(endpoint.includes(`${server.url.replace(/\/+$/, '')} serves frognano-4b`), endpoint);
    assert.ok(!out.includes('127.0.0.1:9/'), `the environment's endpoint must not be checked:\n${out}`);
    assert.equal(server.chatRequests().at(-1)?.model, 'frognano-4b', 'the canary asks for the --model');

    // Without the flags the environment is used, which is what the flags replaced.
    const plain = await lilypad(['doctor'], env);
    assert.match(plain.stdout, /FAIL model endpoint: GET http:\/\/127\.0\.0\.1:9\/v1\/models failed/);
  });

  test('a --base-url that is not an http(s) URL is a one-line usage error', async () => {
    const line = assertUsageLine(await lilypad(['doctor', '--base-url', 'localhost:30000']), 'doctor --base-url localhost:30000');
    assert.match(line, /--base-url must be an http\(s\) URL/);
  });
});
