import type Docker from 'dockerode';
import { runAgent, type AgentBudgets, type AgentProgress, type AgentRunResult } from '../agent/loop.ts';
import type { ModelClient } from '../agent/model-client.ts';
import type { TrajectorySink } from '../agent/trajectory.ts';
import type { Ecosystem } from '../inference/index.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import type { EnvCache } from '../sandbox/env-cache/index.ts';
import type { Sandbox, SandboxOptions } from '../sandbox/sandbox.ts';
import { compareRuns, type RunComparison, type TestRunner } from '../test-results/index.ts';
import type { TestOutcome } from '../test-results/test-outcome.ts';
import { extractPatch, type ExtractedPatch, type SetupState } from '../workspace/patch.ts';
import { moveToHead } from '../workspace/setup-base.ts';
import { checkoutInKept, prepareEnvironment, type Environment, type LiveSandbox, type SetupReport } from './environment.ts';
import { gatherEvidence, type EvidenceRuns, type ReproTests } from './evidence-runs.ts';
import { runTests, snapshotWorktree, type TestRun } from './test-command.ts';
import { putTestCache, takeTestCache, type TestCacheReport } from './test-cache.ts';

export { SetupError } from './environment.ts';

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
  /** Inferred setup: a command that fails is reported and the run goes on (configured ones stop it). */
  setupInferred?: boolean | undefined;
  /** Directories setup fills with tools (a virtual environment's bin), first on PATH afterwards. */
  envPath?: string[] | undefined;
  /** Where setup's result is kept for later runs, and under which repository; null: never kept. */
  keep?: { cache: EnvCache; repoId: string; keyFiles: string[] } | null | undefined;
  /** Where setup may connect; null: setup runs without any network. */
  setupNetwork: SetupNetworkProvider | null;
  /** Tests a reproduction run wrote before this attempt: the change is judged by them too. */
  reproTests?: ReproTests | null | undefined;
  /** The administrator's CA certificates (LILYPAD_EXTRA_CA_CERTS) that setup's tools trust; never the agent's. */
  extraCaPem?: string | null | undefined;
  setupTimeoutSeconds: number;
  /** Called with each setup command's outcome as it finishes (the failing one included). */
  onSetupOutcome?: ((outcome: TestOutcome) => void) | undefined;
  testCommand?: string | undefined;
  /** The test command's runner (inferred, or read from the command): how its output is read per test. */
  testRunner?: TestRunner | null | undefined;
  /** The repository's ecosystem: which test runner's cache is carried from the baseline's sandbox (test-cache.ts). */
  ecosystem?: Ecosystem | null | undefined;
  /** The most that cache may hold (default TEST_CACHE_MAX_BYTES). */
  testCacheMaxBytes?: number | undefined;
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

/** The tests before and after the change, as one session ran them. */
export interface SessionTests {
  before: TestOutcome | null;
  after: TestOutcome | null;
  /** Each test's change from before to after (null until both ran). */
  verdicts: RunComparison | null;
  /** Why the tests after the change did not run, where that is known (`no change`), else null. */
  afterNotRun: string | null;
  /** The test runner's cache carried from the baseline's sandbox (null: the baseline ran in the agent's, or nothing to carry). */
  cache: TestCacheReport | null;
}

export interface SandboxSessionResult {
  agent: AgentRunResult;
  /** Null when the run was cancelled before the patch could be taken. */
  patch: ExtractedPatch | null;
  setup: SetupReport;
  tests: SessionTests | null;
  /** What shows the change fixes the issue (null: no tests ran after it, or gathering it failed: see `evidenceError`). */
  evidence: EvidenceRuns | null;
  evidenceError?: string | undefined;
}

/**
 * The part of every run that happens in the container: the environment (kept, or set up through the
 * egress proxy, then cut off), the tests on the untouched code, the agent, the patch (as data), the
 * tests on the change. Every step whose result the host believes starts with takeOver(): no process
 * the repository or the agent started is alive, and the toolbox is fresh. Where the environment was
 * kept, the tests on the untouched code run beside the agent in a sandbox of their own, so the first
 * model request does not wait for them. Every container (and the setup network) is removed whatever
 * happens, including on abort.
 */
export async function runSandboxSession(input: SandboxSessionInput): Promise<SandboxSessionResult> {
  const env = await prepareEnvironment(input);
  try {
    return await runPhases(input, env);
  } finally {
    await env.dispose();
  }
}

