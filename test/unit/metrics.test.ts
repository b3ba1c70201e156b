import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LEAF_TOOLS } from '../../src/agent/tools.ts';
import { TOOL_NAMES } from '../../src/shared/tool-names.ts';
import { jobFinished, modelRequest, modelRetried, renderMetrics, startMetricsServer, toolCall } from '../../src/observability/metrics.ts';

test('recorded values show up in the Prometheus text, with bounded label values', async () => {
  jobFinished('run', 'pull_request', 42);
  modelRequest(1.5, 'ok', { prompt: 1000, completion: 50, cached: 750 });
  modelRetried('rate_limited');
  toolCall('Bash', 0.2);
  toolCall('rm -rf /', 0.1);
  const { body } = await renderMetrics();
  assert.match(body, /^lilypad_jobs_total\{kind="run",outcome="pull_request"\} 1$/m);
  assert.match(body, /^lilypad_model_tokens_total\{kind="cached"\} 750$/m);
  assert.match(body, /^lilypad_prefix_cache_hit_ratio 0\.75$/m);
  assert.match(body, /^lilypad_model_retries_total\{reason="rate_limited"\} 1$/m);
  assert.match(body, /^lilypad_tool_call_duration_seconds_count\{tool="unknown"\} 1$/m, 'a made-up tool name does not become a label');
  assert.match(body, /^lilypad_job_duration_seconds_bucket\{le="60",kind="run"\} 1$/m);
});

test("the tool names metrics accept as labels are the Leaf tools' names, in order", () => {
  assert.deepEqual([...TOOL_NAMES], LEAF_TOOLS.map((t) => t.function.name));
});

test('a worker\'s metrics port answers only with the bearer token, and is off without one', async () => {
  const on = await startMetricsServer({ port: 0, host: '127.0.0.1', token: 'tok-123456789' });
  const off = await startMetricsServer({ port: 0, host: '127.0.0.1', token: undefined });
  try {
    const url = (s: typeof on) => `http://127.0.0.1:${(s.server.address() as { port: number }).port}/metrics`;
    assert.equal((await fetch(url(on))).status, 401);
    const ok = await fetch(url(on), { headers: { authorization: 'Bearer tok-123456789' } });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /^nodejs_eventloop_lag_seconds /m);
    const disabled = await fetch(url(off), { headers: { authorization: 'Bearer anything' } });
    assert.equal(disabled.status, 404);
    assert.match(await disabled.text(), /LILYPAD_METRICS_TOKEN/);
  } finally {
    await on.close();
    await off.close();
  }
});
