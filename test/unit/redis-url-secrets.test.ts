/**
 * A Redis URL's password (issue 26, L4): found in the URL whatever form it takes, registered as a
 * secret of the process, redacted by every scanner, and never shown where Lilypad prints the URL.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { redisCheck } from '../../src/cli/doctor.ts';
import { processSecrets } from '../../src/cli/serve.ts';
import { loadEnv } from '../../src/config/env.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { urlForDisplay, urlSecretValues } from '../../src/shared/url-secrets.ts';

const PW = 'Zq7-redis-pass-4410';

describe('the password of a Redis URL', () => {
  test('every form ioredis accepts gives up its password, as written and decoded', () => {
    assert.deepEqual(urlSecretValues(`redis://:${PW}@127.0.0.1:6379`), [PW]);
    assert.deepEqual(urlSecretValues(`rediss://lilypad:${PW}@redis.internal:6380/2`), [PW]);
    assert.deepEqual(urlSecretValues(`redis://127.0.0.1:6379/0?password=${PW}&db=1`), [PW]);
    assert.deepEqual(urlSecretValues('redis://:p%40ss%2Fword-9@host'), ['p%40ss%2Fword-9', 'p@ss/word-9']);
    for (const none of [undefined, '', 'redis://127.0.0.1:6379', 'redis://default@host', 'not a url']) assert.deepEqual(urlSecretValues(none), [], String(none));
  });

  test('shown without its userinfo or password parameter', () => {
    assert.equal(urlForDisplay(`redis://:${PW}@127.0.0.1:6379`), 'redis://127.0.0.1:6379');
    assert.equal(urlForDisplay(`rediss://lilypad:${PW}@redis.internal:6380/2`), 'rediss://redis.internal:6380/2');
    assert.equal(urlForDisplay(`redis://h:1/0?db=1&password=${PW}`), 'redis://h:1/0?db=1&password=***');
    assert.equal(urlForDisplay('redis://127.0.0.1:6379'), 'redis://127.0.0.1:6379');
    // Not a URL: what looks like userinfo goes all the same.
    assert.equal(urlForDisplay(`redis:/:${PW}@host`), 'redis:/host');
    assert.equal(urlForDisplay(`:${PW}@host:6379`), 'host:6379');
  });

  test('a URL with a password and no user name is redacted and refused by any scanner, as the user:password form is', () => {
    const scanner = new SecretScanner();
    for (const text of [`REDIS_URL=redis://:${PW}@127.0.0.1:6379`, `see rediss://:${PW}@cache:6380/1 for the queue`]) {
      const out = scanner.redact(text);
      assert.ok(!out.includes(PW), out);
      assert.match(out, /\[REDACTED\]@/);
      assert.ok(scanner.findings(text).length > 0, text);
    }
    // Ports and paths are not credentials.
    const plain = 'redis://127.0.0.1:6379/0 and http://host:8080/a@b';
    assert.equal(scanner.redact(plain), plain);
  });

  test('registered, the bare password is redacted too', () => {
    const scanner = new SecretScanner(urlSecretValues(`redis://:${PW}@127.0.0.1:6379`));
    assert.equal(scanner.redact(`echo ${PW}`), 'echo [REDACTED]');
    assert.deepEqual(scanner.findings(`+${PW}`), ['a secret value held by this process']);
  });

  test('a bad REDIS_URL is named without its password', () => {
    assert.throws(
      () => loadEnv({ REDIS_URL: `redis:/:${PW}@127.0.0.1:6379` }),
      (err: Error) => {
        assert.match(err.message, /REDIS_URL="redis:\/127\.0\.0\.1:6379": must be a redis:\/\/ or rediss:\/\/ URL/);
        assert.ok(!err.message.includes(PW), err.message);
        return true;
      },
    );
  });

  test("doctor's Redis check names the Redis it cannot reach without the password", async () => {
    const result = await redisCheck(`redis://:${PW}@127.0.0.1:9`);
    assert.equal(result.status, 'FAIL');
    assert.match(result.detail, /^cannot reach redis:\/\/127\.0\.0\.1:9: /);
    assert.ok(!JSON.stringify(result).includes(PW), result.detail);
  });

  test("the process logger's secrets hold the password of REDIS_URL and of the private Redis", () => {
    assert.ok(processSecrets(loadEnv({ REDIS_URL: `redis://:${PW}@127.0.0.1:6379` })).includes(PW));
    const own = processSecrets(loadEnv({}), `redis://:${PW}x@127.0.0.1:41234`);
    assert.ok(own.includes(`${PW}x`));
  });
});
