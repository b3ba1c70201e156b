import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { AgentRunResult } from '../../src/agent/loop.ts';
import { parseRepoConfig, type RepoConfig } from '../../src/config/repo-config.ts';
import { SecretScanner } from '../../src/observability/secrets.ts';
import { UserError } from '../../src/pipeline/failures.ts';
import type { RunOutcome } from '../../src/pipeline/outcome.ts';
import type { AttemptsInput, SandboxRun } from '../../src/pipeline/phases/attempts.ts';
import type { ChangeInput } from '../../src/pipeline/phases/change.ts';
import { phaseStepper, type RunContext, type RunRecord } from '../../src/pipeline/run-context.ts';
import { SandboxSlots } from '../../src/pipeline/sandbox-slots.ts';
import { runSpine, type PreparedRun, type RunPlug, type SpineStages } from '../../src/pipeline/spine.ts';
import { StaleTriggerError } from '../../src/pipeline/validate-trigger.ts';
import { CancelledError } from '../../src/shared/cancel.ts';
import type { PreparedChange } from '../../src/workspace/publish.ts';

const config = (over: Record<string, unknown> = {}): RepoConfig => {
  const parsed = parseRepoConfig(over, null);
  assert.ok(parsed.ok);
  return parsed.config;
};

function agent(over: Partial<AgentRunResult> = {}): AgentRunResult {
  return {
    exitReason: 'agent',
    steps: 3,
    finalAnswer: 'Fixed it.',
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    contextTokens: 15,
    retries: 0,
    warnings: [],
    ...over,
  } as AgentRunResult;
}

function sandboxRun(diff: string, over: Partial<AgentRunResult> = {}): SandboxRun {
  return {
    session: { agent: agent(over), patch: { diff: Buffer.from(diff), files: [], leftOut: [] } as never, setup: { commands: [], failed: null, envCache: { result: 'off' } }, tests: null, evidence: null },
    model: 'm',
    image: 'img',
    startedAt: Date.now(),
  };
}

const DIFF = 'diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-return a - b\n+return a + b\n';

function change(over: Partial<PreparedChange> = {}): PreparedChange {
  return { dir: '/nowhere', files: [{ path: 'calc.py', added: 1, removed: 1 }], dropped: [], hasChanges: true, headSha: 'abc', dispose: async () => undefined, ...over };
}

interface Trace {
  events: string[];
  ctx: RunContext;
}

function context(signal = new AbortController().signal, secrets: string[] = []): Trace {
  const events: string[] = [];
  const recorder: RunRecord = { task: () => undefined, config: () => undefined, phase: (n) => events.push(`phase:${n}`), step: () => undefined, tests: () => undefined, warning: () => undefined, finish: async () => undefined };
  const log = pino({ level: 'silent' });
  const scanner = new SecretScanner(secrets);
  const ctx: RunContext = {
    runId: 'run-1',
    settings: {} as RunContext['settings'],
    docker: {} as RunContext['docker'],
    setupNetwork: null,
    sandboxSlots: new SandboxSlots(1),
    envCache: null,
    extraCaPem: null,
    workerId: 'w',
    labels: {},
    outDir: '/tmp/none',
    deadlineAt: Date.now() + 60_000,
    signal,
    log,
    scanner: () => scanner,
    recorder,
    progress: { phase: async (p) => void events.push(`progress:${p.kind}`), agentStep: () => undefined },
    step: phaseStepper(signal, recorder, log),
    cleanups: [],
  };
  return { events, ctx };
}

function plug(events: string[], over: Partial<RunPlug> = {}, prepared: Partial<PreparedRun> = {}): RunPlug {
  return {
    async prepare(ctx) {
      events.push('prepare');
      ctx.cleanups.push(async () => void events.push('cleanup:checkout'));
      ctx.cleanups.push(async () => void events.push('cleanup:later'));
      return {
        config: config(),
        task: { title: 't', body: 'b' },
        checkout: { dir: '/tmp/x', baseCommit: 'base' },
        source: '/tmp/x',
        instructionsAt: null,
        plan: { repoKey: 'test:x', setupInferred: false, envPath: [], keyFiles: [], testRunner: null, ecosystem: null, sources: {}, origin: null },
        subject: 'o/r#1',
        commit: { message: 'm', author: { name: 'n', email: 'e' } },
        ...prepared,
      };
    },
    async publish(_ctx, _p, work) {
      events.push(`publish:${work.change.files.map((f) => f.path).join(',')}`);
      return { result: 'patch', exitReason: work.run.session.agent.exitReason, incomplete: false, diff: work.patch };
    },
    async nothingToPublish() {
      events.push('nothing');
    },
    ...over,
  };
}

function stages(run: SandboxRun | ((input: AttemptsInput) => Promise<SandboxRun>), made: PreparedChange = change(), seen?: ChangeInput[]): SpineStages {
  return {
    attempts: async (_ctx, input) => (typeof run === 'function' ? run(input) : run),
    change: async (_ctx, input) => {
      seen?.push(input);
      return made;
    },
  };
}

