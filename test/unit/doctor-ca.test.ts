import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { extraCaCheck } from '../../src/cli/doctor-ca.ts';
import { loadEnv } from '../../src/config/env.ts';
import { scanPem, type PemCertificate } from '../../src/sandbox/pem.ts';
import { makeTestCa, type TestCa } from '../support/test-ca.ts';

// A machine in miniature: its local CA folder, its system store, and what the sandbox image trusts.
let root: string;
let anchors: string;
let emptyAnchors: string;
let systemStore: string;
let publicCa: TestCa;
let inspecting: TestCa;
let registry: TestCa;
let expiredCa: TestCa;
let imageStore: PemCertificate[];

const put = (rel: string, text: string) => {
  const p = path.join(root, rel);
  mkdirSync(path.dirname(p), { recursive: true });
  writeFileSync(p, text);
  return p;
};
const env = (vars: Record<string, string> = {}) => loadEnv(vars);

before(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'lilypad-doctor-ca-'));
  publicCa = makeTestCa('Public Root');
  inspecting = makeTestCa('Corp TLS Inspection');
  registry = makeTestCa('Corp Registry');
  expiredCa = makeTestCa('Old Corp CA', { days: 1 });
  anchors = path.join(root, 'anchors');
  emptyAnchors = path.join(root, 'no-anchors');
  mkdirSync(emptyAnchors);
  systemStore = put('ssl/ca-certificates.crt', `${publicCa.cert}${inspecting.cert}${registry.cert}`);
  imageStore = scanPem(publicCa.cert).certificates;
});
after(() => rmSync(root, { recursive: true, force: true }));

describe('doctor: would setup fail for want of LILYPAD_EXTRA_CA_CERTS?', () => {
  test('a machine with no CA of its own needs none', () => {
    const r = extraCaCheck(env(), { env: {}, anchorDirs: [emptyAnchors], systemStore, imageStore: scanPem(`${publicCa.cert}${inspecting.cert}${registry.cert}`).certificates });
    assert.equal(r.status, 'OK');
    assert.match(r.detail, /none needed/);
  });

  test('a CA in the local CA folder and the setting unset: a warning that names it and the file to use', () => {
    const file = put('anchors/corp.crt', inspecting.cert);
    const r = extraCaCheck(env(), { env: {}, anchorDirs: [anchors], systemStore });
    rmSync(file);
    assert.equal(r.status, 'WARN');
    assert.match(r.detail, /trusts the CA "O=Lilypad Tests, CN=Corp TLS Inspection" \(.*anchors\/corp\.crt\), which the sandbox does not/);
    assert.match(r.detail, /self-signed certificate in certificate chain/);
    assert.equal(r.fix, `set LILYPAD_EXTRA_CA_CERTS=${file}`);
  });

  test('with the image store known, the system store and NODE_EXTRA_CA_CERTS count, public CAs do not', () => {
    const r = extraCaCheck(env(), { env: { NODE_EXTRA_CA_CERTS: systemStore }, anchorDirs: [emptyAnchors], systemStore, imageStore });
    assert.equal(r.status, 'WARN');
    assert.match(r.detail, /2 CAs "O=Lilypad Tests, CN=Corp TLS Inspection", "O=Lilypad Tests, CN=Corp Registry"/);
    assert.doesNotMatch(r.detail, /Public Root/);
    assert.equal(r.fix, `set LILYPAD_EXTRA_CA_CERTS=${systemStore}`);
  });

  test('CAs spread over several files: the fix says how to make one', () => {
    const a = put('anchors/a.crt', inspecting.cert);
    const b = put('anchors/sub/b.crt', registry.cert);
    const r = extraCaCheck(env(), { env: {}, anchorDirs: [anchors], systemStore });
    rmSync(anchors, { recursive: true });
    assert.equal(r.status, 'WARN');
    assert.match(r.fix ?? '', new RegExp(`cat ${a} ${b} > `));
  });

  test('the setting holding every CA the machine adds: OK, with what setup trusts', () => {
    const extra = put('extra.pem', `${inspecting.cert}${registry.cert}`);
    const r = extraCaCheck(env({ LILYPAD_EXTRA_CA_CERTS: extra }), { env: { NODE_EXTRA_CA_CERTS: systemStore }, anchorDirs: [emptyAnchors], systemStore, imageStore });
    assert.equal(r.status, 'OK');
    assert.match(r.detail, new RegExp(`setup trusts 2 certificate\\(s\\) from ${extra}, beyond the sandbox image's own: 2 CAs "O=Lilypad Tests, CN=Corp TLS Inspection"`));
  });

  test('an expired CA of its own is pointed out', () => {
    const extra = put('old.pem', expiredCa.cert);
    const inTwoDays = new Date(Date.now() + 2 * 86_400_000);
    const r = extraCaCheck(env({ LILYPAD_EXTRA_CA_CERTS: extra }), { env: {}, anchorDirs: [emptyAnchors], systemStore, imageStore: scanPem(`${publicCa.cert}${inspecting.cert}${registry.cert}`).certificates, now: inTwoDays });
    assert.equal(r.status, 'OK');
    assert.match(r.detail, /expired: "O=Lilypad Tests, CN=Old Corp CA"/);
  });

  test('the setting lacking one of them: a warning naming the one missing', () => {
    const extra = put('partial.pem', inspecting.cert);
    const r = extraCaCheck(env({ LILYPAD_EXTRA_CA_CERTS: extra }), { env: {}, anchorDirs: [emptyAnchors], systemStore, imageStore });
    assert.equal(r.status, 'WARN');
    assert.match(r.detail, /lacks the CA "O=Lilypad Tests, CN=Corp Registry", which this machine trusts/);
    assert.doesNotMatch(r.detail, /lacks.*Corp TLS Inspection/);
  });

  test('a bad file in the setting fails the check with the reason', () => {
    const bad = put('bad.pem', 'nothing here');
    const r = extraCaCheck(env({ LILYPAD_EXTRA_CA_CERTS: bad }), { env: {}, anchorDirs: [emptyAnchors], systemStore });
    assert.equal(r.status, 'FAIL');
    assert.match(r.detail, /LILYPAD_EXTRA_CA_CERTS=.*bad\.pem contains no PEM certificate/);
  });

  test('NODE_EXTRA_CA_CERTS naming the system store, without the image store to compare: a cautious warning', () => {
    const r = extraCaCheck(env(), { env: { NODE_EXTRA_CA_CERTS: systemStore }, anchorDirs: [emptyAnchors], systemStore });
    assert.equal(r.status, 'WARN');
    assert.match(r.detail, /NODE_EXTRA_CA_CERTS=.* is set on this machine/);
  });

  test('setup without network needs no CA', () => {
    put('anchors/corp.crt', inspecting.cert);
    const r = extraCaCheck(env({ LILYPAD_SETUP_EGRESS: 'none' }), { env: {}, anchorDirs: [anchors], systemStore });
    rmSync(anchors, { recursive: true });
    assert.equal(r.status, 'OK');
    assert.match(r.detail, /setup has no network/);
  });
});
