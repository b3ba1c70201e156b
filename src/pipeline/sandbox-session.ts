import type Docker from 'dockerode';
import { runAgent, type AgentBudgets, type AgentProgress, type AgentRunResult } from '../agent/loop.ts';
import type { ModelClient } from '../agent/model-client.ts';
import type { TrajectorySink } from '../agent/trajectory.ts';
import type { Ecosystem } from '../inference/index.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import type { EnvCache } from '../sandbox/env-cache/index.ts';
import type { Sandbox, SandboxOptions } from '../sandbox/sandbox.ts';
import type { SetupNetwork } from '../sandbox/egress.ts';
import { compareRuns, type RunComparison, type TestRunner } from '../test-results/index.ts';
import type { TestOutcome } from '../test-results/test-outcome.ts';
import { extractPatch, type ExtractedPatch, type SetupState } from '../workspace/patch.ts';
import { prepareEnvironment, type Environment, type LiveSandbox, type SetupReport } from './environment.ts';
import { gatherEvidence, type EvidenceRuns, type ReproTests } from './evidence-runs.ts';
import { freshBaseOf, type FreshBase } from './fresh-base.ts';
import { applyPatch, publishedPatch, type PublishedPatch } from './published-patch.ts';
import { runTests, type TestRun } from './test-command.ts';
import { putTestCache, takeTestCache, type TestCacheReport } from './test-cache.ts';
import { checkAgentSandbox, disagreementNote } from './verdict-check.ts';

export { SetupError } from './environment.ts';

/** Opens a run's setup network (src/sandbox/egress.ts: an internal network whose only way out is the proxy). */
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
  /** Tests a reproduction run wrote before this attempt: the change is judged by them too, and published with them. */
  reproTests?: ReproTests | null | undefined;
  /** `exclude_paths` of the repository's configuration: files never published, so never judged either. */
  excludePaths?: string[] | undefined;
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
  /** The test runner's cache carried from the baseline's sandbox into the one the tests after the change ran in (null: nothing to carry). */
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
 * The part of every run that happens in containers: the environment (kept, or set up through the
 * egress proxy, then cut off), the agent in its sandbox, the patch (as data), and the runs that
 * judge it. Those runs (the tests on the untouched code, the tests on the change, the evidence)
 * never run in the agent's sandbox: each starts a sandbox of its own in the state right after setup
 * (fresh-base.ts), and the tests on the change run on exactly the patch that will be published,
 * applied there by Lilypad. Nothing the agent left outside its patch can reach them. Where the
 * change is not verified, the failing tests are run once more in the agent's own sandbox, only to
 * say why the two disagree when they do (verdict-check.ts). Every step whose result the host
 * believes starts with takeOver(): no process the repository or the agent started is alive, and
 * the toolbox is fresh. Every container, the snapshot and the setup network are removed whatever
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
  // The tests on the untouched code run beside the agent, in a sandbox of their own.
  const baseline = input.testCommand && env.fresh ? startBaseline(input, env.fresh) : null;
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
    const before = baseline ? await baseline.result() : null;
    const tests: SessionTests | null = input.testCommand ? { before: before?.outcome ?? null, after: null, verdicts: null, afterNotRun: null, cache: null } : null;
    if (agent.exitReason === 'cancelled') return { agent, patch: null, setup: env.setup, tests, evidence: null };
    // After a tool_error the sandbox may be gone: keep the agent's result and report no patch.
    const patch = await phase('patch', () => takePatch(sandbox, input.baseCommit, env.setupState)).catch((err: unknown) => {
      if (agent.exitReason === 'tool_error') return null;
      throw err;
    });
    const published = patch ? publishedPatch(patch.diff, input.reproTests ?? null, input.excludePaths ?? []) : null;
    const notRun = whyNoTestsAfter(patch, published);
    if (!tests || !patch || !published || notRun) {
      if (tests) tests.afterNotRun = notRun;
      return { agent, patch, setup: env.setup, tests, evidence: null };
    }
    return { agent, patch, setup: env.setup, tests, ...(await judgeChange(input, env, published, before, tests, baseline)) };
  } finally {
    await baseline?.stop();
  }
}

