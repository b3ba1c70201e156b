import type Docker from 'dockerode';
import type { AgentProgress } from '../agent/loop.ts';
import type { ModelSettingNames } from '../agent/model-client.ts';
import type { Env } from '../config/env.ts';
import type { Logger } from '../observability/logger.ts';
import type { RunRecorder } from '../observability/run-store.ts';
import type { SecretScanner } from '../observability/secrets.ts';
import { CancelledError, reasonText } from '../shared/cancel.ts';
import type { EnvCache } from '../sandbox/env-cache/index.ts';
import type { SetupNetworkProvider } from './sandbox-session.ts';
import type { SandboxSlots } from './sandbox-slots.ts';

/**
 * What every run has, whichever way it was started (an issue job, a follow-up, `lilypad run`,
 * `lilypad eval`): the settings, the engine and its slots, where setup may connect, the run's
 * record and progress, its signal and deadline. The spine and its phases see only this; what
 * differs between the four kinds of run is plugged in (see spine.ts).
 */
export interface RunContext {
  runId: string;
  settings: RunSettings;
  docker: Docker;
  /** Where setup commands may connect (the egress proxy); null: setup runs without any network. */
  setupNetwork: SetupNetworkProvider | null;
  /** Every sandbox session (each attempt of best of k) holds one while it runs. */
  sandboxSlots: SandboxSlots;
  /** Environments kept after setup, reused by later runs on the same repository (null: off). */
  envCache: EnvCache | null;
  /** LILYPAD_EXTRA_CA_CERTS, read and checked at start: the CA certificates setup's tools trust (null: none). */
  extraCaPem: string | null;
  workerId: string;
  /** Extra labels on every container, so that sweeps can find what a dead run left. */
  labels: Record<string, string>;
  /** Where the run keeps its files (trajectories, each attempt's patch). */
  outDir: string;
  /** When the whole run must be over; the agent's wall clock is cut to fit it. */
  deadlineAt: number;
  signal: AbortSignal;
  log: Logger;
  /** The scanner of everything the run publishes or records, with every secret known so far. */
  scanner: () => SecretScanner;
  /** The run's record (the run pages for the app; a record nobody reads for local runs). */
  recorder: RunRecord;
  /** Progress as the run goes (the status comment, the terminal, or nothing). */
  progress: RunProgress;
  /** Runs one named phase: checks for a cancel first, times it, records it. */
  step: <T>(name: string, fn: () => Promise<T>) => Promise<T>;
  /** Run on the way out, newest first, whatever happened. */
  cleanups: Array<() => Promise<unknown>>;
}

export type RunRecord = Pick<RunRecorder, 'task' | 'config' | 'phase' | 'step' | 'tests' | 'warning' | 'finish'>;

/** What a run tells the person waiting for it while it goes (never its outcome: see outcome.ts). */
export interface RunProgress {
  /** A phase began: `preparing`, `testing` before or after, the agent starting. Written in order. */
  phase(p: ProgressPhase): Promise<void>;
  /** An agent step of the first attempt (frequent; may be dropped). */
  agentStep(p: AgentProgress, maxSteps: number, attempts: number): void;
}

export type ProgressPhase =
  | { kind: 'preparing'; text: string }
  | { kind: 'testing'; which: 'before' | 'after' }
  | { kind: 'agent'; attempts: number };

/** The settings a run takes from the administrator (LILYPAD_*), the same for all four kinds. */
export interface RunSettings {
  dataDir: string;
  sandbox: {
    defaultImage: string;
    /** Comma-separated globs of images a repository may choose; empty: the default image only. */
    allowedImages: string;
    workdir: string;
    user: string | undefined;
    allowRootImage: boolean;
    memoryMb: number;
    cpus: number;
    pids: number;
    diskMb: number;
    maxLineBytes: number;
  };
  model: {
    baseURL: string;
    apiKey: string | undefined;
    /** Empty: the server's first model. */
    name: string | undefined;
    timeoutMs: number;
    retries: number;
    retryBaseMs: number;
    maxResponseBytes: number;
    /** Where the endpoint was set, for errors (default: the environment variables). */
    settingNames?: ModelSettingNames;
  };
  limits: {
    maxSteps: number;
    maxContextTokens: number;
    maxTokensPerTurn: number;
    maxWallSeconds: number;
    bashTimeoutCapSeconds: number;
    testTimeoutSeconds: number;
    setupTimeoutSeconds: number;
    /** Best of k is capped here, whatever a repository asks for. */
    maxAttempts: number;
    /** How often an agent step may be written to the status (0: every step). */
    statusIntervalMs: number;
  };
}

