import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config/env.ts';
import { SandboxError } from './errors.ts';
import { installJavaTrustStore } from './java-truststore.ts';
import { certificatesMissingFrom, scanPem, type PemCertificate } from './pem.ts';
import type { Sandbox } from './sandbox.ts';
import { tarArchive } from './tar-entries.ts';

/**
 * LILYPAD_EXTRA_CA_CERTS: an organisation's own certificate authorities (a TLS-inspecting proxy,
 * an internal registry) for the SETUP phase of a run, the only phase with network.
 *
 *   const ca = prepareExtraCa(env);            // at start: null when unset, ConfigError when bad
 *   ...
 *   const caEnv = ca ? await installExtraCa(sandbox, ca.pem) : {};
 *   // run the setup commands with { ...proxyEnv, ...caEnv }; the agent and the tests get neither.
 *
 * installExtraCa copies the certificates into the sandbox as data (the engine writes them, owned
 * by root, so setup commands cannot change them) next to a combined bundle: the image's own
 * system store plus the extra certificates, for the tools that take exactly one file.
 */

export const EXTRA_CA_SETTING = 'LILYPAD_EXTRA_CA_CERTS';
/** Where the certificates go inside the sandbox (root-owned, world-readable). */
export const SANDBOX_CA_DIR = '/etc/lilypad-ca';
export const SANDBOX_EXTRA_CA_FILE = `${SANDBOX_CA_DIR}/extra.pem`;
export const SANDBOX_CA_BUNDLE_FILE = `${SANDBOX_CA_DIR}/bundle.pem`;

/** More than this is not a CA bundle (Debian's whole store is about 220 KiB). */
const MAX_BUNDLE_BYTES = 4 * 1024 * 1024;
const STORE_READ_TIMEOUT_S = 30;
// The system store of the distributions sandbox images are made from: Debian and Ubuntu,
// Fedora/RHEL, Alpine and openSUSE.
const SYSTEM_STORES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/cert.pem', '/etc/ssl/ca-bundle.pem'];

export interface ExtraCa {
  /** The absolute path it was read from. */
  path: string;
  /** Only the certificates, re-encoded: comments, trust settings and anything else are dropped. */
  pem: string;
  certificates: PemCertificate[];
}

/**
 * Reads and checks LILYPAD_EXTRA_CA_CERTS once, at start. Null when it is unset; a ConfigError
 * naming the setting and the fix when the file is missing, unreadable, not PEM, or holds a
 * private key (which must never be copied into a sandbox).
 */
export function prepareExtraCa(env: { LILYPAD_EXTRA_CA_CERTS?: string | undefined }, cwd = process.cwd()): ExtraCa | null {
  const value = env.LILYPAD_EXTRA_CA_CERTS?.trim();
  if (!value) return null;
  const file = path.resolve(cwd, value);
  const text = readBundle(value, file);
  const scan = scanPem(text);
  const bad = (problem: string, fix: string) => new ConfigError(`${EXTRA_CA_SETTING}=${value}: ${file} ${problem}; ${fix}`);
  if (scan.privateKeys.length > 0) {
    throw bad(
      `holds a private key (${scan.privateKeys.join(', ')})`,
      'give a file with the CA certificates only: sandboxes run repository code with it, and a key must never reach them',
    );
  }
  if (scan.unreadable.length > 0) {
    throw bad(
      `has certificate block(s) ${scan.unreadable.join(', ')} that do not parse as X.509`,
      'check the file with `openssl storeutl -noout -certs FILE`, or convert OpenSSL "TRUSTED CERTIFICATE" blocks with `openssl x509 -in FILE -out FILE.pem`',
    );
  }
  if (scan.certificates.length === 0) {
    throw bad(
      'contains no PEM certificate (no -----BEGIN CERTIFICATE----- block)',
      'give the PEM file of your CA certificates; a DER (binary) certificate converts with `openssl x509 -inform der -in FILE -out FILE.pem`',
    );
  }
  return { path: file, pem: scan.certificates.map((c) => c.pem).join(''), certificates: scan.certificates };
}

