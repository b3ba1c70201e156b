import { CancelledError, reasonText } from '../shared/cancel.ts';
import { installExtraCa } from '../sandbox/extra-ca.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import { envKey, hitReport, keptEnvFiles, missReport, type EnvBuilder, type EnvCacheReport, type KeptEnv } from '../sandbox/env-cache/index.ts';
import type { TestOutcome } from '../test-results/test-outcome.ts';
import { saveSetupChanges } from '../workspace/kept-worktree.ts';
import { commitSetupState, type SetupState } from '../workspace/patch.ts';
import { moveToHead } from '../workspace/setup-base.ts';
import { snapshotBase, type FreshBase } from './fresh-base.ts';
import { checkoutInKept, guard, started, StaleEnvironmentError, type LiveSandbox } from './live-sandbox.ts';
import type { SetupNetwork } from '../sandbox/egress.ts';
import type { SandboxSessionInput } from './sandbox-session.ts';
import { runTestCommand } from './test-command.ts';

export type { LiveSandbox } from './live-sandbox.ts';

/** A setup command the repository's configuration (or the command line) gave failed: the user's to fix, not retried. */
export class SetupError extends Error {
  override name = 'SetupError';
  constructor(
    readonly command: string,
    readonly outcome: TestOutcome,
  ) {
    super(`the setup command \`${command}\` ${outcome.outcome === 'timed_out' ? 'timed out' : `failed (exit ${outcome.exitCode})`}`);
  }
}

/** What setup did, for result.json, the run page, the status and the pull request. */
export interface SetupReport {
  commands: TestOutcome[];
  /** An inferred setup command that failed: the run went on without the rest of setup. */
  failed: string | null;
  envCache: EnvCacheReport;
}

/** A sandbox ready for the agent: set up, offline, at the commit the agent starts from. */
export interface Environment {
  sandbox: Sandbox;
  setupState: SetupState | undefined;
  setup: SetupReport;
  /** The kept environment this run's setup is in (a hit, or what this run kept). */
  kept: KeptEnv | null;
  /** Where the runs that judge the change start: the state right after setup, nothing of the agent's (null: no test command, so nothing to judge with). */
  fresh: FreshBase | null;
  /** The agent's sandbox's clock when the agent was about to start (`date +%s.%N`): what changed after is the agent's. */
  agentStartedAt: string | null;
  dispose(): Promise<void>;
}

/**
 * The environment: from a kept one when setup ran before on the same image, commands and lockfiles
 * (setup is skipped), else the setup commands through the egress proxy, the network cut, and what
 * setup left kept for the next runs. Either way the worktree ends at the agent's starting point with
 * setup's changes committed apart, so the patch holds only the agent's work.
 */
export async function prepareEnvironment(input: SandboxSessionInput): Promise<Environment> {
  if (input.setup.length === 0) return bare(input);
  const claimed = await claimEnvironment(input);
  try {
    if (claimed.hit) {
      let why = '';
      const fromKept = await fromKeptEnvironment(input, claimed.hit).catch((err: unknown) => {
        if (err instanceof CancelledError) throw err;
        why = err instanceof StaleEnvironmentError ? err.message : `it could not be started (${(err as Error).message.slice(0, 200)})`;
        return null; // evicted between the lookup and the start, or stale: set up afresh
      });
      if (fromKept) return fromKept;
      return await setUp(input, null, null, { result: 'failed', note: `the kept environment was not used: ${why}; setup ran` });
    }
    return await setUp(input, claimed.builder, claimed.key, claimed.report);
  } finally {
    claimed.builder?.release();
  }
}

interface Claimed {
  hit: KeptEnv | null;
  builder: EnvBuilder | null;
  key: string | null;
  report: EnvCacheReport;
}

async function claimEnvironment(input: SandboxSessionInput): Promise<Claimed> {
  const plan = input.keep;
  if (!plan?.cache.enabled) return { hit: null, builder: null, key: null, report: { result: 'off', ...(plan ? {} : { note: 'this run keeps no environment' }) } };
  try {
    const imageId = (await input.docker.getImage(input.sandbox.image).inspect()).Id;
    const files = await keptEnvFiles(input.checkoutDir, { setup: input.setup, named: plan.keyFiles });
    const key = envKey({ imageId, setup: input.setup, repoId: plan.repoId, workdir: input.sandbox.workdir, user: input.sandbox.user, files });
    const claim = await plan.cache.claim(key, plan.repoId, input.signal);
    if (!claim) return { hit: null, builder: null, key: null, report: { result: 'off' } };
    if (claim.hit) return { hit: claim.hit, builder: null, key, report: hitReport(claim.hit) };
    return { hit: null, builder: claim.builder, key, report: { result: 'miss', key, ...(claim.note ? { note: claim.note } : {}) } };
  } catch (err) {
    if (err instanceof CancelledError) throw err;
    return { hit: null, builder: null, key: null, report: { result: 'failed', note: (err as Error).message.slice(0, 300) } };
  }
}

/** No setup: the checkout as it is, without network. */
async function bare(input: SandboxSessionInput): Promise<Environment> {
  const live = await input.phase('sandbox', () => started(input, input.sandbox.image, 'none'));
  return guard(live, async () => {
    if (input.headAfterSetup) {
      await live.sandbox.takeOver();
      await moveToHead(live.sandbox, input.headAfterSetup.setupCommit, input.baseCommit, input.headAfterSetup.branch);
    }
    return ready(input, live, { setupState: undefined, setup: { commands: [], failed: null, envCache: { result: 'off', note: 'no setup commands' } }, kept: null });
  });
}

