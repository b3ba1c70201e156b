#!/usr/bin/env node
// Runs the test suites with node's test runner (TypeScript through tsx).
// Usage: node scripts/run-tests.mjs [unit|integration|e2e ...]   (default: all three)
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const suites = process.argv.slice(2).length ? process.argv.slice(2) : ['unit', 'integration', 'e2e'];
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
if (files.length === 0) {
  console.error(`no test files found for: ${suites.join(', ')}`);
  process.exit(1);
}
const res = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-timeout=600000', '--test-concurrency=3', ...files],
  { cwd: root, stdio: 'inherit', env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' } },
);
process.exit(res.status ?? 1);
