import os from 'node:os';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { installExtraCa, SANDBOX_CA_BUNDLE_FILE, SANDBOX_EXTRA_CA_FILE } from '../../src/sandbox/extra-ca.ts';
import { SANDBOX_JAVA_TRUSTSTORE } from '../../src/sandbox/java-truststore.ts';
import { scanPem } from '../../src/sandbox/pem.ts';
import { Sandbox } from '../../src/sandbox/sandbox.ts';
import { TEST_IMAGE, testDocker } from '../support/sandbox-harness.ts';
import { issueServerCert, makeTestCa, type TestCa } from '../support/test-ca.ts';

// A real sandbox with no network. Inside it, an HTTPS server on 127.0.0.1 presents a certificate
// from a CA made for this test, as a TLS-inspecting proxy would; every client setup uses must
// refuse it without the variables installExtraCa returns and accept it with them.

const PORT = 8443;
const URL_BASE = `https://localhost:${PORT}`;
const SERVER = String.raw`
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_HEAD = do_GET
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[3])), H)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
`;
const JAVA_FETCH = String.raw`
public class Fetch {
  public static void main(String[] args) throws Exception {
    var c = (java.net.HttpURLConnection) new java.net.URI(args[0]).toURL().openConnection();
    try {
      System.out.println("HTTP " + c.getResponseCode());
    } catch (javax.net.ssl.SSLException e) {
      System.out.println("TLS " + e.getMessage());
      System.exit(2);
    }
  }
}
`;
const SETUP_VARIABLES = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'PIP_CERT', 'CURL_CA_BUNDLE', 'CARGO_HTTP_CAINFO', 'GIT_SSL_CAINFO', 'JAVA_TOOL_OPTIONS'];

