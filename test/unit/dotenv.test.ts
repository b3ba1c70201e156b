import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadDotEnv, parseDotEnv, updateDotEnv } from '../../src/config/dotenv.ts';
import { ConfigError } from '../../src/config/env.ts';

const PEM = '-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAbC+/=\n-----END RSA PRIVATE KEY-----\n';

test('KEY=value lines, export, comments, quotes, escapes and multi-line values', () => {
  const text = [
    '# a comment',
    '',
    'export A=1',
    'B = two words # trailing comment',
    "C='literal \\n $x'",
    'D="tab\\there \\"q\\" back\\\\slash"',
    `PRIVATE_KEY="${PEM}"`, // what Probot wrote: the PEM's real newlines inside double quotes
    'E=',
    'F=a#b',
  ].join('\n');
  const m = parseDotEnv(text);
  assert.equal(m.get('A'), '1');
  assert.equal(m.get('B'), 'two words');
  assert.equal(m.get('C'), 'literal \\n $x');
  assert.equal(m.get('D'), 'tab\there "q" back\\slash');
  assert.equal(m.get('PRIVATE_KEY'), PEM);
  assert.equal(m.get('E'), '');
  assert.equal(m.get('F'), 'a#b');
});

test('malformed lines are errors naming the file, the line and the fix', () => {
  const cases: Array<[string, RegExp]> = [
    ['A=1\njust words', /x\.env, line 2: "just words" has no KEY=/],
    ['1A=x', /line 1: "1A" is not a variable name/],
    ['A="open\nB=2', /line 1: the value of A opens a " quote that is never closed/],
    ['A="x" y', /line 1: unexpected text after the quoted value of A/],
  ];
  for (const [text, re] of cases) {
    assert.throws(() => parseDotEnv(text, 'x.env'), (err: unknown) => err instanceof ConfigError && re.test(err.message), text);
  }
});

test('updateDotEnv replaces and appends, keeps other lines, round-trips values and is private to the user', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dotenv-'));
  const file = path.join(dir, '.env');
  writeFileSync(file, `# mine\nOPENAI_BASE_URL=http://gpu:30000/v1\nPRIVATE_KEY="${PEM}"\nAPP_ID=1\n`);
  updateDotEnv(file, { APP_ID: '42', PRIVATE_KEY: `${PEM}x`, WEBHOOK_SECRET: 'a "b" \\ c' });
  const text = readFileSync(file, 'utf8');
  assert.match(text, /^# mine\nOPENAI_BASE_URL=http:\/\/gpu:30000\/v1\n/);
  const m = parseDotEnv(text);
  assert.equal(m.get('APP_ID'), '42');
  assert.equal(m.get('PRIVATE_KEY'), `${PEM}x`);
  assert.equal(m.get('WEBHOOK_SECRET'), 'a "b" \\ c');
  assert.equal(m.get('OPENAI_BASE_URL'), 'http://gpu:30000/v1');
  assert.equal(text.match(/PRIVATE_KEY=/g)?.length, 1);
  assert.equal(statSync(file).mode & 0o777, 0o600);
});

test('loadDotEnv: the environment wins; no file is fine; a named missing file is an error', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dotenv-'));
  assert.deepEqual(loadDotEnv({}, dir), { file: null, applied: [] });
  writeFileSync(path.join(dir, '.env'), 'A=file\nB=file\n');
  const env: NodeJS.ProcessEnv = { A: 'env' };
  const res = loadDotEnv(env, dir);
  assert.deepEqual(res.applied, ['B']);
  assert.equal(env['A'], 'env');
  assert.equal(env['B'], 'file');
  assert.throws(() => loadDotEnv({ LILYPAD_ENV_FILE: 'nope.env' }, dir), /LILYPAD_ENV_FILE=nope\.env does not exist/);
});
