import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rateLimitWait } from '../../src/web/auth.ts';

/** Which GitHub answers are rate limits (wait, do not conclude anything) and which are denials. */
test('rateLimitWait tells rate limits from denials', () => {
  const now = Math.floor(Date.now() / 1000);
  const cases: Array<[string, number, Record<string, string>, number | null | 'positive']> = [
    ['secondary limit: 403 with retry-after', 403, { 'retry-after': '30' }, 30],
    ['secondary limit: 429 with retry-after', 429, { 'retry-after': '7' }, 7],
    ['primary limit: 403 with x-ratelimit-remaining 0', 403, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(now + 120) }, 'positive'],
    ['primary limit without a reset time', 403, { 'x-ratelimit-remaining': '0' }, 60],
    ['429 without headers', 429, {}, 60],
    ['a bare 403 is a denial', 403, {}, null],
    ['403 with requests left is a denial', 403, { 'x-ratelimit-remaining': '4999' }, null],
    ['404 is a denial, whatever the headers', 404, { 'retry-after': '30' }, null],
    ['200 is an answer', 200, { 'x-ratelimit-remaining': '0' }, null],
    ['502 is not a rate limit', 502, { 'retry-after': '5' }, null],
  ];
  for (const [what, status, headers, expected] of cases) {
    const got = rateLimitWait(status, new Headers(headers));
    if (expected === 'positive') assert.ok(got !== null && got > 100 && got <= 121, `${what}: ${got}`);
    else assert.equal(got, expected, what);
  }
});
