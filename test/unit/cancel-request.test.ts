import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { parseCancelRequest } from '../../src/store/cancel-bus.ts';

// What a cancel request must look like; the bus that carries it (over Redis) is tested in
// test/integration/cancel-bus.test.ts.
describe('parseCancelRequest', () => {
  test('reads a request with and without `by`', () => {
    assert.deepEqual(parseCancelRequest('{"jobId":"o/r#1","by":"alice","why":"label removed"}'), {
      ok: true,
      request: { jobId: 'o/r#1', by: 'alice', why: 'label removed' },
    });
    assert.deepEqual(parseCancelRequest('{"jobId":"o/r#1","why":"closed"}'), { ok: true, request: { jobId: 'o/r#1', why: 'closed' } });
  });

  test('refuses text that is not JSON, or JSON of another shape, with the reason', () => {
    for (const raw of ['not json', '', 'null', '[]', '42', '{"jobId":"x"}', '{"jobId":"","why":"w"}', '{"jobId":7,"why":"w"}', '{"jobId":"x","why":"w","by":3}']) {
      const parsed = parseCancelRequest(raw);
      assert.equal(parsed.ok, false, raw);
      assert.ok(!parsed.ok && parsed.reason.length > 0, raw);
    }
    const notJson = parseCancelRequest('{oops');
    assert.ok(!notJson.ok && notJson.reason.startsWith('not JSON'));
    const noWhy = parseCancelRequest('{"jobId":"x"}');
    assert.ok(!noWhy.ok && noWhy.reason.includes('why'), JSON.stringify(noWhy));
  });
});