function readBundle(value: string, file: string): string {
  const fail = (problem: string, fix: string) => new ConfigError(`${EXTRA_CA_SETTING}=${value}: ${file} ${problem}; ${fix}`);
  let size: number;
  try {
    const stat = statSync(file);
    if (stat.isDirectory()) {
      throw fail('is a directory', 'give the PEM file itself, e.g. /usr/local/share/ca-certificates/corp.crt or this machine\'s whole store /etc/ssl/certs/ca-certificates.crt');
    }
    size = stat.size;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw fail('does not exist', `set ${EXTRA_CA_SETTING} to the PEM file of your organisation's CA certificates on this machine, or leave it empty`);
    }
    throw fail(`cannot be read (${(err as Error).message})`, 'make it readable by the user Lilypad runs as');
  }
  if (size > MAX_BUNDLE_BYTES) {
    throw fail(`is ${(size / 1024 / 1024).toFixed(1)} MiB`, 'a CA bundle is a few hundred KiB at most: is this the right file?');
  }
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw fail(`cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, 'make it readable by the user Lilypad runs as (e.g. chmod a+r)');
  }
}

/**
 * The environment that makes setup's tools trust the installed certificates. Node adds
 * NODE_EXTRA_CA_CERTS to its own roots; the rest take one file and get the combined bundle, so
 * that public registries stay trusted too.
 */
export function extraCaEnvironment(files: { extra: string; bundle: string } = { extra: SANDBOX_EXTRA_CA_FILE, bundle: SANDBOX_CA_BUNDLE_FILE }): Record<string, string> {
  return {
    NODE_EXTRA_CA_CERTS: files.extra, // node, npm, yarn, pnpm
    SSL_CERT_FILE: files.bundle, // OpenSSL's default (python's ssl, Go, Ruby, uv with native TLS)
    REQUESTS_CA_BUNDLE: files.bundle, // requests, and pip's vendored copy of it
    PIP_CERT: files.bundle, // pip
    CURL_CA_BUNDLE: files.bundle, // curl, which does not read SSL_CERT_FILE
    CARGO_HTTP_CAINFO: files.bundle, // cargo
    GIT_SSL_CAINFO: files.bundle, // git over https
  };
}

export interface InstallExtraCaOptions {
  /** Told what could not be done and was skipped (no system store in the image, no Java trust store). */
  onNote?: (note: string) => void;
}

/**
 * Installs the certificates into a running sandbox for its setup phase and returns the
 * environment for the setup commands. Call it after the sandbox is created and before the first
 * setup command; never pass the result to the agent or the tests.
 */
export async function installExtraCa(sandbox: Sandbox, pem: string, opts: InstallExtraCaOptions = {}): Promise<Record<string, string>> {
  const extra = scanPem(pem).certificates;
  if (extra.length === 0) throw new SandboxError('installExtraCa was given no certificate; pass the pem that prepareExtraCa returned');
  const store = await readSystemStore(sandbox);
  if (!store) {
    opts.onNote?.(`the sandbox image ${sandbox.options.image} has no system CA store (${SYSTEM_STORES.join(', ')}): the bundle for setup holds only ${EXTRA_CA_SETTING}`);
  }
  const known = store?.certificates ?? [];
  const added = certificatesMissingFrom(extra, known);
  const bundle = [...known, ...added].map((c) => c.pem).join('');
  const archive = tarArchive([
    { kind: 'dir', path: SANDBOX_CA_DIR.slice(1), mode: 0o755 },
    { kind: 'file', path: SANDBOX_EXTRA_CA_FILE.slice(1), mode: 0o644, content: extra.map((c) => c.pem).join('') },
    { kind: 'file', path: SANDBOX_CA_BUNDLE_FILE.slice(1), mode: 0o644, content: bundle },
  ]);
  try {
    await sandbox.container.putArchive(archive, { path: '/' });
  } catch (err) {
    throw new SandboxError(`copying ${EXTRA_CA_SETTING} into the sandbox failed: ${(err as Error).message}`, { cause: err });
  }
  const env = extraCaEnvironment();
  const java = await installJavaTrustStore(sandbox, added);
  if (java.env) Object.assign(env, java.env);
  if (java.note) opts.onNote?.(java.note);
  return env;
}

/** The image's own trusted certificates (read before any repository code has run), or undefined if it has none. */
export async function readSystemStore(sandbox: Sandbox): Promise<{ path: string; certificates: PemCertificate[] } | undefined> {
  const script = 'for f in "$@"; do if [ -f "$f" ] && [ -r "$f" ]; then printf "%s\\n" "$f"; exec cat -- "$f"; fi; done; exit 3';
  const res = await sandbox.exec(['/bin/sh', '-c', script, 'read-store', ...SYSTEM_STORES], {
    cwd: '/',
    timeoutSeconds: STORE_READ_TIMEOUT_S,
    keepBytes: MAX_BUNDLE_BYTES,
    what: "reading the sandbox image's CA store",
  });
  if (res.exitCode !== 0 || res.stdoutBytes > res.stdout.length) return undefined;
  const text = res.stdout.toString('utf8');
  const newline = text.indexOf('\n');
  return { path: text.slice(0, newline), certificates: scanPem(text.slice(newline + 1)).certificates };
}