describe('LILYPAD_EXTRA_CA_CERTS in a real sandbox', () => {
  let sandbox: Sandbox;
  let ca: TestCa;
  let setupEnv: Record<string, string>;
  const notes: string[] = [];

  const sh = async (script: string, env: Record<string, string> = {}) => {
    const res = await sandbox.exec(['/bin/bash', '-c', `${script} 2>&1`], { cwd: '/tmp', env, timeoutSeconds: 120 });
    return { code: res.exitCode, out: res.stdout.toString('utf8') };
  };

  before(async () => {
    ca = makeTestCa('Lilypad Test Inspection CA');
    const leaf = issueServerCert(ca, 'localhost');
    sandbox = await Sandbox.create(await testDocker(), {
      image: TEST_IMAGE,
      workdir: '/testbed',
      memoryMb: 1536,
      cpus: 1,
      pids: 256,
      network: 'none',
      runId: `extra-ca-${process.pid}-${Date.now()}`,
      workerId: os.hostname(),
    });
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const start = await sh(
      'mkdir -p /tmp/tls && cd /tmp/tls && printf %s "$LEAF" | base64 -d > leaf.pem && printf %s "$KEY" | base64 -d > key.pem && ' +
        'printf %s "$SRV" | base64 -d > server.py && printf %s "$JAVA" | base64 -d > Fetch.java && ' +
        `(setsid python3 server.py leaf.pem key.pem ${PORT} >/tmp/tls/server.log 2>&1 < /dev/null &) && ` +
        `for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/${PORT}) 2>/dev/null && exit 0; sleep 0.1; done; cat /tmp/tls/server.log; exit 1`,
      { LEAF: b64(leaf.cert), KEY: b64(leaf.key), SRV: b64(SERVER), JAVA: b64(JAVA_FETCH) },
    );
    assert.equal(start.code, 0, `the HTTPS server in the sandbox did not start: ${start.out}`);
    setupEnv = await installExtraCa(sandbox, ca.cert, { onNote: (n) => notes.push(n) });
  });
  after(async () => {
    await sandbox?.destroy();
  });

  test('returns every setup variable, a Java trust store included, with nothing to report', () => {
    assert.deepEqual(Object.keys(setupEnv).sort(), [...SETUP_VARIABLES].sort());
    assert.match(setupEnv['JAVA_TOOL_OPTIONS'] ?? '', new RegExp(`-Djavax\\.net\\.ssl\\.trustStore=${SANDBOX_JAVA_TRUSTSTORE}`));
    assert.deepEqual(notes, []);
  });

  test('the files are root-owned data the sandbox user can read but not change', async () => {
    // Python's os.stat, not coreutils' stat: some gVisor releases refuse the latter's statx.
    const owners = `import os, pwd, sys\nfor p in sys.argv[1:]:\n    st = os.stat(p)\n    print(pwd.getpwuid(st.st_uid).pw_name, oct(st.st_mode & 0o777)[2:], p)`;
    const res = await sh(`python3 -c '${owners}' /etc/lilypad-ca ${SANDBOX_EXTRA_CA_FILE} ${SANDBOX_CA_BUNDLE_FILE}; id -u; echo x >> ${SANDBOX_CA_BUNDLE_FILE} || echo refused`);
    assert.match(res.out, new RegExp(`^root 755 /etc/lilypad-ca\nroot 644 ${SANDBOX_EXTRA_CA_FILE}\nroot 644 ${SANDBOX_CA_BUNDLE_FILE}\n1000\n`));
    assert.match(res.out, /\nrefused\n$/);
  });

  test("the combined bundle is the image's own store plus the extra CA, and openssl reads all of it", async () => {
    const store = scanPem((await sh('cat /etc/ssl/certs/ca-certificates.crt')).out).certificates;
    const bundle = scanPem((await sh(`cat ${SANDBOX_CA_BUNDLE_FILE}`)).out).certificates;
    assert.ok(store.length > 100, `the image has a system store (${store.length} certificates)`);
    assert.equal(bundle.length, store.length + 1);
    assert.equal(bundle.at(-1)?.subject, ca.subject);
    const extra = scanPem((await sh(`cat ${SANDBOX_EXTRA_CA_FILE}`)).out).certificates;
    assert.deepEqual(extra.map((c) => c.subject), [ca.subject]);
    const openssl = await sh(`openssl crl2pkcs7 -nocrl -certfile ${SANDBOX_CA_BUNDLE_FILE} | openssl pkcs7 -print_certs -noout | grep -c '^subject='`);
    assert.equal(openssl.out.trim(), String(store.length + 1));
  });

  test("python's ssl defaults follow SSL_CERT_FILE to the bundle", async () => {
    const res = await sh(`python3 -c 'import ssl; print(ssl.get_default_verify_paths().cafile); print(len(ssl.create_default_context().get_ca_certs()))'`, setupEnv);
    const [cafile, count] = res.out.trim().split('\n');
    assert.equal(cafile, SANDBOX_CA_BUNDLE_FILE);
    assert.ok(Number(count) > 100, `python loaded the bundle (${count} CAs)`);
  });

  // Each client against the HTTPS server: [name, command, what refusing looks like, what trusting looks like].
  const clients: Array<[string, string, RegExp, RegExp]> = [
    ['openssl', `openssl s_client -connect 127.0.0.1:${PORT} -servername localhost -verify_return_error </dev/null`, /verify error|unable to get local issuer/, /Verify return code: 0 \(ok\)/],
    ['curl', `curl -sS -o /dev/null -w 'HTTP %{http_code}\\n' ${URL_BASE}/`, /SSL certificate problem/, /HTTP 404/],
    ['python (urllib)', `python3 -c 'import urllib.request as u, urllib.error as e\ntry: u.urlopen("${URL_BASE}/")\nexcept e.HTTPError as x: print("HTTP", x.code)'`, /CERTIFICATE_VERIFY_FAILED/, /HTTP 404/],
    ['pip', `python3 -m pip download --retries 0 --no-deps --disable-pip-version-check -d /tmp/pipdl --index-url ${URL_BASE}/simple/ lilypad-nothing`, /SSLError|CERTIFICATE_VERIFY_FAILED/, /404|No matching distribution/],
    ['node', `node -e 'require("https").get("${URL_BASE}/", (r) => console.log("HTTP", r.statusCode)).on("error", (e) => { console.log("TLS", e.code); process.exit(2); })'`, /TLS (SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)/, /HTTP 404/],
    ['git', `git ls-remote ${URL_BASE}/repo.git`, /server certificate verification failed|SSL certificate problem/, /not found|404/],
    ['cargo', `cd /tmp && rm -rf cargo-ca && cargo new -q --lib cargo-ca && cd cargo-ca && echo 'left-pad = { version = "1", registry = "corp" }' >> Cargo.toml && CARGO_REGISTRIES_CORP_INDEX=sparse+${URL_BASE}/index/ cargo fetch`, /SSL certificate problem|\[60\]/, /config\.json not found in registry|got 404/],
    ['go', `cd /tmp && rm -rf go-ca && mkdir go-ca && cd go-ca && printf 'module example.test/m\\n\\ngo 1.19\\n\\nrequire example.test/dep v1.0.0\\n' > go.mod && GOPROXY=${URL_BASE} GOSUMDB=off GOFLAGS=-mod=mod go mod download example.test/dep`, /x509: certificate signed by unknown authority/, /404 Not Found/],
    ['java', 'java /tmp/tls/Fetch.java ' + `${URL_BASE}/`, /TLS .*PKIX path building failed/, /HTTP 404/],
  ];
  for (const [name, command, refused, trusted] of clients) {
    test(`${name}: refuses the inspecting CA without the setup variables and trusts it with them`, async () => {
      const without = await sh(command);
      assert.match(without.out, refused, `${name} without the variables:\n${without.out}`);
      const withEnv = await sh(command, setupEnv);
      assert.match(withEnv.out, trusted, `${name} with the variables:\n${withEnv.out}`);
      assert.doesNotMatch(withEnv.out, refused);
    });
  }

  test("nothing of it reaches the container's own environment or the agent's tools", async () => {
    const exec = await sh('env');
    const tool = (await sandbox.tool('Bash', JSON.stringify({ command: 'env; bash -lc env' }), 60)).observation;
    for (const name of SETUP_VARIABLES) {
      assert.doesNotMatch(exec.out, new RegExp(`^${name}=`, 'm'), `${name} in a plain exec`);
      assert.doesNotMatch(tool, new RegExp(`^${name}=`, 'm'), `${name} in the agent's Bash`);
    }
  });

  test('a CA the image already trusts is not added twice, and then no Java store is needed', async () => {
    const publicCa = (await sh('cat /etc/ssl/certs/ca-certificates.crt')).out;
    const first = scanPem(publicCa).certificates[0]!;
    const env = await installExtraCa(sandbox, first.pem);
    const bundle = scanPem((await sh(`cat ${SANDBOX_CA_BUNDLE_FILE}`)).out).certificates;
    assert.equal(bundle.filter((c) => c.fingerprint === first.fingerprint).length, 1);
    assert.equal(env['JAVA_TOOL_OPTIONS'], undefined);
  });
});