describe('the spine', () => {
  test('prepare, attempts, change, publish, in that order; the change gets the prepared source, base and exclude_paths; cleanups run newest first', async () => {
    const { events, ctx } = context();
    const seen: ChangeInput[] = [];
    const outcome = await runSpine(ctx, plug(events, {}, { config: config({ exclude_paths: ['docs/**'] }) }), stages(sandboxRun(DIFF), change(), seen));
    assert.equal(outcome.result, 'patch');
    assert.deepEqual(events, ['prepare', 'publish:calc.py', 'cleanup:later', 'cleanup:checkout']);
    assert.deepEqual([seen[0]!.source, seen[0]!.baseCommit, seen[0]!.excludePaths, seen[0]!.patch.toString()], ['/tmp/x', 'base', ['docs/**'], DIFF]);
    assert.equal(ctx.cleanups.length, 0);
  });

  test('no patch: no_change with the agent\'s last words, the plug told, nothing published', async () => {
    const { events, ctx } = context();
    const outcome = await runSpine(ctx, plug(events), stages(sandboxRun('', { finalAnswer: 'Nothing to do here.' })));
    assert.equal(outcome.result, 'no_change');
    assert.match((outcome as { why: string }).why, /finished without changing any file.*Nothing to do here/);
    assert.ok(events.includes('nothing') && !events.some((e) => e.startsWith('publish')));
  });

  test('a budget exit without a patch says which budget', async () => {
    const { events, ctx } = context();
    const outcome = await runSpine(ctx, plug(events), stages(sandboxRun('', { exitReason: 'max_turns' })));
    assert.match((outcome as { why: string }).why, /the run ended \(`max_turns`\) before a change/);
  });

  test('every changed file left out: no_change naming each file and why, with the diff kept for the record', async () => {
    const { events, ctx } = context();
    const outcome = await runSpine(ctx, plug(events), stages(sandboxRun(DIFF), change({ hasChanges: false, files: [], dropped: [{ path: '.github/workflows/ci.yml', reason: 'under .github/' }] })));
    assert.equal(outcome.result, 'no_change');
    const o = outcome as Extract<RunOutcome, { result: 'no_change' }>;
    assert.match(o.why, /`\.github\/workflows\/ci\.yml` \(under \.github\/\)/);
    assert.equal(o.diff?.toString(), DIFF);
  });

  test('a secret in the agent\'s added lines is refused: a UserError, nothing published, cleanups still run', async () => {
    const { events, ctx } = context(undefined, ['s3cr3t-value-123']);
    const leak = `${DIFF}+token = "s3cr3t-value-123"\n`;
    await assert.rejects(runSpine(ctx, plug(events), stages(sandboxRun(leak))), (err: unknown) => err instanceof UserError && /looks like a secret/.test(err.message));
    assert.ok(!events.some((e) => e.startsWith('publish')));
    assert.deepEqual(events.slice(-2), ['cleanup:later', 'cleanup:checkout']);
  });

  test('an agent that ended cancelled is a cancel, not a result', async () => {
    const { events, ctx } = context();
    await assert.rejects(runSpine(ctx, plug(events), stages(sandboxRun(DIFF, { exitReason: 'cancelled' }))), CancelledError);
    assert.ok(!events.some((e) => e.startsWith('publish')));
  });

  test('a trigger that stops holding in prepare or right before the agent ends the run as stale', async () => {
    const a = context();
    const stale = await runSpine(a.ctx, plug(a.events, { prepare: async () => Promise.reject(new StaleTriggerError('the label was removed')) }), stages(sandboxRun(DIFF)));
    assert.deepEqual(stale, { result: 'stale', why: 'the label was removed' });
    const b = context();
    const beforeAgent = async () => {
      throw new StaleTriggerError('an outsider edited the issue');
    };
    const viaAgent = await runSpine(b.ctx, plug(b.events, {}, { beforeAgent }), stages(async (input) => {
      await input.beforeAgent?.();
      return sandboxRun(DIFF);
    }));
    assert.deepEqual(viaAgent, { result: 'stale', why: 'an outsider edited the issue' });
    assert.deepEqual(b.events.slice(-2), ['cleanup:later', 'cleanup:checkout']);
  });

  test('an earlier copy that already published: its outcome, nothing prepared or run', async () => {
    const { events, ctx } = context();
    const done: RunOutcome = { result: 'pull_request', number: 7, url: 'u', updated: false, incomplete: false, branch: 'lilypad/issue-1', exitReason: 'agent', draft: true };
    let ran = false;
    const outcome = await runSpine(ctx, plug(events, { alreadyDone: async () => done }), stages(async () => ((ran = true), sandboxRun(DIFF))));
    assert.equal(outcome, done);
    assert.ok(!ran && !events.includes('prepare'));
  });

  test('a cancel before a phase stops the run there; other failures are thrown for the caller\'s verdict', async () => {
    const controller = new AbortController();
    const { events, ctx } = context(controller.signal);
    const p = plug(events, {
      prepare: async (c) => {
        controller.abort('cancel');
        return c.step('checkout', async () => ({}) as PreparedRun);
      },
    });
    await assert.rejects(runSpine(ctx, p, stages(sandboxRun(DIFF))), CancelledError);
    const b = context();
    await assert.rejects(runSpine(b.ctx, plug(b.events), { ...stages(sandboxRun(DIFF)), change: async () => Promise.reject(new Error('git exploded')) }), /git exploded/);
    assert.deepEqual(b.events.slice(-2), ['cleanup:later', 'cleanup:checkout']);
  });
});