export function runSettingsFromEnv(env: Env): RunSettings {
  return {
    dataDir: env.LILYPAD_DATA_DIR,
    sandbox: {
      defaultImage: env.LILYPAD_SANDBOX_IMAGE,
      allowedImages: env.LILYPAD_ALLOWED_IMAGES,
      workdir: env.LILYPAD_SANDBOX_WORKDIR,
      user: env.LILYPAD_SANDBOX_USER,
      allowRootImage: env.LILYPAD_ALLOW_ROOT_IMAGES,
      memoryMb: env.LILYPAD_SANDBOX_MEMORY_MB,
      cpus: env.LILYPAD_SANDBOX_CPUS,
      pids: env.LILYPAD_SANDBOX_PIDS,
      diskMb: env.LILYPAD_SANDBOX_DISK_MB,
      maxLineBytes: env.LILYPAD_TOOLBOX_MAX_LINE_MB * 1024 * 1024,
    },
    model: {
      baseURL: env.OPENAI_BASE_URL,
      apiKey: env.OPENAI_API_KEY,
      name: env.LILYPAD_MODEL,
      timeoutMs: env.LILYPAD_MODEL_TIMEOUT_SECONDS * 1000,
      retries: env.LILYPAD_MODEL_RETRIES,
      retryBaseMs: env.LILYPAD_MODEL_RETRY_BASE_MS,
      maxResponseBytes: env.LILYPAD_MODEL_MAX_RESPONSE_MB * 1024 * 1024,
    },
    limits: {
      maxSteps: env.LILYPAD_MAX_STEPS,
      maxContextTokens: env.LILYPAD_MAX_CONTEXT_TOKENS,
      maxTokensPerTurn: env.LILYPAD_MAX_TOKENS_PER_TURN,
      maxWallSeconds: env.LILYPAD_MAX_WALL_SECONDS,
      bashTimeoutCapSeconds: env.LILYPAD_BASH_TIMEOUT_CAP_SECONDS,
      testTimeoutSeconds: env.LILYPAD_TEST_TIMEOUT_SECONDS,
      setupTimeoutSeconds: env.LILYPAD_SETUP_TIMEOUT_SECONDS,
      maxAttempts: env.LILYPAD_MAX_ATTEMPTS,
      statusIntervalMs: env.LILYPAD_STATUS_INTERVAL_MS,
    },
  };
}

/** A step runner for a context: a cancel stops the run before the phase; every phase is timed and recorded. */
export function phaseStepper(signal: AbortSignal, recorder: RunRecord, log: Logger, observe?: (name: string, seconds: number) => void): RunContext['step'] {
  return async (name, fn) => {
    if (signal.aborted) throw new CancelledError(reasonText(signal.reason));
    const t = Date.now();
    try {
      return await fn();
    } finally {
      const ms = Date.now() - t;
      observe?.(name, ms / 1000);
      recorder.phase(name, ms);
      log.info({ phase: name, ms }, `phase ${name}`);
    }
  };
}

/** Releases everything the run holds, newest first; a failing cleanup is logged, never thrown. */
export async function releaseRun(ctx: Pick<RunContext, 'cleanups' | 'log'>): Promise<void> {
  for (const cleanup of ctx.cleanups.splice(0).reverse()) await cleanup().catch((err: unknown) => ctx.log.warn({ err: (err as Error).message }, 'cleanup failed'));
}
