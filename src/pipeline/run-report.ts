import type { EvidenceSummary, PerTestChanges } from '../github/pull-request-body.ts';
import { describeEnvCache, type EnvCacheReport } from '../sandbox/env-cache/index.ts';
import type { SetupReport } from './environment.ts';
import type { RunComparison } from '../test-results/index.ts';
import type { TestOutcome } from '../test-results/test-outcome.ts';
import type { EffectiveConfig, ValueSource } from './effective-config.ts';
import type { SandboxSessionResult } from './sandbox-session.ts';
import { describeTestCache, type TestCacheReport } from './test-cache.ts';
import type { SandboxRun } from './phases/attempts.ts';

/** What setup was, where it came from and how it went: result.json's `setup`, the run page's and the pull request's. */
export interface SetupSection {
  /** Each command as it ran, with its outcome (a failing one ends the list). */
  commands: TestOutcome[];
  /** The commands setup was to run, in order. */
  planned: string[];
  source: ValueSource;
  /** With source `inferred`: the files it was worked out from. */
  inferred_from: string[];
  network: 'egress proxy' | 'none';
  /** An inferred command that failed; the run went on without the rest of setup. */
  failed: string | null;
  env_cache: EnvCacheReport | null;
}

/** The test command, where it came from, and what changed per test: result.json's `tests`. */
export interface TestsSection {
  command: string;
  source: ValueSource;
  inferred_from: string[];
  runner: string | null;
  before: TestOutcome | null;
  after: TestOutcome | null;
  /** Why the tests after the change did not run, where that is known: `no change` (they would be the tests before). */
  after_not_run: string | null;
  /** Failed (or errored) before, pass after. */
  fixed: string[];
  /** Passed before, fail after. */
  broken: string[];
  still_failing: string[];
  counts: { fixed: number; broken: number; still_failing: number; passed_both: number; skipped: number; added: number; removed: number };
  /** Why the tests could not be compared per test (then the exit codes judge), or null. */
  per_test_fallback: string | null;
  /** The test runner's cache carried from the baseline's own sandbox to the agent's, or why not (null: nothing to carry). */
  cache: TestCacheReport | null;
}

export function setupSection(effective: EffectiveConfig, session: SandboxSessionResult | null, network: boolean, ran: TestOutcome[]): SetupSection | null {
  const planned = effective.config.setup;
  if (planned.length === 0) return null;
  const source = effective.sources.setup;
  return {
    commands: session?.setup.commands.length ? session.setup.commands : ran,
    planned,
    source,
    inferred_from: source === 'inferred' ? (effective.inferred?.setup.inferred_from ?? []) : [],
    network: network ? 'egress proxy' : 'none',
    failed: session?.setup.failed ?? null,
    env_cache: session?.setup.envCache ?? null,
  };
}

export function testsSection(effective: EffectiveConfig, session: SandboxSessionResult | null, runner: string | null): TestsSection | null {
  const command = effective.config.test;
  if (!command) return null;
  const source = effective.sources.test;
  const tests = session?.tests ?? null;
  const v: RunComparison | null = tests?.verdicts ?? null;
  return {
    command,
    source,
    inferred_from: source === 'inferred' ? (effective.inferred?.test.inferred_from ?? []) : [],
    runner,
    before: tests?.before ?? null,
    after: tests?.after ?? null,
    after_not_run: tests?.afterNotRun ?? null,
    fixed: v?.fixed ?? [],
    broken: v?.broken ?? [],
    still_failing: v?.still_failing ?? [],
    counts: {
      fixed: v?.counts.fixed ?? 0,
      broken: v?.counts.broken ?? 0,
      still_failing: v?.counts.still_failing ?? 0,
      passed_both: v?.counts.passed_both ?? 0,
      skipped: v?.counts.skipped ?? 0,
      added: v?.counts.only_after ?? 0,
      removed: v?.counts.only_before ?? 0,
    },
    per_test_fallback: v ? (v.fallback?.reason ?? null) : tests?.after ? 'the tests on the untouched code did not run' : null,
    cache: tests?.cache ?? null,
  };
}

