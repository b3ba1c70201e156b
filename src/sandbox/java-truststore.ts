import type { PemCertificate } from './pem.ts';
import type { Sandbox } from './sandbox.ts';

/**
 * Java reads neither SSL_CERT_FILE nor a PEM bundle: it trusts a keystore. For Maven and Gradle
 * in setup, the JDK's own trust store is copied and the extra certificates are imported into the
 * copy, which JAVA_TOOL_OPTIONS then names for every JVM setup starts.
 */

export const SANDBOX_JAVA_TRUSTSTORE = '/tmp/lilypad-ca-java/truststore';
// The JDK's well-known default password for its trust store; it protects nothing secret.
const STORE_PASSWORD = 'changeit';
const TIMEOUT_S = 300;

// Runs as the sandbox user. Exit 10: no keytool (an image without Java, nothing to do).
const SCRIPT = String.raw`
set -eu
keytool=$(command -v keytool) || exit 10
home=$(dirname "$(dirname "$(readlink -f "$keytool")")")
src="$home/lib/security/cacerts"
[ -r "$src" ] || { echo "no readable trust store at $src" >&2; exit 11; }
store="$1"; pass="$2"; shift 2
rm -rf "$(dirname "$store")"
mkdir -p -m 0700 "$(dirname "$store")"
cp "$src" "$store"
chmod 0600 "$store"
n=0
for pem in "$@"; do
  n=$((n + 1))
  printf '%s' "$pem" | keytool -importcert -noprompt -keystore "$store" -storepass "$pass" -alias "lilypad-extra-$n" >/dev/null
done
`;

export interface JavaTrustStoreResult {
  env?: Record<string, string>;
  /** Why there is no trust store although the image has Java. */
  note?: string;
}

/** Builds the trust store in the sandbox when the image has a JDK and there is anything to add. */
export async function installJavaTrustStore(sandbox: Sandbox, added: readonly PemCertificate[]): Promise<JavaTrustStoreResult> {
  if (added.length === 0) return {};
  const res = await sandbox.exec(['/bin/bash', '-c', SCRIPT, 'java-truststore', SANDBOX_JAVA_TRUSTSTORE, STORE_PASSWORD, ...added.map((c) => c.pem)], {
    cwd: '/',
    timeoutSeconds: TIMEOUT_S,
    what: 'building the Java trust store',
  });
  if (res.exitCode === 10) return {};
  if (res.exitCode !== 0) {
    const why = res.timedOut ? `timed out after ${TIMEOUT_S} s` : `exit ${res.exitCode}: ${res.stderr.toString('utf8').trim().slice(-300)}`;
    return { note: `Java tools in setup will not trust LILYPAD_EXTRA_CA_CERTS: building their trust store failed (${why})` };
  }
  return {
    env: { JAVA_TOOL_OPTIONS: `-Djavax.net.ssl.trustStore=${SANDBOX_JAVA_TRUSTSTORE} -Djavax.net.ssl.trustStorePassword=${STORE_PASSWORD}` },
  };
}
