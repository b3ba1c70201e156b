import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';

/** One line of a fault suite's table: what was tried, what must happen, what did happen. */
export interface FaultRow {
  attack: string;
  expected: string;
  observed: string;
  pass: boolean;
}

export interface FaultCheck {
  observed: string;
  pass: boolean;
}

const rows: FaultRow[] = [];
let flushRegistered = false;

/**
 * Registers a fault test: `run` performs the attack or fault and describes what it observed.
 * The row is recorded whether it passes or not, and the test fails when it does not pass.
 * `scripts/run-faults.mjs` gathers the rows of every file into one table.
 */
export function faultTest(attack: string, expected: string, run: () => Promise<FaultCheck>, opts: { timeout?: number } = {}): void {
  registerFlush();
  test(attack, { timeout: opts.timeout ?? 300_000 }, async () => {
    let check: FaultCheck;
    try {
      check = await run();
    } catch (err) {
      check = { observed: `the test itself threw: ${(err as Error).message}`, pass: false };
    }
    rows.push({ attack, expected, observed: check.observed, pass: check.pass });
    if (!check.pass) throw new Error(`${attack}: expected ${expected}; observed ${check.observed}`);
  });
}

function registerFlush(): void {
  if (flushRegistered) return;
  flushRegistered = true;
  after(() => {
    const dir = process.env['LILYPAD_FAULT_ROWS_DIR'];
    if (!dir) return;
    const name = `${process.pid}-${Math.random().toString(16).slice(2, 8)}.json`;
    writeFileSync(path.join(dir, name), JSON.stringify(rows));
  });
}
