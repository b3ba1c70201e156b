import { test } from 'node:test';
import assert from 'node:assert/strict';

import { SecretScanner } from '../../src/observability/secrets.ts';

const GH = `ghp_${'A1b2'.repeat(9)}`;
const PAT = `github_pat_${'x9_Y'.repeat(12)}`;
const SK = `sk-${'q'.repeat(40)}`;
const KEY = '-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----';
const HELD = 'held-secret-value-123';

test('every kind of secret is redacted and named, in short and long texts alike', () => {
  const scanner = new SecretScanner([HELD]);
  const filler = 'plain observation text without anything special\n'.repeat(2000);
  for (const [secret, shown] of [
    [GH, GH],
    [PAT, PAT],
    [SK, SK],
    [KEY, 'MIIEow'],
    ['MIIEowIBAAKCAQEAq7Zx\nAbC+/w3Rt9Lk==\n-----END RSA PRIVATE KEY-----', 'AbC+/w3Rt9Lk'],
    [HELD, HELD],
    ['https://user:hunter2pass@example.invalid/repo.git', 'hunter2pass'],
    ['HTTPS://User:Pa55word@host.invalid', 'Pa55word'],
  ] as const) {
    for (const text of [`x ${secret} y`, `${filler}${secret}${filler}`]) {
      const out = scanner.redact(text);
      assert.ok(!out.includes(shown), `${shown.slice(0, 12)} survived`);
      assert.ok(out.includes('[REDACTED]'));
      assert.ok(scanner.findings(text).length > 0, `${shown.slice(0, 12)} not found`);
    }
  }
});

test('text without secrets comes back unchanged, and deep redaction reaches nested records', () => {
  const scanner = new SecretScanner([HELD]);
  const clean = 'def add(a, b):\n    return a - b  # see http://example.invalid/x and sk-short\n';
  assert.equal(scanner.redact(clean), clean);
  assert.deepEqual(scanner.findings(clean), []);
  const record = { tools: [{ observation: `cat .env\nTOKEN=${GH}\n`, arguments: JSON.stringify({ command: `echo ${HELD}` }) }], assistant: { content: SK } };
  const out = scanner.redactDeep(record);
  assert.equal(JSON.stringify(out).includes(GH) || JSON.stringify(out).includes(HELD) || JSON.stringify(out).includes(SK), false);
  assert.equal(record.assistant.content, SK, 'the input is not modified');
});
