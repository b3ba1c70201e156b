import { test } from 'node:test';
import assert from 'node:assert/strict';
import { safeRedirectPath } from '../../src/web/auth.ts';

/**
 * Where the user goes after sign-in (`next`): only a path on the public origin. Each entry is what
 * arrives in `next` after the query string is decoded, and what the Location header must then carry.
 */
const PUBLIC = 'https://lilypad.example.com';

const table: Array<[string | null, string]> = [
  // Kept: ordinary local paths, with their query; the fragment is dropped.
  ['/runs', '/runs'],
  ['/runs/run-1', '/runs/run-1'],
  ['/runs?repo=acme%2Fcalc&outcome=failed', '/runs?repo=acme%2Fcalc&outcome=failed'],
  ['/runs/run-1#step-3', '/runs/run-1'],
  // Percent-encoded bytes stay encoded: a path on this server, never a host.
  ['/%2F%2Fevil.example', '/%2F%2Fevil.example'],
  ['/%09/evil.example/x', '/%09/evil.example/x'],
  ['/%5Cevil.example', '/%5Cevil.example'],
  // Refused (the default page instead): anything a browser could read as another origin.
  ['/\t/evil.example/x', '/runs'],
  ['/\n/evil.example', '/runs'],
  ['/\r\n/evil.example', '/runs'],
  ['/\u0000/evil.example', '/runs'],
  ['/\u007f/evil.example', '/runs'],
  ['//evil.example/x', '/runs'],
  ['///evil.example/x', '/runs'],
  ['/\\evil.example', '/runs'],
  ['/\\\\evil.example', '/runs'],
  ['\\\\evil.example', '/runs'],
  ['/.//evil.example/x', '/runs'],
  ['/..//evil.example/x', '/runs'],
  ['/./..//evil.example', '/runs'],
  ['https://evil.example/x', '/runs'],
  ['http:evil.example', '/runs'],
  ['https://lilypad.example.com.evil.example/', '/runs'],
  ['javascript:alert(1)', '/runs'],
  ['data:text/html,<script>alert(1)</script>', '/runs'],
  [' //evil.example', '/runs'],
  ['runs', '/runs'],
  ['', '/runs'],
  [null, '/runs'],
  [`/${'a'.repeat(5000)}`, '/runs'],
];

test('safeRedirectPath keeps local paths and refuses everything that could leave the origin', () => {
  for (const [next, expected] of table) {
    assert.equal(safeRedirectPath(next, PUBLIC), expected, `next=${JSON.stringify(next)}`);
  }
});

test('whatever safeRedirectPath returns resolves to the public origin, as a browser reads a Location header', () => {
  for (const [next] of table) {
    const out = safeRedirectPath(next, PUBLIC);
    assert.match(out, /^\/(?![/\\])[^\u0000-\u0020\u007f\\]*$/, `next=${JSON.stringify(next)} gave ${JSON.stringify(out)}`);
    assert.equal(new URL(out, PUBLIC).origin, PUBLIC);
  }
});

test('only paths are accepted: even a full URL of the public origin falls back to /runs', () => {
  assert.equal(safeRedirectPath('https://lilypad.example.com/runs/x', PUBLIC), '/runs');
  assert.equal(safeRedirectPath('/runs/x', 'http://127.0.0.1:3000'), '/runs/x');
});
