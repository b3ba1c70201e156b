import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { attemptCost, parseEndpoint } from '../../src/eval/endpoint.ts';
import { instanceFingerprint, parseInstances } from '../../src/eval/instance.ts';
import { resolveRepoSource } from '../../src/eval/repo-source.ts';

const good = {
  instance_id: 'acme__calc-1',
  repo: 'acme/calc',
  base_commit: 'a'.repeat(40),
  problem_statement: 'add() is wrong',
  patch: '',
  test_patch: '',
  FAIL_TO_PASS: '["test_calc.T.test_add"]',
  PASS_TO_PASS: '[]',
  test_command: 'python3 -m unittest',
  hints_text: '',
  version: '1.0',
};

describe('instance files', () => {
  test('SWE-bench lines with JSON-string test lists are accepted; extra SWE-bench fields are kept', () => {
    const { instances, problems } = parseInstances(`${JSON.stringify(good)}\n\n`);
    assert.deepEqual(problems, []);
    assert.deepEqual(instances[0]!.FAIL_TO_PASS, ['test_calc.T.test_add']);
    assert.deepEqual(instances[0]!.setup, []);
    assert.equal((instances[0] as Record<string, unknown>)['version'], '1.0');
  });

  test('every bad line is reported on its own, with its line number and what to fix; the good ones are kept', () => {
    const lines = [
      JSON.stringify(good),
      '{"instance_id": "broken"',
      JSON.stringify({ ...good, instance_id: 'no-cmd', test_command: undefined }),
      JSON.stringify({ ...good, instance_id: 'bad-list', FAIL_TO_PASS: 'test_a' }),
      JSON.stringify({ ...good, instance_id: 'empty-f2p', FAIL_TO_PASS: [] }),
      JSON.stringify({ ...good, instance_id: '../escape' }),
      JSON.stringify({ ...good, instance_id: 'bad-commit', base_commit: 'main' }),
      JSON.stringify(good),
      JSON.stringify({ ...good, instance_id: 'two', setup: 'pip install -e .', image: 'lilypad-sandbox:py' }),
    ];
    const { instances, problems } = parseInstances(lines.join('\n'));
    assert.deepEqual(instances.map((i) => i.instance_id), ['acme__calc-1', 'two']);
    assert.deepEqual(instances[1]!.setup, ['pip install -e .']);
    const byLine = new Map(problems.map((p) => [p.line, p.message]));
    assert.match(byLine.get(2)!, /not valid JSON/);
    assert.match(byLine.get(3)!, /test_command: missing/);
    assert.match(byLine.get(4)!, /FAIL_TO_PASS: must be a list of test ids/);
    assert.match(byLine.get(5)!, /FAIL_TO_PASS: must name at least one test/);
    assert.match(byLine.get(6)!, /instance_id: letters, digits/);
    assert.match(byLine.get(7)!, /base_commit: must be a commit hash/);
    assert.match(byLine.get(8)!, /instance_id repeats line 1/);
    assert.equal(problems.length, 7);
  });

  test('the fingerprint changes with what the attempt depends on, not with the gold patch', () => {
    const [a] = parseInstances(JSON.stringify(good)).instances;
    const [b] = parseInstances(JSON.stringify({ ...good, patch: 'diff' })).instances;
    const [c] = parseInstances(JSON.stringify({ ...good, problem_statement: 'other' })).instances;
    assert.equal(instanceFingerprint(a!), instanceFingerprint(b!));
    assert.notEqual(instanceFingerprint(a!), instanceFingerprint(c!));
  });
});

describe('endpoints and cost', () => {
  test('self-hosted with a GPU-hour price; hosted with token prices; defaults', () => {
    assert.deepEqual(parseEndpoint('local=http://127.0.0.1:30000/v1/,model=frognano-4b,gpu_hour_cost=2.5'), {
      name: 'local',
      baseURL: 'http://127.0.0.1:30000/v1',
      model: 'frognano-4b',
      cost: { kind: 'gpu_hour', gpuHourCost: 2.5 },
    });
    assert.deepEqual(parseEndpoint('hosted=https://api.example.test/v1,input_cost=0.5,output_cost=1.5,api_key_env=HOSTED_KEY').cost, { kind: 'tokens', inputCost: 0.5, outputCost: 1.5 });
    assert.deepEqual(parseEndpoint('bare=http://127.0.0.1:1/v1').cost, { kind: 'none' });
  });

  test('bad specs get a message that says what to write', () => {
    assert.throws(() => parseEndpoint('http://127.0.0.1:1/v1'), /expected NAME=URL/);
    assert.throws(() => parseEndpoint('a=ftp://x'), /not an http\(s\) URL/);
    assert.throws(() => parseEndpoint('a=http://x/v1,gpu_hour_cost=2,input_cost=1,output_cost=1'), /not both/);
    assert.throws(() => parseEndpoint('a=http://x/v1,input_cost=1'), /needs both input_cost and output_cost/);
    assert.throws(() => parseEndpoint('a=http://x/v1,gpu_hour_cost=cheap'), /gpu_hour_cost must be a number/);
    assert.throws(() => parseEndpoint('a=http://x/v1,temperature=0'), /unknown option "temperature=0"/);
    assert.throws(() => parseEndpoint('a b=http://x/v1'), /may hold letters/);
  });

  test('the cost formulas', () => {
    const usage = { promptTokens: 2_000_000, completionTokens: 500_000, modelSeconds: 1800 };
    assert.equal(attemptCost({ kind: 'gpu_hour', gpuHourCost: 3 }, usage), 1.5);
    assert.equal(attemptCost({ kind: 'tokens', inputCost: 0.25, outputCost: 2 }, usage), 0.5 + 1);
    assert.equal(attemptCost({ kind: 'none' }, usage), null);
  });
});

describe('repository sources', () => {
  test('owner/name goes to the configured GitHub host; URLs and existing directories are used as given', () => {
    assert.deepEqual(resolveRepoSource('acme/calc', { protocol: 'https' }, '/nonexistent'), { kind: 'url', location: 'https://github.com/acme/calc.git' });
    assert.deepEqual(resolveRepoSource('acme/calc', { host: 'git.example.test', protocol: 'http' }, '/nonexistent'), { kind: 'url', location: 'http://git.example.test/acme/calc.git' });
    assert.deepEqual(resolveRepoSource('file:///srv/calc.git', { protocol: 'https' }), { kind: 'url', location: 'file:///srv/calc.git' });
    assert.deepEqual(resolveRepoSource('.', { protocol: 'https' }, '/tmp'), { kind: 'path', location: '/tmp' });
    assert.throws(() => resolveRepoSource('not a repo', { protocol: 'https' }, '/nonexistent'), /neither an existing directory/);
  });
});
