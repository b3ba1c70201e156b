#!/usr/bin/env node
// Runs the test suites with node's test runner (TypeScript through tsx).
// Usage: node scripts/run-tests.mjs [unit|integration|e2e ...]   (default: all three)
// docs/development.md ("Running the tests") says what each suite is and what it needs.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
// The slowest suites go first: files start in this order, four at a time, so a long end-to-end
// file started last would run on alone at the end while the quick unit files could have filled in.
const suites = process.argv.slice(2).length ? process.argv.slice(2) : ['e2e', 'integration', 'unit'];
const files = [];
for (const suite of suites) {
  const dir = path.join(root, 'test', suite);
  let entries = [];
  try {
    entries = readdirSync(dir);
  } catch {
    continue;
  }
  for (const name of entries.sort()) {
    const file = path.join(dir, name);
    if (name.endsWith('.test.ts') && statSync(file).isFile()) files.push(path.relative(root, file));
  }
}
// The files that took longest (over 90 s each, measured alone on 2 cores on 3 December 2026), longest
// first, start before the rest of their suite.
const SLOWEST = ['zero-config', 'evidence', 'pipeline-guards', 'review-loop', 'zero-config-kept-env', 'github-app', 'github-app-scaling', 'run-cli'].map((n) => `test/e2e/${n}.test.ts`);
files.sort((a, b) => rank(a) - rank(b));
function rank(file) {
  const i = SLOWEST.indexOf(file);
  return i === -1 ? SLOWEST.length : i;
}
if (files.length === 0) {
  console.error(`no test files found for: ${suites.join(', ')}`);
  process.exit(1);
}
// Unit files need no Redis, no Docker engine, no network and no child process beyond tar, openssl
// and sh. test/support/unit-guard.mjs, preloaded into every file, fails a unit file that reaches for
// one (it leaves the other suites' files alone). A run of the unit suite alone also has nothing to
// reach: REDIS_URL points at a closed port and DOCKER_HOST at a socket that does not exist.
// LILYPAD_UNIT_GUARD=off runs the unit files with neither (to compare).
const env = { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' };
if (suites.length === 1 && suites[0] === 'unit' && process.env.LILYPAD_UNIT_GUARD !== 'off') {
  if (process.env.REDIS_URL) env.LILYPAD_UNIT_GUARD_REDIS_URL = process.env.REDIS_URL;
  if (process.env.DOCKER_HOST) env.LILYPAD_UNIT_GUARD_DOCKER_HOST = process.env.DOCKER_HOST;
  env.REDIS_URL = 'redis://127.0.0.1:1';
  env.DOCKER_HOST = 'unix:///nonexistent/lilypad-unit-tests-have-no-docker.sock';
}
const res = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--import',
    './test/support/unit-guard.mjs',
    '--test',
    '--test-reporter=spec',
    '--test-timeout=600000',
    '--test-concurrency=4',
    ...files,
  ],
  { cwd: root, stdio: 'inherit', env },
);
process.exit(res.status ?? 1);
