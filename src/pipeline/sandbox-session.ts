import type Docker from 'dockerode';
import { runAgent, type AgentBudgets, type AgentProgress, type AgentRunResult } from '../agent/loop.ts';
import type { ModelClient } from '../agent/model-client.ts';
import type { TrajectorySink } from '../agent/trajectory.ts';
import { CancelledError, reasonText } from '../sandbox/errors.ts';
import { Sandbox } from '../sandbox/sandbox.ts';
import { commitSetupState, extractPatch, type ExtractedPatch } from '../workspace/patch.ts';
import { runTestCommand, snapshotWorktree, type TestOutcome } from './test-command.ts';

/** A setup command from the repository's configuration failed: the user's to fix, not retried. */
export class SetupError extends Error {
  override name = 'SetupError';
  constructor(
    readonly command: string,
    readonly outcome: TestOutcome,
  ) {
    super(`the setup command \`${command}\` ${outcome.outcome === 'timed_out' ? 'timed out' : `failed (exit ${outcome.exitCode})`}`);
  }
}

export interface SandboxSessionInput {
  docker: Docker;
  checkoutDir: string;
  baseCommit: string;
  sandbox: { image: string; workdir: string; user?: string | undefined; memoryMb: number; cpus: number; pids: number };
  runId: string;
  workerId: string;
  labels?: Record<string, string>;
  /** Commands run with network before the agent; the network is cut right after them. */
  setup: string[];
  setupTimeoutSeconds: number;
  testCommand?: string | undefined;
  testTimeoutSeconds: number;
  issue: { title: string; body: string };
  model: string;
  client: ModelClient;
  budgets: AgentBudgets;
  trajectory: TrajectorySink;
  signal?: AbortSignal | undefined;
  phase: <T>(name: string, fn: () => Promise<T>) => Promise<T>;
  onProgress?: ((p: AgentProgress) => void) | undefined;
}

export interface SandboxSessionResult {
  agent: AgentRunResult;
  /** Null when the run was cancelled before the patch could be taken. */
  patch: ExtractedPatch | null;
  tests: { before: TestOutcome | null; after: TestOutcome | null } | null;
}

/**
 * The part of every run that happens in the container: copy in, setup with network, cut the
 * network, tests on the untouched code, the agent, the patch (as data), tests on the change.
 * The container is removed whatever happens, including on abort.
 */
export async function runSandboxSession(input: SandboxSessionInput): Promise<SandboxSessionResult> {
  const { phase, signal } = input;
  const sandbox = await phase('sandbox', async () => {
    const sb = await Sandbox.create(
      input.docker,
      {
        ...input.sandbox,
        network: input.setup.length > 0 ? 'bridge' : 'none',
        runId: input.runId,
        workerId: input.workerId,
        ...(input.labels ? { labels: input.labels } : {}),
      },
      signal,
    );
    try {
      await sb.copyIn(input.checkoutDir);
    } catch (err) {
      await sb.destroy();
      throw err;
    }
    return sb;
  });
  const stopWatching = sandbox.destroyOnAbort(signal);
  const check = () => {
    if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
  };
  try {
    let patchBase = input.baseCommit;
    if (input.setup.length > 0) {
      patchBase = await phase('setup', async () => {
        for (const command of input.setup) {
          check();
          const outcome = await runTestCommand(sandbox, command, input.setupTimeoutSeconds);
          if (outcome.outcome !== 'passed') throw new SetupError(command, outcome);
        }
        await sandbox.cutNetwork();
        return commitSetupState(sandbox, input.baseCommit);
      });
    }
    check();
    let tests: SandboxSessionResult['tests'] = null;
    if (input.testCommand) {
      const restore = await snapshotWorktree(sandbox);
      const before = await phase('tests_before', () => runTestCommand(sandbox, input.testCommand!, input.testTimeoutSeconds));
      tests = { before, after: null };
      await restore();
    }
    check();
    const agent = await phase('agent', () =>
      runAgent({
        title: input.issue.title,
        body: input.issue.body,
        model: input.model,
        client: input.client,
        tools: sandbox,
        budgets: input.budgets,
        trajectory: input.trajectory,
        signal,
        ...(input.onProgress ? { onProgress: input.onProgress } : {}),
      }),
    );
    if (agent.exitReason === 'cancelled') return { agent, patch: null, tests };
    // Nothing the agent started may keep changing files while the patch and the tests are taken.
    await sandbox.reap().catch(() => 0);
    // After a tool_error the toolbox may be gone: keep the agent's result and report no patch.
    const patch = await phase('patch', () => extractPatch(sandbox, input.baseCommit, patchBase)).catch((err: unknown) => {
      if (agent.exitReason === 'tool_error') return null;
      throw err;
    });
    if (input.testCommand && tests && patch) {
      check();
      tests.after = await phase('tests_after', () => runTestCommand(sandbox, input.testCommand!, input.testTimeoutSeconds));
    }
    return { agent, patch, tests };
  } finally {
    stopWatching();
    await sandbox.destroy();
  }
}

