import assert from 'node:assert/strict';
import { test } from 'node:test';
import { failureLine } from '../../src/test-results/failure-line.ts';

// Tails as the tools print them when setup cannot reach a registry (pip's was taken from a real
// `lilypad run` on more-itertools here; the others follow each tool's own wording).
const PIP = `  WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ProxyError('Cannot connect to proxy.', OSError('Tunnel connection failed: 500 Internal Server Error'))': /simple/flit-core/
      ERROR: Could not find a version that satisfies the requirement flit_core<5,>=4 (from versions: none)
      ERROR: No matching distribution found for flit_core<5,>=4
      [end of output]
  
  note: This error originates from a subprocess, and is likely not a problem with pip.
error: subprocess-exited-with-error

× pip subprocess to install build dependencies did not run successfully.
│ exit code: 1
╰─> See above for output.

note: This error originates from a subprocess, and is likely not a problem with pip.
`;

const NPM = `npm ERR! code E404
npm ERR! 404 Not Found - GET http://127.0.0.1:4873/left-padd - Not found
npm ERR! 404
npm ERR! 404  'left-padd@^1.0.0' is not in this registry.

npm ERR! A complete log of this run can be found in: /home/lilypad/.npm/_logs/2026-12-04T01_40_00_000Z-debug-0.log
`;

const GO = `go: downloading github.com/google/go-cmp v0.6.0
go: github.com/google/go-cmp@v0.6.0: Get "https://proxy.golang.org/github.com/google/go-cmp/@v/v0.6.0.zip": dial tcp: lookup proxy.golang.org: no such host
`;

test("pip: the line that names the missing distribution, not pip's closing frame", () => {
  assert.equal(failureLine(PIP), 'ERROR: No matching distribution found for flit_core<5,>=4');
});

test("npm: the registry's answer, not the pointer to npm's log", () => {
  assert.equal(failureLine(NPM), "npm ERR! 404  'left-padd@^1.0.0' is not in this registry.");
});

test('go: the download that failed', () => {
  assert.match(failureLine(GO) ?? '', /^go: github\.com\/google\/go-cmp@v0\.6\.0: Get .*no such host$/);
});

test('colours are dropped; without a failure word the last line with text is taken; nothing gives null', () => {
  assert.equal(failureLine('\u001b[31mfatal: could not read Username\u001b[0m\n'), 'fatal: could not read Username');
  assert.equal(failureLine('Collecting x\nInstalling y\n\n'), 'Installing y');
  assert.equal(failureLine('\n  \n'), null);
});

test('a very long line is cut to 300 characters', () => {
  const line = failureLine(`error: ${'x'.repeat(1000)}`)!;
  assert.equal(line.length, 300);
  assert.ok(line.endsWith('…'));
});

test('an errno name counts in capitals only', () => {
  assert.equal(failureLine('getaddrinfo EAI_AGAIN registry\nEverything else is fine\n'), 'getaddrinfo EAI_AGAIN registry');
  assert.equal(failureLine('Every step ran\nEverything else is fine\n'), 'Everything else is fine');
  assert.equal(failureLine('connect ECONNREFUSED 10.0.0.1:443\nEverything else is fine\n'), 'connect ECONNREFUSED 10.0.0.1:443');
});