async function fromKeptEnvironment(input: SandboxSessionInput, kept: KeptEnv): Promise<Environment> {
  const live = await input.phase('sandbox', () => checkoutInKept(input, kept.image));
  return guard(live, async () => {
    const setupState = await settle(input, live.sandbox);
    return ready(input, live, { setupState, setup: { commands: [], failed: null, envCache: hitReport(kept) }, kept });
  });
}

async function setUp(input: SandboxSessionInput, builder: EnvBuilder | null, key: string | null, report: EnvCacheReport): Promise<Environment> {
  const network = input.setupNetwork ? await input.setupNetwork.open(input.runId, input.labels ?? {}) : null;
  try {
    const live = await input.phase('sandbox', () => started(input, input.sandbox.image, network?.name ?? 'none'));
    const sandbox = live.sandbox;
    return await guard(live, async () => {
      const t0 = Date.now();
      const setup = await input.phase('setup', () => runSetupCommands(input, sandbox, network));
      await sandbox.takeOver();
      await sandbox.cutNetwork();
      let kept: KeptEnv | null = null;
      let envCache = report;
      if (builder && key && !setup.failed) await saveSetupChanges(sandbox);
      if (builder && key) {
        const outcome = setup.failed ? { note: `the setup command \`${setup.failed}\` failed` } : await builder.keep(sandbox.container, { baseImageId: (await input.docker.getImage(input.sandbox.image).inspect()).Id, setupSeconds: (Date.now() - t0) / 1000, signal: input.signal });
        kept = 'kept' in outcome ? outcome.kept : null;
        envCache = missReport(key, outcome, report.note);
      }
      const setupState = await settle(input, sandbox);
      return ready(input, live, { setupState, setup: { ...setup, envCache }, kept });
    });
  } finally {
    await network?.dispose();
  }
}

/**
 * The setup commands, in order, with the proxy's settings. A command from the configuration or the
 * command line that fails stops the run (SetupError); an inferred one that fails is reported and
 * the rest of setup is skipped: the tests will say what is missing. The tools setup installed come
 * first on PATH for the tests and the agent's shell.
 */
async function runSetupCommands(input: SandboxSessionInput, sandbox: Sandbox, network: SetupNetwork | null): Promise<Omit<SetupReport, 'envCache'>> {
  await sandbox.takeOver();
  const commands: TestOutcome[] = [];
  let failed: string | null = null;
  // Setup only: the agent and the tests run without network, and never get these variables.
  const caEnv = input.extraCaPem ? await installExtraCa(sandbox, input.extraCaPem) : {};
  const env = { ...(network?.env ?? {}), ...caEnv };
  for (const command of input.setup) {
    if (input.signal?.aborted) throw new CancelledError(reasonText(input.signal.reason));
    const outcome = await runTestCommand(sandbox, command, input.setupTimeoutSeconds, { env, what: `the setup command \`${command}\`` });
    commands.push(outcome);
    input.onSetupOutcome?.(outcome);
    if (outcome.outcome === 'passed') continue;
    if (!input.setupInferred) throw new SetupError(command, outcome);
    failed = command;
    break;
  }
  await sandbox.takeOver();
  if (input.envPath?.length) await putOnPath(sandbox, input.envPath);
  return { commands, failed };
}

/**
 * Login shells (every Bash call of the agent's, every test run: `bash -lc`) read ~/.profile: the
 * directories setup filled (a virtual environment's bin) go first on PATH there. Inference only
 * names `$HOME/...` or absolute paths of safe characters, so the line cannot run anything else.
 */
async function putOnPath(sandbox: Sandbox, dirs: string[]): Promise<void> {
  const safe = dirs.filter((d) => /^(\$HOME|\/)[\w./-]*$/.test(d));
  if (safe.length === 0) return;
  const line = `export PATH="${safe.join(':')}:$PATH"`;
  await sandbox.exec(['/bin/sh', '-c', 'printf "\\n# Added by Lilypad: the tools setup installed\\n%s\\n" "$1" >> "$HOME/.profile"', 'path', line], { timeoutSeconds: 30 });
}

/** Moves the worktree to the agent's starting point (follow-ups) and commits what setup changed, apart. */
async function settle(input: SandboxSessionInput, sandbox: Sandbox): Promise<SetupState> {
  await sandbox.takeOver();
  if (input.headAfterSetup) await moveToHead(sandbox, input.headAfterSetup.setupCommit, input.baseCommit, input.headAfterSetup.branch);
  return commitSetupState(sandbox, input.baseCommit);
}

/**
 * The environment handed to the agent: the sandbox as it is now, before the agent's first step, is
 * committed as the snapshot every judging run starts from (fresh-base.ts), and its clock is read: a
 * file whose status changed after this moment was changed by the agent (no process can set a
 * ctime back).
 */
async function ready(input: SandboxSessionInput, live: LiveSandbox, env: Omit<Environment, 'sandbox' | 'fresh' | 'agentStartedAt' | 'dispose'>): Promise<Environment> {
  const fresh = input.testCommand ? await input.phase('snapshot', () => snapshotBase(input, live.sandbox)) : null;
  try {
    const clock = await live.sandbox.exec(['date', '+%s.%N'], { cwd: '/', timeoutSeconds: 30 });
    const now = clock.stdout.toString().trim();
    return {
      ...env,
      fresh,
      sandbox: live.sandbox,
      agentStartedAt: clock.exitCode === 0 && /^\d+\.\d+$/.test(now) ? now : null,
      dispose: async () => {
        await live.release();
        await fresh?.dispose();
      },
    };
  } catch (err) {
    await fresh?.dispose().catch(() => undefined);
    throw err;
  }
}