async function runPhases(input: SandboxSessionInput, env: Environment): Promise<SandboxSessionResult> {
  const { phase, signal } = input;
  const { sandbox } = env;
  checkAborted(signal);
  // With a kept environment the baseline runs beside the agent; without one, before it, in its sandbox.
  const baseline = env.kept ? startBaseline(input, env.kept.image) : null;
  const inPlace = !baseline && input.testCommand ? await phase('tests_before', () => testUntouched(sandbox, input.testCommand!, input.testRunner ?? null, input.testTimeoutSeconds)) : null;
  try {
    checkAborted(signal);
    const agent = await phase('agent', async () => {
      await sandbox.takeOver();
      return runAgent({
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
      });
    });
    const before = baseline ? await baseline.result() : inPlace;
    const tests: SessionTests | null = input.testCommand ? { before: before?.outcome ?? null, after: null, verdicts: null, afterNotRun: null, cache: null } : null;
    if (agent.exitReason === 'cancelled') return { agent, patch: null, setup: env.setup, tests, evidence: null };
    // After a tool_error the sandbox may be gone: keep the agent's result and report no patch.
    const patch = await phase('patch', () => takePatch(sandbox, input.baseCommit, env.setupState)).catch((err: unknown) => {
      if (agent.exitReason === 'tool_error') return null;
      throw err;
    });
    const notRun = whyNoTestsAfter(patch);
    if (!tests || !patch || notRun) {
      if (tests) tests.afterNotRun = notRun;
      return { agent, patch, setup: env.setup, tests, evidence: null };
    }
    if (baseline) tests.cache = await baseline.carryCache(sandbox);
    return { agent, patch, setup: env.setup, tests, ...(await testChange(input, env, patch, before, tests)) };
  } finally {
    await baseline?.stop();
  }
}

/** The tests on the change, what changed per test, and the evidence (a failure to gather it is reported, not thrown). */
async function testChange(input: SandboxSessionInput, env: Environment, patch: ExtractedPatch, before: TestRun | null, tests: SessionTests): Promise<Pick<SandboxSessionResult, 'evidence' | 'evidenceError'>> {
  const { sandbox } = env;
  checkAborted(input.signal);
  await sandbox.takeOver();
  const after = await input.phase('tests_after', () => runTests(sandbox, input.testCommand!, input.testRunner ?? null, input.testTimeoutSeconds));
  tests.after = after.outcome;
  tests.verdicts = before ? compareRuns(before.parsed, after.parsed) : null;
  checkAborted(input.signal);
  return gatherEvidence(input, env, patch, before, after).then(
    (evidence) => ({ evidence }),
    (err: unknown) => {
      if (err instanceof CancelledError || input.signal?.aborted) throw err;
      return { evidence: null, evidenceError: (err as Error).message };
    },
  );
}

function checkAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
}

/**
 * Why the tests after the change are not to run, or null when they are: without a change (no patch,
 * or one that changes no file) they would run the very code the baseline ran, so they cannot differ.
 */
export function whyNoTestsAfter(patch: ExtractedPatch | null): string | null {
  if (!patch) return 'no patch could be taken';
  return patch.files.length === 0 ? 'no change' : null;
}

interface Baseline {
  /** The tests on the untouched code (null: no test command). */
  result(): Promise<TestRun | null>;
  /** After result(): the test runner's cache, read out of the baseline's sandbox when it ended, put into `to` (null: none worth carrying). */
  carryCache(to: Sandbox): Promise<TestCacheReport | null>;
  /** Removes the baseline's own sandbox if it is still there, and the cache read out of it. */
  stop(): Promise<void>;
}

/**
 * The tests on the untouched code, started at once in a sandbox of their own from the kept
 * environment with this run's checkout, while the agent works in its own: nothing the agent does
 * can reach them.
 */
function startBaseline(input: SandboxSessionInput, keptImage: string): Baseline | null {
  const command = input.testCommand;
  if (!command) return null;
  let live: LiveSandbox | null = null;
  const release = async () => void (await (live as LiveSandbox | null)?.release());
  const run = (async () => {
    live = await checkoutInKept({ ...input, runId: `${input.runId}-baseline` }, keptImage);
    await live.sandbox.takeOver();
    if (input.headAfterSetup) await moveToHead(live.sandbox, input.headAfterSetup.setupCommit, input.baseCommit, input.headAfterSetup.branch);
    return runTests(live.sandbox, command, input.testRunner ?? null, input.testTimeoutSeconds);
  })();
  // Known before the agent is done, the outcome still shows as the tests on the untouched code.
  const timed = input.phase('tests_before', () => run);
  timed.catch(() => undefined);
  // Once they ended, their test cache is read out and their sandbox removed, while the agent works on.
  const taken = timed
    .then(
      () => {
        const box = (live as LiveSandbox | null)?.sandbox;
        return box ? input.phase('test_cache_read', () => takeTestCache(box, input.ecosystem ?? null, input.testCacheMaxBytes)) : null;
      },
      () => null,
    )
    .finally(release)
    .catch(() => null);
  return {
    result: () => timed,
    carryCache: async (to) => {
      const t = await taken;
      return t ? input.phase('test_cache_write', () => putTestCache(t, to)) : null;
    },
    stop: async () => {
      await release();
      const t = await taken;
      if (t && 'held' in t) await t.held.dispose();
    },
  };
}

/** Tests on the untouched code in the agent's sandbox; whatever they created or left running is undone. */
async function testUntouched(sandbox: Sandbox, command: string, runner: TestRunner | null, timeoutSeconds: number): Promise<TestRun> {
  await sandbox.takeOver();
  const restore = await snapshotWorktree(sandbox);
  const run = await runTests(sandbox, command, runner, timeoutSeconds);
  await sandbox.takeOver();
  await restore();
  return run;
}

/** The patch is read over a fresh toolbox, after every process the agent left has been killed. */
async function takePatch(sandbox: Sandbox, baseCommit: string, setup: SetupState | undefined): Promise<ExtractedPatch> {
  await sandbox.takeOver();
  return extractPatch(sandbox, baseCommit, setup);
}
