import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/config/env.ts';
import { extraCaEnvironment, prepareExtraCa, SANDBOX_CA_BUNDLE_FILE, SANDBOX_EXTRA_CA_FILE } from '../../src/sandbox/extra-ca.ts';
import { certificatesMissingFrom, scanPem } from '../../src/sandbox/pem.ts';
import { makeTestCa, type TestCa } from '../support/test-ca.ts';

let dir: string;
let corp: TestCa;
let other: TestCa;
const file = (name: string, text: string) => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};
const configError = (pattern: RegExp) => (err: unknown) => {
  assert.ok(err instanceof ConfigError, `a ConfigError, got ${String(err)}`);
  assert.match(err.message, pattern);
  return true;
};

before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-extra-ca-'));
  corp = makeTestCa('Corp TLS Inspection');
  other = makeTestCa('Corp Registry');
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('prepareExtraCa (LILYPAD_EXTRA_CA_CERTS at start)', () => {
  test('unset or blank: null, nothing is read', () => {
    assert.equal(prepareExtraCa({}), null);
    assert.equal(prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: '  ' }), null);
  });

  test('a bundle keeps only its certificates, re-encoded, in order', () => {
    const p = file('bundle.pem', `# our CAs\n${corp.cert}\nsome text between\n${other.cert}`);
    const ca = prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: p });
    assert.ok(ca);
    assert.equal(ca.path, p);
    assert.deepEqual(
      ca.certificates.map((c) => c.subject),
      [corp.subject, other.subject],
    );
    assert.doesNotMatch(ca.pem, /our CAs|text between/);
    assert.equal(ca.pem.match(/BEGIN CERTIFICATE/g)?.length, 2);
    assert.ok(ca.certificates.every((c) => c.ca));
  });

  test('a relative path is read against the working directory, and the error shows where it looked', () => {
    file('rel.pem', corp.cert);
    assert.equal(prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: 'rel.pem' }, dir)?.path, path.join(dir, 'rel.pem'));
    assert.throws(
      () => prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: 'nope.pem' }, dir),
      configError(new RegExp(`LILYPAD_EXTRA_CA_CERTS=nope\\.pem: ${path.join(dir, 'nope.pem').replace(/[.]/g, '\\.')} does not exist; set LILYPAD_EXTRA_CA_CERTS to the PEM file`)),
    );
  });

  test('a directory is refused with the file to give instead', () => {
    const d = path.join(dir, 'certs.d');
    mkdirSync(d, { recursive: true });
    assert.throws(() => prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: d }), configError(/is a directory; give the PEM file itself/));
  });

  test('a file without a certificate is refused, with how to convert DER', () => {
    const p = file('empty.pem', 'not a certificate\n');
    assert.throws(() => prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: p }), configError(/contains no PEM certificate.*openssl x509 -inform der/));
  });

  test('a private key in the file is refused: it would reach the sandbox', () => {
    const p = file('with-key.pem', `${corp.cert}${corp.key}`);
    assert.throws(() => prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: p }), configError(/holds a private key \(PRIVATE KEY\).*never reach/));
  });

  test('a certificate block that does not parse is named by its position', () => {
    const broken = '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n';
    const p = file('broken.pem', `${corp.cert}${broken}`);
    assert.throws(() => prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: p }), configError(/block\(s\) 2 that do not parse as X\.509/));
  });

  test('a huge file is refused as the wrong file', () => {
    const p = file('huge.pem', 'x'.repeat(5 * 1024 * 1024));
    assert.throws(() => prepareExtraCa({ LILYPAD_EXTRA_CA_CERTS: p }), configError(/is 5\.0 MiB; a CA bundle is a few hundred KiB/));
  });
});

describe('the environment setup gets', () => {
  test('node adds the extra file to its roots; every one-file tool gets the combined bundle', () => {
    assert.deepEqual(extraCaEnvironment(), {
      NODE_EXTRA_CA_CERTS: SANDBOX_EXTRA_CA_FILE,
      SSL_CERT_FILE: SANDBOX_CA_BUNDLE_FILE,
      REQUESTS_CA_BUNDLE: SANDBOX_CA_BUNDLE_FILE,
      PIP_CERT: SANDBOX_CA_BUNDLE_FILE,
      CURL_CA_BUNDLE: SANDBOX_CA_BUNDLE_FILE,
      CARGO_HTTP_CAINFO: SANDBOX_CA_BUNDLE_FILE,
      GIT_SSL_CAINFO: SANDBOX_CA_BUNDLE_FILE,
    });
  });

  test('the files live in a root-owned folder outside the repository and the home folder', () => {
    assert.equal(path.posix.dirname(SANDBOX_EXTRA_CA_FILE), '/etc/lilypad-ca');
    assert.equal(path.posix.dirname(SANDBOX_CA_BUNDLE_FILE), '/etc/lilypad-ca');
  });
});

describe('PEM scanning', () => {
  test('private keys are reported by kind and never returned as certificates', () => {
    const scan = scanPem(`${corp.key}${corp.cert}-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n`);
    assert.deepEqual(scan.privateKeys, ['PRIVATE KEY', 'RSA PRIVATE KEY']);
    assert.equal(scan.certificates.length, 1);
  });

  test('missing-from compares by fingerprint and drops repeats', () => {
    const a = scanPem(corp.cert).certificates;
    const b = scanPem(`${other.cert}${other.cert}${corp.cert}`).certificates;
    assert.deepEqual(
      certificatesMissingFrom(b, a).map((c) => c.subject),
      [other.subject],
    );
  });
});
