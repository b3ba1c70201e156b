import type Docker from 'dockerode';
import { runAgent, type AgentBudgets, type AgentProgress, type AgentRunResult } from '../agent/loop.ts';
import type { ModelClient } from '../agent/model-client.ts';
import type { TrajectorySink } from '../agent/trajectory.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import { Sandbox, type SandboxOptions } from '../sandbox/sandbox.ts';
import { commitSetupState, extractPatch, type ExtractedPatch, type SetupState } from '../workspace/patch.ts';
import { moveToHead } from '../workspace/setup-base.ts';
import { runTestCommand, snapshotWorktree } from './test-command.ts';
import type { TestOutcome } from '../test-results/test-outcome.ts';

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

/** The network setup commands run on: a per-run internal network whose only way out is a proxy. */
export interface SetupNetwork {
  name: string;
  /** Proxy settings for the setup commands (HTTP_PROXY and the tools that ignore it). */
  env: Record<string, string>;
  dispose(): Promise<void>;
}

export interface SetupNetworkProvider {
  open(runId: string, labels: Record<string, string>): Promise<SetupNetwork>;
}

export interface SandboxSessionInput {
  docker: Docker;
  checkoutDir: string;
  /** What the agent starts from and the patch is taken against. */
  baseCommit: string;
  /**
   * When setup must not run on `baseCommit` (a follow-up: the pull request's head holds Lilypad's
   * own unreviewed commits): the checkout's worktree is at `setupCommit` (detached), setup runs
   * there, and only after the network is cut does the worktree move to `baseCommit` with HEAD on
   * `branch`, before the tests and the agent. Nothing of `baseCommit` runs with network.
   */
  headAfterSetup?: { setupCommit: string; branch: string } | undefined;
  sandbox: Pick<SandboxOptions, 'image' | 'workdir' | 'user' | 'allowRootImage' | 'memoryMb' | 'cpus' | 'pids' | 'diskMb' | 'maxLineBytes'>;
  runId: string;
  workerId: string;
  labels?: Record<string, string>;
  /** Commands run with (proxied) network before the agent; the network is cut right after them. */
  setup: string[];
  /** Where setup may connect; null: setup runs without any network. */
  setupNetwork: SetupNetworkProvider | null;
  setupTimeoutSeconds: number;
  /** Called with each setup command's outcome as it finishes (the failing one included). */
  onSetupOutcome?: ((outcome: TestOutcome) => void) | undefined;
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
  /** The agent's sampling seed (best of k); absent for a single run. */
  seed?: number | undefined;
}

export interface SandboxSessionResult {
  agent: AgentRunResult;
  /** Null when the run was cancelled before the patch could be taken. */
  patch: ExtractedPatch | null;
  tests: { before: TestOutcome | null; after: TestOutcome | null } | null;
}

/**
 * The part of every run that happens in the container: copy in, setup through the egress proxy,
 * cut the network, tests on the untouched code, the agent, the patch (as data), tests on the
 * change. Every step whose result the host believes starts with takeOver(): no process the
 * repository or the agent started is alive, and the toolbox is fresh. The container (and the
 * setup network) are removed whatever happens, including on abort.
 */
export async function runSandboxSession(input: SandboxSessionInput): Promise<SandboxSessionResult> {
  const { phase, signal } = input;
  const network = input.setup.length > 0 && input.setupNetwork ? await input.setupNetwork.open(input.runId, input.labels ?? {}) : null;
  try {
    const sandbox = await phase('sandbox', () => createSandbox(input, network?.name ?? 'none'));
    const stopWatching = sandbox.destroyOnAbort(signal);
    try {
      return await runPhases(input, sandbox, network);
    } finally {
      stopWatching();
      await sandbox.destroy();
    }
  } finally {
    await network?.dispose();
  }
}

async function createSandbox(input: SandboxSessionInput, network: string): Promise<Sandbox> {
  const sb = await Sandbox.create(
    input.docker,
    { ...input.sandbox, network, runId: input.runId, workerId: input.workerId, ...(input.labels ? { labels: input.labels } : {}) },
    input.signal,
  );
  try {
    await sb.copyIn(input.checkoutDir);
  } catch (err) {
    await sb.destroy();
    throw err;
  }
  return sb;
}

async function runPhases(input: SandboxSessionInput, sandbox: Sandbox, network: SetupNetwork | null): Promise<SandboxSessionResult> {
  const { phase, signal } = input;
  const check = () => {
    if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
  };
  let setupState: SetupState | undefined;
  if (input.setup.length > 0) {
    setupState = await phase('setup', () => runSetup(input, sandbox, network));
  } else if (input.headAfterSetup) {
    await sandbox.takeOver();
    await moveToHead(sandbox, input.headAfterSetup.setupCommit, input.baseCommit, input.headAfterSetup.branch);
  }
  check();
  let tests: SandboxSessionResult['tests'] = null;
  if (input.testCommand) {
    const before = await phase('tests_before', () => testUntouched(sandbox, input.testCommand!, input.testTimeoutSeconds));
    tests = { before, after: null };
  }
  check();
  await sandbox.takeOver();
  const agent = await phase('agent', () =>
    runAgent({
      ...(input.seed !== undefined ? { seed: input.seed } : {}),
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
  // After a tool_error the sandbox may be gone: keep the agent's result and report no patch.
  const patch = await phase('patch', () => takePatch(sandbox, input.baseCommit, setupState)).catch((err: unknown) => {
    if (agent.exitReason === 'tool_error') return null;
    throw err;
  });
  if (input.testCommand && tests && patch) {
    check();
    tests.after = await phase('tests_after', () => runTestCommand(sandbox, input.testCommand!, input.testTimeoutSeconds));
  }
  return { agent, patch, tests };
}

/**
 * Setup commands run through the egress proxy; then every process they left is killed, the network
 * is cut, the worktree moves to the agent's starting point if setup ran elsewhere (headAfterSetup),
 * and what setup changed is committed so that the patch holds only the agent's work.
 */
async function runSetup(input: SandboxSessionInput, sandbox: Sandbox, network: SetupNetwork | null): Promise<SetupState> {
  await sandbox.takeOver();
  for (const command of input.setup) {
    if (input.signal?.aborted) throw new CancelledError(reasonText(input.signal.reason));
    const outcome = await runTestCommand(sandbox, command, input.setupTimeoutSeconds, { env: network?.env ?? {}, what: `the setup command \`${command}\`` });
    input.onSetupOutcome?.(outcome);
    if (outcome.outcome !== 'passed') throw new SetupError(command, outcome);
  }
  await sandbox.takeOver();
  await sandbox.cutNetwork();
  if (input.headAfterSetup) await moveToHead(sandbox, input.headAfterSetup.setupCommit, input.baseCommit, input.headAfterSetup.branch);
  return commitSetupState(sandbox, input.baseCommit);
}

/** Tests on the untouched code; whatever they created or left running is undone before the agent. */
async function testUntouched(sandbox: Sandbox, command: string, timeoutSeconds: number): Promise<TestOutcome> {
  await sandbox.takeOver();
  const restore = await snapshotWorktree(sandbox);
  const outcome = await runTestCommand(sandbox, command, timeoutSeconds);
  await sandbox.takeOver();
  await restore();
  return outcome;
}

/** The patch is read over a fresh toolbox, after every process the agent left has been killed. */
async function takePatch(sandbox: Sandbox, baseCommit: string, setup: SetupState | undefined): Promise<ExtractedPatch> {
  await sandbox.takeOver();
  return extractPatch(sandbox, baseCommit, setup);
}
