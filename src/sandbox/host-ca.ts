import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { certificatesMissingFrom, scanPem, type PemCertificate } from './pem.ts';

/**
 * Signs that this machine trusts a certificate authority of its own (a TLS-inspecting proxy, an
 * internal registry) which a sandbox would not: then setup's downloads fail with "self-signed
 * certificate in certificate chain" unless LILYPAD_EXTRA_CA_CERTS gives the sandbox that CA too.
 */

/** Where distributions keep the CAs an administrator added (Debian/Ubuntu, Fedora/RHEL, Arch). */
export const LOCAL_ANCHOR_DIRS = ['/usr/local/share/ca-certificates', '/etc/pki/ca-trust/source/anchors', '/etc/ca-certificates/trust-source/anchors'];
export const HOST_SYSTEM_STORE = '/etc/ssl/certs/ca-certificates.crt';
const MAX_FILE_BYTES = 4 * 1024 * 1024;
const MAX_FILES = 200;

export interface HostCaSource {
  /** Where the certificates were found: a file, or `NODE_EXTRA_CA_CERTS=<file>`. */
  source: string;
  /** The file to point LILYPAD_EXTRA_CA_CERTS at for them. */
  file: string;
  certificates: PemCertificate[];
}

export interface HostCaInputs {
  env: NodeJS.ProcessEnv;
  anchorDirs?: readonly string[];
  systemStore?: string;
  /** What the sandbox image trusts already; unknown (undefined): only the added anchors count. */
  imageStore?: readonly PemCertificate[] | undefined;
}

/**
 * CA certificates this machine trusts beyond the sandbox image: files in the local anchor
 * folders, NODE_EXTRA_CA_CERTS, and (when the image's store is known) the CAs of the machine's
 * system store that the image lacks. Each source keeps only what the image does not already have.
 */
export function findHostExtraCas(inputs: HostCaInputs): HostCaSource[] {
  const known = inputs.imageStore ?? [];
  const found: HostCaSource[] = [];
  const add = (source: string, file: string, certs: PemCertificate[]) => {
    const fresh = certificatesMissingFrom(certs.filter((c) => c.ca), known);
    if (fresh.length > 0) found.push({ source, file, certificates: fresh });
  };
  for (const dir of inputs.anchorDirs ?? LOCAL_ANCHOR_DIRS) {
    for (const file of listFiles(dir)) add(file, file, readCertificates(file));
  }
  const nodeExtra = inputs.env['NODE_EXTRA_CA_CERTS']?.trim();
  // Without the image's store, a NODE_EXTRA_CA_CERTS that names the whole system store would count
  // every public CA: then only its being set is reported, by the anchors or by the caller.
  if (nodeExtra && (inputs.imageStore || !isSystemStore(nodeExtra, inputs.systemStore))) {
    add(`NODE_EXTRA_CA_CERTS=${nodeExtra}`, nodeExtra, readCertificates(nodeExtra));
  }
  if (inputs.imageStore) {
    const store = inputs.systemStore ?? HOST_SYSTEM_STORE;
    add(store, store, readCertificates(store));
  }
  return found;
}

/** Every distinct certificate across the sources, first source first. */
export function distinctCertificates(sources: readonly HostCaSource[]): PemCertificate[] {
  return certificatesMissingFrom(
    sources.flatMap((s) => s.certificates),
    [],
  );
}

function isSystemStore(file: string, systemStore = HOST_SYSTEM_STORE): boolean {
  return path.resolve(file) === path.resolve(systemStore);
}

function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, depth: number) => {
    let names: string[];
    try {
      names = readdirSync(d).sort();
    } catch {
      return;
    }
    for (const name of names) {
      if (out.length >= MAX_FILES) return;
      const full = path.join(d, name);
      let isDir = false;
      try {
        isDir = statSync(full).isDirectory();
      } catch {
        continue;
      }
      if (isDir) {
        if (depth < 3) walk(full, depth + 1);
      } else {
        out.push(full);
      }
    }
  };
  walk(dir, 0);
  return out;
}

function readCertificates(file: string): PemCertificate[] {
  try {
    if (statSync(file).size > MAX_FILE_BYTES) return [];
    return scanPem(readFileSync(file, 'utf8')).certificates;
  } catch {
    return [];
  }
}
