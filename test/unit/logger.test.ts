import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../../src/observability/logger.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';

const GH = 'ghs_16C7e42F292c6912E7710c838347Ae178B4a';

test('log lines never carry secrets, by key or by value', () => {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'lilypad-log-')), 'x.log');
  const apiKey = 'my-model-server-key-123456';
  const log = createLogger({ level: 'info', secrets: [apiKey], destination: file });
  log.info({ token: 'plain-token-value', headers: { authorization: 'Bearer abc' }, note: `key is ${apiKey}` }, `pushing with ${GH}`);
  log.info({ nested: { list: [`x ${GH} y`] } }, 'nested');
  const text = readFileSync(file, 'utf8');
  assert.ok(!text.includes(apiKey));
  assert.ok(!text.includes(GH));
  assert.ok(!text.includes('plain-token-value'));
  assert.ok(!text.includes('Bearer abc'));
  assert.match(text, /pushing with \[REDACTED\]/);
  assert.match(text, /key is \[REDACTED\]/);
});

test('the secret scanner finds token shapes and exact values and names them without echoing', () => {
  const scanner = new SecretScanner(['exact-secret-value']);
  assert.deepEqual(scanner.findings('nothing here'), []);
  const hits = scanner.findings(`a ${GH} and exact-secret-value and -----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----`);
  assert.equal(hits.length, 3);
  for (const h of hits) assert.ok(!h.includes('exact-secret-value') && !h.includes(GH.slice(4)));
  assert.equal(scanner.redact(`x github_pat_${'A'.repeat(60)} y`), 'x [REDACTED] y');
  assert.deepEqual(scanner.redactDeep({ a: [GH], b: 1 }), { a: ['[REDACTED]'], b: 1 });
  assert.equal(scanner.redact('could not reach http://admin:hunter2@127.0.0.1:30000/v1'), 'could not reach http://[REDACTED]@127.0.0.1:30000/v1');
  assert.equal(scanner.redact('see https://github.com/a/b and mailto:x@y.z'), 'see https://github.com/a/b and mailto:x@y.z');
});
