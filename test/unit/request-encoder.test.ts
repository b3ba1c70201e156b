import { test } from 'node:test';
import assert from 'node:assert/strict';

import { RequestEncoder, requestBody, type AgentBudgets, type Message } from '../../src/agent/loop.ts';
import { ModelClient, jsonText } from '../../src/agent/model-client.ts';
import { startModelServer } from '../support/model-server.ts';

const BUDGETS: AgentBudgets = { maxSteps: 10, maxContextTokens: 1000, maxTokensPerTurn: 8192, maxWallSeconds: 60, bashTimeoutCapSeconds: 60 };

// Texts JSON encodes with escapes: quotes, control characters, a lone surrogate, U+2028, emoji.
const AWKWARD = ['plain', 'a "quoted" \\ back\\slash', 'tab\tnew\nline\r\u0000\u001f', 'lone \ud800 surrogate', 'line\u2028sep', 'frog 🐸 ünïcode'];

function conversation(steps: number): Message[][] {
  const turns: Message[][] = [];
  const messages: Message[] = [
    { role: 'system', content: 'system text' },
    { role: 'user', content: AWKWARD.join('|') },
  ];
  turns.push([...messages]);
  for (let i = 0; i < steps; i++) {
    const text = AWKWARD[i % AWKWARD.length]!;
    messages.push({
      role: 'assistant',
      content: i % 3 === 0 ? '' : text,
      ...(i % 2 === 0 ? { reasoning_content: `thinking ${text}` } : {}),
      tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'Read', arguments: JSON.stringify({ file_path: text }) } }],
    });
    messages.push({ role: 'tool', tool_call_id: `call_${i}`, content: `${text}\n`.repeat(i + 1) });
    turns.push([...messages]);
  }
  return turns;
}

for (const seed of [undefined, 7]) {
  test(`the encoder's text of every turn is JSON.stringify of the request, byte for byte (seed ${seed ?? 'none'})`, async () => {
    const server = await startModelServer();
    try {
      const encoder = new RequestEncoder('frognano-4b', BUDGETS, seed);
      const client = new ModelClient({ baseURL: server.url, timeoutMs: 10_000, maxRetries: 0 });
      // The loop passes one array that grows; so does this test.
      const live: Message[] = [];
      const turns = conversation(12);
      for (const turn of turns) {
        live.push(...turn.slice(live.length));
        const body = encoder.body(live);
        await client.complete(body, undefined, () => undefined);
      }
      const sent = server.requests.filter((r) => r.path.endsWith('/chat/completions')).map((r) => r.rawBody);
      assert.equal(sent.length, turns.length);
      turns.forEach((turn, i) => assert.equal(sent[i], JSON.stringify(requestBody('frognano-4b', turn, BUDGETS, seed)), `turn ${i} differs`));
    } finally {
      await server.close();
    }
  });
}

test('a history that is not the one encoded so far is encoded afresh, not appended to', () => {
  const encoder = new RequestEncoder('m', BUDGETS, undefined);
  const [, , third] = conversation(3);
  const other: Message[] = [{ role: 'system', content: 'another run' }, { role: 'user', content: 'x' }];
  assert.equal(jsonText(encoder.body(third!)), JSON.stringify(requestBody('m', third!, BUDGETS, undefined)));
  // As long as before, other objects: the cached text must not be reused.
  const changed = [...other, ...third!.slice(2)];
  assert.equal(jsonText(encoder.body(changed)), JSON.stringify(requestBody('m', changed, BUDGETS, undefined)));
  const shorter = third!.slice(0, 3);
  assert.equal(jsonText(encoder.body(shorter)), JSON.stringify(requestBody('m', shorter, BUDGETS, undefined)));
});

test('observations far larger than the first buffer grow it without losing a byte', () => {
  const encoder = new RequestEncoder('m', BUDGETS, 3);
  const messages: Message[] = [
    { role: 'system', content: 's' },
    { role: 'user', content: 'u' },
  ];
  const sent: Array<[object, string]> = [];
  for (let i = 0; i < 4; i++) {
    messages.push({ role: 'assistant', content: '', tool_calls: [{ id: `c${i}`, type: 'function', function: { name: 'Read', arguments: '{}' } }] });
    messages.push({ role: 'tool', tool_call_id: `c${i}`, content: `🐸 ü ${AWKWARD[i]}\n`.repeat(20_000 * (i + 1)) });
    const body = encoder.body(messages);
    const expected = JSON.stringify(requestBody('m', messages, BUDGETS, 3));
    assert.equal(jsonText(body), expected, `turn ${i} differs`);
    sent.push([body, expected]);
  }
  // A body handed out earlier keeps its bytes after later turns were encoded.
  sent.forEach(([body, expected], i) => assert.equal(jsonText(body), expected, `turn ${i} changed afterwards`));
});