/**
 * The tests on the published change in a fresh sandbox, what changed per test, the evidence (a
 * failure to gather it is reported, not thrown), and, where the change is not verified, whether the
 * agent's own sandbox disagrees.
 */
async function judgeChange(input: SandboxSessionInput, env: Environment, published: PublishedPatch, before: TestRun | null, tests: SessionTests, baseline: Baseline | null): Promise<Pick<SandboxSessionResult, 'evidence' | 'evidenceError'>> {
  checkAborted(input.signal);
  const after = await testsOnChange(input, env, published, (box) => (baseline ? baseline.carryCache(box).then((c) => void (tests.cache = c)) : Promise.resolve()));
  tests.after = after.outcome;
  tests.verdicts = before ? compareRuns(before.parsed, after.parsed) : null;
  checkAborted(input.signal);
  const gathered = await gatherEvidence(input, env, published, before, after).then(
    (evidence) => ({ evidence }),
    (err: unknown) => {
      if (err instanceof CancelledError || input.signal?.aborted) throw err;
      return { evidence: null, evidenceError: (err as Error).message };
    },
  );
  if (gathered.evidence && gathered.evidence.evidence.verdict !== 'verified') {
    const disagreement = await input.phase('agent_sandbox_check', () => checkAgentSandbox(input, env, published, after));
    if (disagreement) {
      gathered.evidence.disagreement = disagreement;
      gathered.evidence.evidence.notes.unshift(disagreementNote(disagreement));
    }
  }
  return gathered;
}

/** The repository's tests on the published change, in a fresh sandbox: the tests after the change. */
async function testsOnChange(input: SandboxSessionInput, env: Environment, published: PublishedPatch, prepare: (box: Sandbox) => Promise<void>): Promise<TestRun> {
  const live = await input.phase('verdict_sandbox', async () => {
    const opened = await freshBaseOf(env).open('verdict');
    try {
      await applyPatch(opened.sandbox, published.withRepro, published.withReproFiles, input.baseCommit, 'the change');
      await prepare(opened.sandbox);
      return opened;
    } catch (err) {
      await opened.release();
      throw err;
    }
  });
  try {
    return await input.phase('tests_after', () => runTests(live.sandbox, input.testCommand!, input.testRunner ?? null, input.testTimeoutSeconds));
  } finally {
    await live.release();
  }
}

function checkAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new CancelledError(reasonText(signal.reason));
}

/**
 * Why the tests after the change are not to run, or null when they are: without a change (no patch,
 * or one that changes no file) they would run the very code the baseline ran, so they cannot differ;
 * a change none of whose files is published leaves nothing to judge either.
 */
export function whyNoTestsAfter(patch: ExtractedPatch | null, published?: PublishedPatch | null): string | null {
  if (!patch) return 'no patch could be taken';
  if (patch.files.length === 0) return 'no change';
  return published && published.files.length === 0 ? 'none of the changed files is published' : null;
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
 * The tests on the untouched code, started at once in a fresh sandbox of their own while the agent
 * works in its own: nothing the agent does can reach them.
 */
function startBaseline(input: SandboxSessionInput, fresh: FreshBase): Baseline | null {
  const command = input.testCommand;
  if (!command) return null;
  let live: LiveSandbox | null = null;
  const release = async () => void (await (live as LiveSandbox | null)?.release());
  const run = (async () => {
    live = await fresh.open('baseline');
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

/** The patch is read over a fresh toolbox, after every process the agent left has been killed. */
async function takePatch(sandbox: Sandbox, baseCommit: string, setup: SetupState | undefined): Promise<ExtractedPatch> {
  await sandbox.takeOver();
  return extractPatch(sandbox, baseCommit, setup);
}
