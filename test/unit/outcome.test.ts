import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StatusState } from '../../src/github/status-comment.ts';
import type { RunFinish } from '../../src/observability/run-store.ts';
import { writeOutcome, type RunOutcome } from '../../src/pipeline/outcome.ts';

function sinks() {
  const written = { finals: [] as StatusState[], phases: [] as StatusState[], records: [] as RunFinish[], metrics: [] as string[], results: [] as RunOutcome[] };
  return {
    written,
    sinks: {
      status: { finish: async (s: StatusState) => void written.finals.push(s), phase: async (s: StatusState) => void written.phases.push(s) },
      recorder: { finish: async (f: RunFinish) => void written.records.push(f) },
      metrics: (kind: string, outcome: string) => void written.metrics.push(`${kind}:${outcome}`),
      result: async (o: RunOutcome) => void written.results.push(o),
    },
  };
}

const diff = Buffer.from('diff');
const cases: Array<{ outcome: RunOutcome; status: 'final' | 'phase' | 'none'; state?: string; record: string; metric: string }> = [
  { outcome: { result: 'pull_request', number: 3, url: 'u', updated: false, incomplete: false, branch: 'b', exitReason: 'agent', draft: true }, status: 'final', state: 'done', record: 'pull_request', metric: 'pull_request' },
  { outcome: { result: 'revised', number: 3, url: 'u', sha: 'abc', commitUrl: 'c', incomplete: true, exitReason: 'max_turns', threads: 1, diff }, status: 'final', state: 'revised', record: 'pull_request', metric: 'revised' },
  { outcome: { result: 'patch', exitReason: 'agent', incomplete: false, diff }, status: 'none', record: 'patch', metric: 'patch' },
  { outcome: { result: 'no_change', why: 'nothing', exitReason: 'agent' }, status: 'final', state: 'no_change', record: 'no_change', metric: 'no_change' },
  { outcome: { result: 'stale', why: 'unlabelled' }, status: 'final', state: 'cancelled', record: 'stale', metric: 'stale' },
  { outcome: { result: 'cancelled', by: 'alice', why: 'asked' }, status: 'final', state: 'cancelled', record: 'cancelled', metric: 'cancelled' },
  { outcome: { result: 'failed', what: 'w', todo: 't', error: 'e', retry: false, fault: 'user' }, status: 'final', state: 'failed', record: 'failed', metric: 'failed' },
  { outcome: { result: 'failed', what: 'w', todo: 't', error: 'e', retry: true, fault: 'infrastructure' }, status: 'phase', state: 'queued', record: 'failed', metric: 'retried' },
  { outcome: { result: 'handed_back' }, status: 'phase', state: 'queued', record: 'failed', metric: 'handed_back' },
  { outcome: { result: 'lost' }, status: 'none', record: 'failed', metric: 'lost' },
];

for (const c of cases) {
  test(`outcome ${c.outcome.result}${c.outcome.result === 'failed' ? (c.outcome.retry ? ' (retried)' : ' (final)') : ''}: status ${c.status}${c.state ? ` ${c.state}` : ''}, record ${c.record}, metric ${c.metric}, result written`, async () => {
    const { sinks: s, written } = sinks();
    await writeOutcome(s, 'run', c.outcome, Date.now());
    assert.deepEqual(written.finals.map((x) => x.state), c.status === 'final' ? [c.state] : []);
    assert.deepEqual(written.phases.map((x) => x.state), c.status === 'phase' ? [c.state] : []);
    assert.deepEqual(written.records.map((r) => r.outcome), [c.record]);
    assert.deepEqual(written.metrics, [`run:${c.metric}`]);
    assert.deepEqual(written.results, [c.outcome]);
  });
}

test('the status of a stale run names why; a retried failure says it is retried; a final failure says what to do', async () => {
  const { sinks: s, written } = sinks();
  await writeOutcome(s, 'run', { result: 'stale', why: 'the issue was closed' }, Date.now());
  await writeOutcome(s, 'run', { result: 'failed', what: 'GitHub answered HTTP 502', todo: 'retries', error: 'e', retry: true, fault: 'infrastructure' }, Date.now());
  await writeOutcome(s, 'followup', { result: 'failed', what: 'bad config', todo: 'fix it', error: 'e', retry: false, fault: 'user' }, Date.now());
  assert.deepEqual(written.finals[0], { state: 'cancelled', why: 'the issue was closed' });
  assert.match(JSON.stringify(written.phases[0]), /Retrying after an infrastructure problem: GitHub answered HTTP 502/);
  assert.deepEqual(written.finals[1], { state: 'failed', what: 'bad config', todo: 'fix it' });
  assert.equal(written.records[1]!.why, 'infrastructure problem; the job is retried');
  assert.deepEqual(written.metrics, ['run:stale', 'run:retried', 'followup:failed']);
});
