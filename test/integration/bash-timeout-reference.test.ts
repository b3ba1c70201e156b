// The host decides a Bash call's timeout (src/sandbox/bash-timeout.ts) from rules the Leaf reference
// wrote in Python. This holds the TypeScript to the Python it replaced (test/support/
// bash-timeout-reference.py, the toolbox's own code before the move), run by the sandbox image's
// python3 on a few hundred raw argument strings: the same seconds to the last bit (so the same
// `Timed out after <t>s`), the same capped flag, the same error text.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { bashTimeout } from '../../src/sandbox/bash-timeout.ts';
import { openToolbox, type Toolbox } from '../support/sandbox-harness.ts';

const REFERENCE = readFileSync(new URL('../support/bash-timeout-reference.py', import.meta.url), 'utf8');
const CAPS = [1, 3, 60, 1800];

// Values as raw JSON text, so that what only Python reads (NaN, Infinity, huge integers) is in.
const NUMBERS = [
  '0', '-0', '1', '5', '0.1', '0.01', '0.05', '0.099', '0.3', '0.25', '0.35', '0.05e1', '2.5', '59.99', '60', '120',
  '999.9', '1000', '1000.0', '1000.5', '1001', '1500', '3000', '1e3', '1e4', '1.5e3', '1E400', '-1e400', '1e-400',
  '1799.9999', '1800', '1800.0001', '123456789012345678901234567890', `9${'0'.repeat(307)}`, `2${'0'.repeat(308)}`,
  '9'.repeat(400), `-${'9'.repeat(400)}`, '-5', '-1001',
];
const LITERALS = ['NaN', 'Infinity', '-Infinity', 'true', 'false', 'null', '[]', '[5]', '{}', '{"s": 5}'];
const STRINGS = [
  '5', ' 5 ', '\t5\n', '5.5', '1_000', '1__000', '_1', '1_', '1e3', '1e', '.5', '5.', '.', '+5', '-5', '+-5', 'inf', 'INF',
  'Infinity', '-infinity', 'infinit', 'nan', '-NaN', '0x10', '0b1', '0o7', '', ' ', 'abc', '5s', '\u0663', '\uff11\uff12',
  '\u00a05', '5\u2028', '\u200b5', '\ufeff5', '\uff15_\uff10', '1e1_0', '1_0.5_5', '\u{1d7d3}', '5\x1c', '5\x0b', '1e+5', '1E-1',
  '00.5', '1.e1', '٣.٥',
];
const VALUES = [...NUMBERS, ...LITERALS, ...STRINGS.map((s) => JSON.stringify(s)), '"\\u0035"'];

function cases(): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  const cap = () => CAPS[out.length % CAPS.length]!;
  const add = (raw: string) => out.push([raw, cap()]);
  add('{"command": "ls"}');
  for (const v of VALUES) add(`{"command": "ls", "timeout": ${v}}`);
  for (const v of VALUES) add(`{"command": "ls", "timeout_ms": ${v}}`);
  const few = ['5', '1500', 'NaN', 'Infinity', '"x"', 'null', 'true', '"7"', '0.01', '9'.repeat(400)];
  for (const a of few) for (const b of few) add(`{"command": "ls", "timeout": ${a}, "timeout_ms": ${b}}`);
  // Whole documents: what is not an object, or not JSON even to Python, is {} (no command).
  for (const raw of ['', 'ls', '[1]', '"ls"', '{"command": "ls", "timeout": 5,}', '{"command": "ls", "timeout": NaN} x', '{"command": "ls", "timeout": nan}']) add(raw);
  // Duplicate keys: the last one counts.
  add('{"command": "ls", "timeout": 5, "timeout": 7}');
  add('{"timeout": 5, "command": "", "command": "ls"}');
  return out;
}

let tb: Toolbox;
before(async () => {
  tb = await openToolbox();
});
after(async () => {
  await tb?.close();
});

test('the host decides every Bash timeout as the reference Python did: same seconds, capped flag and error', async () => {
  const all = cases();
  const expected: Array<{ seconds?: number; capped?: boolean; error?: string; no_command?: true }> = [];
  // One argv string per batch stays under the kernel's 128 KiB limit for a single argument.
  for (let i = 0; i < all.length; i += 100) {
    const batch = Buffer.from(JSON.stringify(all.slice(i, i + 100))).toString('base64');
    const res = await tb.sandbox.exec(['python3', '-c', REFERENCE, batch], { cwd: '/' });
    assert.equal(res.exitCode, 0, res.stderr.toString());
    expected.push(...res.stdout.toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as (typeof expected)[number]));
  }
  assert.equal(expected.length, all.length);
  let compared = 0;
  all.forEach(([raw, cap], i) => {
    const want = expected[i]!;
    // The toolbox answers "command is required" before it looks at the timeout.
    if (want.no_command) return;
    compared++;
    const got = bashTimeout(raw, { capSeconds: cap, marginMs: 0 });
    const label = `${JSON.stringify(raw)} under cap ${cap}`;
    if (want.error !== undefined) assert.deepEqual(got, { error: want.error, deadlineMs: 0 }, label);
    else assert.deepEqual(got, { seconds: want.seconds, capped: want.capped, deadlineMs: want.seconds! * 1000 }, label);
  });
  assert.ok(compared > 200, `only ${compared} cases reached the timeout`);
});
