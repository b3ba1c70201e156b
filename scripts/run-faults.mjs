#!/usr/bin/env node
// Runs a fault suite (test/faults/<suite>/*.test.ts) and prints its table: fault, expected,
// observed, pass. Usage: node scripts/run-faults.mjs sandbox|lifecycle [--markdown FILE]
//
// A file that disturbs the whole machine (it restarts the Docker engine) says so on a line of its
// own, `// fault-suite: alone`, and runs by itself after the others; the others run
// LILYPAD_FAULT_CONCURRENCY files at a time (default 2 for lifecycle, 1 for sandbox), those marked
// `// fault-suite: first` (the longest) starting first. Rows within a file always run one after
// another. The sandbox suite runs under LILYPAD_SANDBOX_RUNTIME when
// it is set, and its table says which runtime.
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
const marked = (f, mark) => new RegExp(`^// fault-suite: ${mark}$`, 'm').test(readFileSync(path.join(root, f), 'utf8'));
const alone = (f) => marked(f, 'alone');
// The longest file starts first, so that the short ones fill the other slots beside it.
files.sort((a, b) => Number(marked(b, 'first')) - Number(marked(a, 'first')));
const concurrency = Number(process.env.LILYPAD_FAULT_CONCURRENCY ?? (suite === 'lifecycle' ? 2 : 1));
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`LILYPAD_FAULT_CONCURRENCY=${process.env.LILYPAD_FAULT_CONCURRENCY} is not a whole number of files (1 or more)`);
  process.exit(2);
}
const rowsDir = mkdtempSync(path.join(os.tmpdir(), 'lilypad-fault-rows-'));
const env = { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent', LILYPAD_FAULT_ROWS_DIR: rowsDir };
const runFiles = (group, n) =>
  group.length === 0
    ? 0
    : (spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-timeout=900000', `--test-concurrency=${n}`, ...group], { cwd: root, stdio: 'inherit', env }).status ?? 1);
const status = Math.max(runFiles(files.filter((f) => !alone(f)), concurrency), runFiles(files.filter(alone), 1));
const rows = readdirSync(rowsDir).flatMap((n) => JSON.parse(readFileSync(path.join(rowsDir, n), 'utf8')));
rmSync(rowsDir, { recursive: true, force: true });
const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
const lines = [
  `| ${suite === 'sandbox' ? 'attack' : 'fault'} | expected | observed | pass |`,
  '|---|---|---|---|',
  ...rows.map((r) => `| ${cell(r.attack)} | ${cell(r.expected)} | ${cell(r.observed)} | ${r.pass ? 'yes' : '**NO**'} |`),
];
const table = lines.join('\n');
const runtime = suite === 'sandbox' ? ` (sandbox runtime: ${process.env.LILYPAD_SANDBOX_RUNTIME?.trim() || "the engine's default"})` : '';
console.log(`\n${suite} fault suite${runtime}: ${rows.filter((r) => r.pass).length} of ${rows.length} hold\n\n${table}\n`);
if (flag === '--markdown' && out) writeFileSync(out, `${table}\n`);
process.exit(status);