/** The evidence as the pull request shows it (null: no tests ran after the change). */
export function evidenceSummary(session: SandboxSessionResult, run?: SandboxRun): EvidenceSummary | null {
  const e = session.evidence;
  if (!e) return null;
  const v = e.evidence;
  const repro = run ? reproductionLine(run) : null;
  const d = e.disagreement;
  return { verdict: v.verdict, reproduction: v.reproduction, fixed: v.fixed, broken: v.broken, weakened: v.weakened, notes: v.notes, changeTests: e.changeTests, reproductionRun: repro, disagreement: d ? { tests: d.tests, outside: d.outside, outsideMore: d.outsideMore } : null };
}

/** The pull request's evidence label: verified, or not (null: no evidence was gathered). */
export function evidenceLabel(session: SandboxSessionResult): string | null {
  const verdict = session.evidence?.evidence.verdict;
  if (!verdict) return null;
  return verdict === 'verified' ? 'lilypad:verified' : 'lilypad:unverified';
}

/** result.json's `reproduction`: the run that wrote a test before the fix (`reproduce: true`). */
export function reproductionSection(run: SandboxRun | null): Record<string, unknown> | null {
  const r = run?.reproduction;
  if (!r) return null;
  const a = r.run.session.agent;
  return {
    kept: r.kept !== null,
    why: r.why,
    files: r.kept?.files ?? [],
    tests: r.kept?.ids ?? [],
    exit_reason: a.exitReason,
    steps: a.steps,
    tokens: { prompt_tokens: a.usage.prompt_tokens, completion_tokens: a.usage.completion_tokens },
  };
}

/** One line for the pull request's Evidence section: where the reproduction test came from. */
export function reproductionLine(run: SandboxRun): string | null {
  const r = run.reproduction;
  if (!r) return null;
  if (!r.kept) return `A separate run was asked to write a test reproducing the issue first (\`reproduce: true\`); none was kept: ${r.why}.`;
  return `The reproduction test (${r.kept.files.map((f) => `\`${f}\``).join(', ')}) was written by a separate run before the fix, and kept because ${r.why}; it is part of this pull request.`;
}

/** result.json's `evidence`. */
export function evidenceSection(session: SandboxSessionResult | null): Record<string, unknown> | null {
  const e = session?.evidence;
  if (!e) return session?.evidenceError ? { verdict: null, error: session.evidenceError } : null;
  const v = e.evidence;
  const d = e.disagreement;
  const disagreement = d ? { tests: d.tests, command: d.command, outside_change: d.outside, outside_change_more: d.outsideMore } : null;
  return { verdict: v.verdict, reproduction: v.reproduction, fixed: v.fixed, broken: v.broken, weakened: v.weakened, still_failing: v.still_failing, notes: v.notes, change_tests: e.changeTests, sandbox_disagreement: disagreement };
}

/** The per-test changes as the pull request names them. */
export function perTestChanges(v: RunComparison | null): PerTestChanges | null {
  if (!v) return null;
  return { fixed: v.fixed, broken: v.broken, stillFailing: v.counts.still_failing, passing: v.counts.passed_both, fallback: v.fallback?.reason ?? null };
}

/** What the run page says of the test runner's cache: only when it could not be carried (the tests after then ran slower). */
export function testCacheNotes(tests: SandboxSessionResult['tests']): string[] {
  const cache = tests?.cache;
  if (!cache || cache.carried) return [];
  const line = describeTestCache(cache);
  return [`${line.charAt(0).toUpperCase()}${line.slice(1)}.`];
}

/** What setup did that a reviewer should know: an inferred command that failed, a kept environment. */
export function setupNotes(setup: SetupReport): string[] {
  const notes: string[] = [];
  if (setup.failed) {
    const ran = setup.commands.find((c) => c.command === setup.failed);
    notes.push(`⚠️ The inferred setup command \`${setup.failed.replace(/`/g, "'")}\` failed${ran?.exitCode !== null && ran?.exitCode !== undefined ? ` (exit ${ran.exitCode})` : ''}; the run went on without the rest of setup.`);
  }
  if (setup.envCache.result === 'hit') notes.push(`Environment: ${describeEnvCache(setup.envCache)}.`);
  return notes;
}

