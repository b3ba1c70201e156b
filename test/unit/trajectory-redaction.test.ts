import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { JsonlTrajectory, type StepRecord } from '../../src/agent/trajectory.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';

// The trajectory scans a step's strings once, joined, and redacts field by field only when that
// scan finds something. Every kind of secret the scanner knows, in every kind of field, must
// still come out exactly as a field-by-field redaction leaves it.

const HELD = 'hunter2-"quoted"\\slash\nline';
const scanner = new SecretScanner([HELD]);
/** Each kind: the text as it appears, and the part of it that must not be written down. */
const SECRETS: Record<string, [string, string]> = {
  'a value the process holds (with a quote, a backslash and a newline)': [HELD, 'hunter2'],
  'a GitHub token after a control character': [`\u0001ghp_${'A'.repeat(36)}`, 'A'.repeat(36)],
  'a fine-grained GitHub token': [`github_pat_${'B1'.repeat(22)}`, 'B1'.repeat(22)],
  'a private key without its end line': ['-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA', 'b3BlbnNzaC1rZXktdjEAAAAA'],
  'an API key': [`sk-${'c'.repeat(40)}`, 'c'.repeat(40)],
  'credentials in a URL': ['git clone https://bot:s3cr3t-pass@example.invalid/repo.git', 's3cr3t-pass'],
};

function record(where: string, secret: string): StepRecord {
  const put = (field: string, plain: string) => (field === where ? `before ${secret} after` : plain);
  return {
    step: 3,
    started_at: new Date(0).toISOString(),
    model_ms: 5,
    attempts: 2,
    retries: [{ attempt: 1, error: put('retry', 'HTTP 503'), status: 503, waitMs: 10, at: new Date(0).toISOString() }],
    usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
    finish_reason: 'tool_calls',
    assistant: {
      role: 'assistant',
      content: put('content', ''),
      reasoning_content: put('reasoning', 'Let me read the file.'),
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'Bash', arguments: put('arguments', '{"command": "env"}') } }],
    },
    rescued_tool_calls: false,
    tools: [{ id: 'call_1', name: 'Bash', arguments: put('arguments', '{"command": "env"}'), observation: put('observation', 'Exit code: 0'), duration_ms: 1, meta: { note: put('meta', 'x') } }],
    warnings: [put('warning', 'a warning')],
    ...(where === 'error' ? { error: put('error', '') } : {}),
  };
}

async function written(rec: StepRecord): Promise<{ line: StepRecord; teed: StepRecord }> {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'lilypad-traj-')), 'trajectory.jsonl');
  let teed: StepRecord | undefined;
  const trajectory = new JsonlTrajectory(file, scanner, (r) => (teed = r));
  trajectory.write(rec);
  await trajectory.close();
  return { line: JSON.parse(readFileSync(file, 'utf8')) as StepRecord, teed: teed! };
}

for (const [kind, [secret, hidden]] of Object.entries(SECRETS)) {
  test(`${kind}: redacted in every field, exactly as field by field`, async () => {
    for (const where of ['retry', 'content', 'reasoning', 'arguments', 'observation', 'meta', 'warning', 'error']) {
      const rec = record(where, secret);
      const expected = JSON.parse(JSON.stringify(scanner.redactDeep(rec))) as StepRecord;
      const { line, teed } = await written(rec);
      assert.deepEqual(line, expected, `${where}: file`);
      assert.deepEqual(JSON.parse(JSON.stringify(teed)), expected, `${where}: tee`);
      assert.ok(!JSON.stringify(line).includes(hidden) && !JSON.stringify(teed).includes(hidden), `${where}: the secret was written down`);
    }
  });
}

test('a step with nothing to redact is written unchanged', async () => {
  const rec = record('none', '');
  const { line, teed } = await written(rec);
  assert.deepEqual(line, JSON.parse(JSON.stringify(rec)));
  assert.deepEqual(teed, rec);
});
