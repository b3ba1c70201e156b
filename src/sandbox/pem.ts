import { X509Certificate } from 'node:crypto';

/** One certificate out of a PEM bundle, re-encoded so that nothing else in the file travels with it. */
export interface PemCertificate {
  /** `-----BEGIN CERTIFICATE-----` … `-----END CERTIFICATE-----\n`, as re-encoded by Node. */
  pem: string;
  /** SHA-256 fingerprint (AA:BB:…): what two bundles are compared by. */
  fingerprint: string;
  /** The subject on one line, e.g. `CN=Example Corp TLS Inspection, O=Example Corp`. */
  subject: string;
  /** Whether the certificate says it is a certificate authority (basicConstraints CA:TRUE). */
  ca: boolean;
  validTo: Date;
}

export interface PemScan {
  certificates: PemCertificate[];
  /** 1-based positions of CERTIFICATE blocks that did not parse. */
  unreadable: number[];
  /** Kinds of private-key blocks found (`PRIVATE KEY`, `RSA PRIVATE KEY`, …). */
  privateKeys: string[];
}

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;

/**
 * Reads every PEM block in `text`. Certificates (the `CERTIFICATE` and OpenSSL's `TRUSTED
 * CERTIFICATE` label are both common in bundles) are parsed and re-encoded; private keys are only
 * reported, so that a caller can refuse a bundle that would carry one into a sandbox.
 */
export function scanPem(text: string): PemScan {
  const certificates: PemCertificate[] = [];
  const unreadable: number[] = [];
  const privateKeys: string[] = [];
  let position = 0;
  for (const match of text.matchAll(BLOCK)) {
    const label = match[1] ?? '';
    if (label.includes('PRIVATE KEY')) {
      privateKeys.push(label);
      continue;
    }
    if (label !== 'CERTIFICATE' && label !== 'TRUSTED CERTIFICATE') continue;
    position++;
    const parsed = parseCertificate(match[0].replace(/TRUSTED CERTIFICATE/g, 'CERTIFICATE'));
    if (parsed) certificates.push(parsed);
    else unreadable.push(position);
  }
  return { certificates, unreadable, privateKeys };
}

function parseCertificate(block: string): PemCertificate | undefined {
  try {
    const cert = new X509Certificate(block);
    return {
      pem: cert.toString(),
      fingerprint: cert.fingerprint256,
      subject: cert.subject.split('\n').join(', '),
      ca: cert.ca,
      validTo: new Date(cert.validTo),
    };
  } catch {
    // OpenSSL's TRUSTED CERTIFICATE carries trust settings after the DER; Node cannot read those.
    return undefined;
  }
}

/** The certificates of `extra` whose fingerprint `known` does not have, in order, without repeats. */
export function certificatesMissingFrom(extra: readonly PemCertificate[], known: readonly PemCertificate[]): PemCertificate[] {
  const seen = new Set(known.map((c) => c.fingerprint));
  const out: PemCertificate[] = [];
  for (const cert of extra) {
    if (seen.has(cert.fingerprint)) continue;
    seen.add(cert.fingerprint);
    out.push(cert);
  }
  return out;
}
