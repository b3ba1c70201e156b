import os from 'node:os';
import type Docker from 'dockerode';
import { ConfigError, type Env } from '../config/env.ts';
import { EXTRA_CA_SETTING, prepareExtraCa, readSystemStore, type ExtraCa } from '../sandbox/extra-ca.ts';
import { distinctCertificates, findHostExtraCas, HOST_SYSTEM_STORE, LOCAL_ANCHOR_DIRS, type HostCaInputs, type HostCaSource } from '../sandbox/host-ca.ts';
import { certificatesMissingFrom, type PemCertificate } from '../sandbox/pem.ts';
import { Sandbox } from '../sandbox/sandbox.ts';
import type { CheckResult } from './doctor.ts';

const NAME = 'extra CA certificates';
const SHOWN_SUBJECTS = 4;

/**
 * Would setup fail for want of LILYPAD_EXTRA_CA_CERTS? Checks the setting's file, then compares
 * what this machine trusts of its own (local CA folders, NODE_EXTRA_CA_CERTS and, with the
 * sandbox image's store in hand, the system store) with what the sandbox and the setting give.
 */
export function extraCaCheck(env: Env, inputs: HostCaInputs & { cwd?: string; now?: Date }): CheckResult {
  let extra: ExtraCa | null;
  try {
    extra = prepareExtraCa(env, inputs.cwd);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { name: NAME, status: 'FAIL', detail: err.message, fix: `fix the file, or leave ${EXTRA_CA_SETTING} empty` };
  }
  if (env.LILYPAD_SETUP_EGRESS.trim() === 'none') {
    return { name: NAME, status: 'OK', detail: `setup has no network (LILYPAD_SETUP_EGRESS=none)${extra ? `; ${EXTRA_CA_SETTING} is not used` : ''}` };
  }
  const sources = findHostExtraCas(inputs);
  const needed = distinctCertificates(sources);
  if (extra) {
    const missing = certificatesMissingFrom(needed, extra.certificates);
    if (missing.length > 0) {
      return {
        name: NAME,
        status: 'WARN',
        detail: `${EXTRA_CA_SETTING}=${extra.path} lacks ${describe(missing)}, which this machine trusts (${where(sources, missing)})`,
        fix: `add them to ${extra.path}, or set ${suggestion(sources, needed)}`,
      };
    }
    // Of a whole store, only what the image lacks is news; expired public roots are normal in one.
    const own = inputs.imageStore ? certificatesMissingFrom(extra.certificates, inputs.imageStore) : extra.certificates;
    const beyond = inputs.imageStore ? `, beyond the sandbox image's own: ${own.length > 0 ? describe(own) : 'none'}` : `: ${describe(own)}`;
    return { name: NAME, status: 'OK', detail: `setup trusts ${extra.certificates.length} certificate(s) from ${extra.path}${beyond}${expired(own, inputs.now)}` };
  }
  if (needed.length > 0) {
    return {
      name: NAME,
      status: 'WARN',
      detail:
        `this machine trusts ${describe(needed)} (${where(sources, needed)}), which the sandbox does not: ` +
        'behind a TLS-inspecting proxy, setup downloads fail with "self-signed certificate in certificate chain"',
      fix: `set ${suggestion(sources, needed)}`,
    };
  }
  const nodeExtra = inputs.env['NODE_EXTRA_CA_CERTS']?.trim();
  if (nodeExtra && !inputs.imageStore) {
    return {
      name: NAME,
      status: 'WARN',
      detail: `NODE_EXTRA_CA_CERTS=${nodeExtra} is set on this machine, and the sandbox image's own store could not be read to compare`,
      fix: `if setup downloads fail with SELF_SIGNED_CERT_IN_CHAIN, set ${EXTRA_CA_SETTING}=${nodeExtra}`,
    };
  }
  const looked = [...LOCAL_ANCHOR_DIRS, 'NODE_EXTRA_CA_CERTS', ...(inputs.imageStore ? [`${HOST_SYSTEM_STORE} against the sandbox image's store`] : [])];
  return { name: NAME, status: 'OK', detail: `none needed: this machine trusts no CA of its own (looked at ${looked.join(', ')})` };
}

/** The sandbox image's trusted certificates, read in a hardened sandbox with no network; undefined if that fails. */
export async function readImageCaStore(docker: Docker, env: Env): Promise<PemCertificate[] | undefined> {
  let sandbox: Sandbox | undefined;
  try {
    sandbox = await Sandbox.create(docker, {
      image: env.LILYPAD_SANDBOX_IMAGE,
      workdir: env.LILYPAD_SANDBOX_WORKDIR,
      user: env.LILYPAD_SANDBOX_USER,
      allowRootImage: env.LILYPAD_ALLOW_ROOT_IMAGES,
      memoryMb: 256,
      cpus: 1,
      pids: 64,
      network: 'none',
      runId: `doctor-ca-${process.pid}-${Date.now()}`,
      workerId: os.hostname(),
    });
    return (await readSystemStore(sandbox))?.certificates ?? [];
  } catch {
    return undefined;
  } finally {
    await sandbox?.destroy();
  }
}

function describe(certs: readonly PemCertificate[]): string {
  const names = certs.slice(0, SHOWN_SUBJECTS).map((c) => `"${c.subject}"`);
  const more = certs.length > SHOWN_SUBJECTS ? ` and ${certs.length - SHOWN_SUBJECTS} more` : '';
  return `${certs.length === 1 ? 'the CA' : `${certs.length} CAs`} ${names.join(', ')}${more}`;
}

function where(sources: readonly HostCaSource[], certs: readonly PemCertificate[]): string {
  const wanted = new Set(certs.map((c) => c.fingerprint));
  return sources
    .filter((s) => s.certificates.some((c) => wanted.has(c.fingerprint)))
    .map((s) => s.source)
    .join(', ');
}

/** One file that holds every needed certificate, else how to make one. */
function suggestion(sources: readonly HostCaSource[], needed: readonly PemCertificate[]): string {
  const covering = sources.find((s) => sourceHoldsAll(s, needed));
  if (covering) return `${EXTRA_CA_SETTING}=${covering.file}`;
  const files = [...new Set(sources.map((s) => s.file))];
  return `${EXTRA_CA_SETTING} to one PEM file holding them all (e.g. \`cat ${files.join(' ')} > /etc/lilypad/extra-ca.pem\`), or to ${HOST_SYSTEM_STORE} if this machine's store has them`;
}

function sourceHoldsAll(source: HostCaSource, needed: readonly PemCertificate[]): boolean {
  const have = new Set(source.certificates.map((c) => c.fingerprint));
  return needed.every((c) => have.has(c.fingerprint));
}

function expired(certs: readonly PemCertificate[], now = new Date()): string {
  const old = certs.filter((c) => c.validTo < now);
  return old.length > 0 ? `; expired: ${old.map((c) => `"${c.subject}"`).join(', ')}` : '';
}
