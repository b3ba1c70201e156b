import { test } from 'node:test';
import assert from 'node:assert/strict';
import { unreachableAddressAdvice } from '../../src/github/registration.ts';

const env = { PORT: 3000, GHE_PROTOCOL: 'https' as const, LILYPAD_PUBLIC_URL: undefined, HOST: undefined, GHE_HOST: undefined };

test('a loopback address for webhooks: the advice says whether LILYPAD_PUBLIC_URL is unset or set to a loopback address', () => {
  const unset = unreachableAddressAdvice(env);
  assert.match(unset ?? '', /^GitHub cannot reach http:\/\/localhost:3000: LILYPAD_PUBLIC_URL is not set, so Lilypad offers its own address: set LILYPAD_PUBLIC_URL to an address GitHub can reach .*tunnel to port 3000.* and restart before registering/);
  const set = unreachableAddressAdvice({ ...env, LILYPAD_PUBLIC_URL: 'http://127.0.0.1:3000' });
  assert.match(set ?? '', /^GitHub cannot reach http:\/\/127\.0\.0\.1:3000: LILYPAD_PUBLIC_URL is set to a loopback address: change it to an address GitHub can reach/);
  assert.doesNotMatch(set ?? '', /: set LILYPAD_PUBLIC_URL/);
  assert.equal(unreachableAddressAdvice({ ...env, LILYPAD_PUBLIC_URL: 'https://lilypad.example.com' }), null);
});
