import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TestCa {
  /** The CA certificate, PEM. */
  cert: string;
  /** Its private key, PEM (only ever used to sign on this machine). */
  key: string;
  subject: string;
}

/** A self-signed CA made with openssl for one test (EC P-256: fast to generate). */
export function makeTestCa(commonName: string, opts: { days?: number } = {}): TestCa {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-test-ca-'));
  try {
    execFileSync(
      'openssl',
      [
        'req', '-x509', '-new', '-nodes',
        '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
        '-keyout', path.join(dir, 'key.pem'),
        '-out', path.join(dir, 'cert.pem'),
        '-days', String(opts.days ?? 30),
        '-subj', `/O=Lilypad Tests/CN=${commonName}`,
        '-addext', 'basicConstraints=critical,CA:TRUE',
        '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    return {
      cert: readFileSync(path.join(dir, 'cert.pem'), 'utf8'),
      key: readFileSync(path.join(dir, 'key.pem'), 'utf8'),
      subject: `O=Lilypad Tests, CN=${commonName}`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A leaf certificate for `host`, signed by `ca`, with its key (for a TLS server in a test). */
export function issueServerCert(ca: TestCa, host: string): { cert: string; key: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-test-leaf-'));
  const f = (n: string) => path.join(dir, n);
  try {
    execFileSync('openssl', ['req', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-keyout', f('key.pem'), '-out', f('req.pem'), '-subj', `/CN=${host}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    writeFileSync(f('ca.pem'), ca.cert);
    writeFileSync(f('ca.key'), ca.key);
    writeFileSync(f('ext.cnf'), `subjectAltName=DNS:${host}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
    execFileSync('openssl', ['x509', '-req', '-in', f('req.pem'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '7', '-extfile', f('ext.cnf'), '-out', f('cert.pem')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    return { cert: readFileSync(f('cert.pem'), 'utf8'), key: readFileSync(f('key.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
