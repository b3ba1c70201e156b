import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, envSchema, loadEnv } from '../../src/config/env.ts';

test('defaults follow the Leaf budgets and the default sandbox', () => {
  const env = loadEnv({});
  assert.equal(env.OPENAI_BASE_URL, 'http://127.0.0.1:30000/v1');
  assert.equal(env.OPENAI_API_KEY, undefined);
  assert.equal(env.LILYPAD_MAX_STEPS, 150);
  assert.equal(env.LILYPAD_MAX_CONTEXT_TOKENS, 131072);
  assert.equal(env.LILYPAD_MAX_TOKENS_PER_TURN, 8192);
  assert.equal(env.LILYPAD_SANDBOX_WORKDIR, '/testbed');
  assert.equal(env.LILYPAD_BASH_TIMEOUT_CAP_SECONDS, 1800);
  assert.match(env.LILYPAD_DATA_DIR, /\.lilypad$/);
});

test('empty values mean "not set" (as in a copied .env.example)', () => {
  const env = loadEnv({ OPENAI_API_KEY: '', LILYPAD_MODEL: ' ', LILYPAD_DATA_DIR: '' });
  assert.equal(env.OPENAI_API_KEY, undefined);
  assert.equal(env.LILYPAD_MODEL, undefined);
  assert.match(env.LILYPAD_DATA_DIR, /\.lilypad$/);
});

test('a wrong value stops start-up with a message naming the variable and the fix', () => {
  assert.throws(
    () => loadEnv({ OPENAI_BASE_URL: 'localhost:30000', LILYPAD_MAX_STEPS: 'many', LOG_LEVEL: 'loud' } as unknown as NodeJS.ProcessEnv),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /OPENAI_BASE_URL="localhost:30000".*http:\/\/127\.0\.0\.1:30000\/v1/);
      assert.match(err.message, /LILYPAD_MAX_STEPS="many"/);
      assert.match(err.message, /LOG_LEVEL="loud".*fatal, error, warn/);
      return true;
    },
  );
});

test('a relative sandbox workdir is refused', () => {
  assert.throws(() => loadEnv({ LILYPAD_SANDBOX_WORKDIR: 'testbed' }), /LILYPAD_SANDBOX_WORKDIR.*absolute/);
});

test('.env.example documents exactly the variables the schema reads', () => {
  const text = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8');
  const documented = [...text.matchAll(/^([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]).sort();
  assert.deepEqual(documented, Object.keys(envSchema.shape).sort());
});

test('LILYPAD_ENV_MAX_AGE_HOURS: a week by default, fractions allowed, anything else refused with the fix', () => {
  assert.equal(loadEnv({}).LILYPAD_ENV_MAX_AGE_HOURS, 168);
  assert.equal(loadEnv({ LILYPAD_ENV_MAX_AGE_HOURS: '0.5' }).LILYPAD_ENV_MAX_AGE_HOURS, 0.5);
  assert.equal(loadEnv({ LILYPAD_ENV_MAX_AGE_HOURS: '' }).LILYPAD_ENV_MAX_AGE_HOURS, 168);
  for (const bad of ['0', '-1', 'a week', 'Infinity', '1e400']) {
    assert.throws(
      () => loadEnv({ LILYPAD_ENV_MAX_AGE_HOURS: bad }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError, bad);
        assert.match(err.message, new RegExp(`LILYPAD_ENV_MAX_AGE_HOURS="${bad}": .*hours.*e\\.g\\. LILYPAD_ENV_MAX_AGE_HOURS=168.*LILYPAD_ENV_CACHE_GB=0`), err.message);
        return true;
      },
    );
  }
});
