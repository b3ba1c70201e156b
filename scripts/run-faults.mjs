#!/usr/bin/env node
// Runs a fault suite (test/faults/<suite>/*.test.ts) and prints its table: fault, expected,
// observed, pass. Usage: node scripts/run-faults.mjs sandbox|lifecycle [--markdown FILE]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const [suite, flag, out] = process.argv.slice(2);
if (!suite) {
  console.error('usage: node scripts/run-faults.mjs <suite> [--markdown FILE]');
  process.exit(2);
}
const dir = path.join(root, 'test', 'faults', suite);
const files = readdirSync(dir)
  .filter((n) => n.endsWith('.test.ts'))
  .sort()
  .map((n) => path.relative(root, path.join(dir, n)));
if (files.length === 0) {
  console.error(`no fault tests in ${dir}`);
  process.exit(1);
}
const rowsDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-fault-rows-'));
const res = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-timeout=900000', '--test-concurrency=1', ...files],
  { cwd: root, stdio: 'inherit', env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent', LILYPAD_FAULT_ROWS_DIR: rowsDir } },
);
const rows = readdirSync(rowsDir).flatMap((n) => JSON.parse(readFileSync(path.join(rowsDir, n), 'utf8')));
rmSync(rowsDir, { recursive: true, force: true });
const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
const lines = [
  `| ${suite === 'sandbox' ? 'attack' : 'fault'} | expected | observed | pass |`,
  '|---|---|---|---|',
  ...rows.map((r) => `| ${cell(r.attack)} | ${cell(r.expected)} | ${cell(r.observed)} | ${r.pass ? 'yes' : '**NO**'} |`),
];
const table = lines.join('\n');
console.log(`\n${suite} fault suite: ${rows.filter((r) => r.pass).length} of ${rows.length} hold\n\n${table}\n`);
if (flag === '--markdown' && out) writeFileSync(out, `${table}\n`);
process.exit(res.status ?? 1);
