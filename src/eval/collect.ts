import { appendFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { parse as parseYaml } from 'yaml';
import { parseRepoConfig } from '../config/repo-config.ts';
import { CancelledError } from '../shared/cancel.ts';
import { git, gitRun } from '../workspace/git.ts';
import type { LocalCheckout } from '../workspace/local-clone.ts';
import { gitAuthEnv } from '../workspace/mirror.ts';
import { CollectError, RepoAccess, type IssueItem, type PullInfo, type TimelineItem } from './collect-github.ts';
import { testFileClassifier, type TestFileClassifier } from './collect-tests.ts';
import type { EvalInstance } from './instance.ts';
import { judgePatch, type JudgeResult, type JudgeSandbox } from './judge.ts';
import { RepoCache } from './repo-source.ts';
import { LABEL_EVAL } from './runner.ts';
import { detectFramework, parseTestOutput, type TestFramework, type TestStatusMap } from '../test-results/judging.ts';
import type { Env } from '../config/env.ts';

/**
 * `lilypad eval collect`: evaluation instances from a repository's own history. For each closed
 * issue (newest first): the pull request that closed it (timeline), its diff split into the fix and
 * the tests, and the tests run in the sandbox with the test changes only and with the fix as well;
 * the tests that fail before and pass after are FAIL_TO_PASS, those that pass in both PASS_TO_PASS.
 * An instance is written only when it validates as `lilypad eval run --validate` checks it.
 */

export type SkipReason =
  | 'not_planned'
  | 'no_linked_pr'
  | 'pr_not_merged'
  | 'ambiguous_pr'
  | 'pr_head_unavailable'
  | 'no_test_changes'
  | 'no_non_test_changes'
  | 'patch_does_not_apply'
  | 'tests_could_not_run'
  | 'tests_not_parsed'
  | 'no_fail_to_pass'
  | 'does_not_validate'
  | 'error';

export interface SkipRecord {
  issue: number;
  instance_id: string;
  html_url: string;
  reason: SkipReason;
  detail: string;
  pull_request?: number;
}

export interface CollectOptions {
  env: Env;
  /** owner/name */
  repo: string;
  since?: string | undefined;
  limit?: number | undefined;
  outFile: string;
  testCommand?: string | undefined;
  testPatterns?: readonly string[] | undefined;
  /** The sandbox's settings; `image` is the default, .github/lilypad.yml's `image` wins. */
  sandbox: JudgeSandbox;
  docker: Docker;
  signal: AbortSignal;
  stderr: NodeJS.WritableStream;
}

export interface CollectSummary {
  written: number;
  skipped: SkipRecord[];
  examined: number;
  skippedFile: string;
  interrupted: boolean;
}

/** `issues.jsonl` → `issues.skipped.jsonl`. */
export function skippedFileFor(outFile: string): string {
  return outFile.endsWith('.jsonl') ? `${outFile.slice(0, -'.jsonl'.length)}.skipped.jsonl` : `${outFile}.skipped.jsonl`;
}

class Skip extends Error {
  constructor(
    readonly reason: SkipReason,
    readonly detail: string,
    readonly pull?: number,
  ) {
    super(detail);
  }
}

/**
 * Checkouts for judging, made from the collector's own bare clone: a shallow fetch of exactly the
 * commit asked for (the clone holds the pull requests' heads, which a plain clone would leave out).
 */
class CloneCheckouts extends RepoCache {
  constructor(private readonly bare: string) {
    super(path.join(path.dirname(bare), 'unused'), { protocol: 'https' });
  }

  override async checkout(_repo: string, commit: string): Promise<LocalCheckout> {
    const parent = await mkdtemp(path.join(os.tmpdir(), 'lilypad-collect-'));
    const dir = path.join(parent, 'repo');
    try {
      await git(['init', '--quiet', dir]);
      await git(['fetch', '--quiet', '--no-tags', '--depth', '1', '--', this.bare, commit], { cwd: dir });
      await git(['checkout', '--quiet', '--detach', 'FETCH_HEAD'], { cwd: dir });
      return { dir, baseCommit: commit, sourceDirty: false, dispose: () => rm(parent, { recursive: true, force: true }) };
    } catch (err) {
      await rm(parent, { recursive: true, force: true });
      throw err;
    }
  }
}

const REFSPECS = ['+refs/heads/*:refs/heads/*', '+refs/tags/*:refs/tags/*'];
const CLOSING = /\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+/i;

/** Whether `text` closes issue `n` of `full` with one of GitHub's keywords. */
export function closesIssue(text: string | null | undefined, full: string, n: number): boolean {
  if (!text) return false;
  const esc = full.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`${CLOSING.source}(?:${esc})?#${n}(?!\\d)`, 'i').test(text) || new RegExp(`${CLOSING.source}https?://\\S+/${esc}/issues/${n}(?!\\d)`, 'i').test(text);
}

export async function collectInstances(opts: CollectOptions): Promise<CollectSummary> {
  const [owner, name] = opts.repo.split('/') as [string, string];
  const full = `${owner}/${name}`;
  const skippedFile = skippedFileFor(opts.outFile);
  const summary: CollectSummary = { written: 0, skipped: [], examined: 0, skippedFile, interrupted: false };
  const say = (line: string) => opts.stderr.write(`lilypad eval collect: ${line}\n`);

  const access = await RepoAccess.connect(opts.env, owner, name);
  const work = await mkdtemp(path.join(os.tmpdir(), 'lilypad-collect-'));
  try {
    const repoInfo = await access.repository();
    const bare = path.join(work, 'repo.git');
    await git(['init', '--bare', '--quiet', bare]);
    // Judging fetches single commits (a pull request's base) from this clone.
    await git(['config', 'uploadpack.allowAnySHA1InWant', 'true'], { cwd: bare });
    const fetch = async (refspecs: string[]) =>
      gitRun(['fetch', '--quiet', '--no-tags', '--no-auto-gc', '--', access.cloneUrl, ...refspecs], { cwd: bare, env: gitAuthEnv(await access.gitAuthHeader()) });
    const first = await fetch(REFSPECS);
    if (first.code !== 0) throw new CollectError(`could not fetch ${full} from ${access.cloneUrl}: ${first.stderr.trim()}`);

    // What runs the tests: --test-command, else `test` in the repository's .github/lilypad.yml.
    const config = await readRepoConfig(bare, repoInfo.default_branch);
    if (config.problems.length && !opts.testCommand) {
      throw new CollectError(`${full}'s .github/lilypad.yml is not valid: ${config.problems.join('; ')}; fix it or give --test-command`);
    }
    const testCommand = opts.testCommand ?? config.test;
    if (!testCommand) {
      throw new CollectError(`${full} has no \`test\` in .github/lilypad.yml on ${repoInfo.default_branch}: give the command that runs its tests with --test-command (e.g. "python3 -m pytest")`);
    }
    const framework = detectFramework(testCommand);
    const setup = config.setup;
    const sandbox: JudgeSandbox = {
      ...opts.sandbox,
      image: config.image ?? opts.sandbox.image,
      testTimeoutSeconds: Math.min(opts.sandbox.testTimeoutSeconds, (config.testTimeoutMinutes ?? Infinity) * 60),
    };
    const classifier = testFileClassifier(opts.testPatterns);
    const repos = new CloneCheckouts(bare);
    const runId = `collect-${Date.now().toString(36)}`;

    await mkdir(path.dirname(path.resolve(opts.outFile)), { recursive: true });
    await writeFile(opts.outFile, '');
    await writeFile(skippedFile, '');

    for await (const issue of access.closedIssues(opts.since)) {
      if (opts.signal.aborted) break;
      if (opts.limit !== undefined && summary.written >= opts.limit) break;
      summary.examined++;
      const instanceId = `${owner}__${name}-${issue.number}`;
      try {
        const inst = await buildInstance({ access, issue, instanceId, full, bare, fetch, classifier, testCommand, framework, configImage: config.image, setup, sandbox, repos, runId, opts });
        await appendFile(opts.outFile, `${JSON.stringify(inst)}\n`);
        summary.written++;
        say(`#${issue.number} → ${instanceId} (FAIL_TO_PASS ${inst.FAIL_TO_PASS.length}, PASS_TO_PASS ${inst.PASS_TO_PASS.length})`);
      } catch (err) {
        if (opts.signal.aborted || err instanceof CancelledError) {
          summary.interrupted = true;
          break;
        }
        if (err instanceof CollectError && !(err instanceof Skip)) throw err;
        const skip = err instanceof Skip ? err : new Skip('error', (err as Error).message);
        const record: SkipRecord = {
          issue: issue.number,
          instance_id: instanceId,
          html_url: issue.html_url,
          reason: skip.reason,
          detail: skip.detail,
          ...(skip.pull !== undefined ? { pull_request: skip.pull } : {}),
        };
        summary.skipped.push(record);
        await appendFile(skippedFile, `${JSON.stringify(record)}\n`);
        say(`skipped #${issue.number} (${skip.reason.replace(/_/g, ' ')}): ${skip.detail}`);
      }
    }
    if (opts.signal.aborted) summary.interrupted = true;
    return summary;
  } finally {
    await access.revokeAll();
    await rm(work, { recursive: true, force: true });
  }
}

interface RepoSettings {
  test?: string | undefined;
  image?: string | undefined;
  setup: string[];
  testTimeoutMinutes?: number | undefined;
  problems: string[];
}

async function readRepoConfig(bare: string, branch: string): Promise<RepoSettings> {
  const res = await gitRun(['show', `refs/heads/${branch}:.github/lilypad.yml`], { cwd: bare });
  if (res.code !== 0) return { setup: [], problems: [] };
  let raw: unknown;
  try {
    raw = parseYaml(res.stdout);
  } catch (err) {
    return { setup: [], problems: [`not valid YAML: ${(err as Error).message}`] };
  }
  const parsed = parseRepoConfig(raw, '.github/lilypad.yml');
  if (!parsed.ok) return { setup: [], problems: parsed.problems };
  const c = parsed.config;
  return { test: c.test, image: c.image, setup: c.setup, testTimeoutMinutes: c.test_timeout_minutes, problems: [] };
}

interface BuildContext {
  access: RepoAccess;
  issue: IssueItem;
  instanceId: string;
  full: string;
  bare: string;
  fetch: (refspecs: string[]) => Promise<{ code: number; stderr: string }>;
  classifier: TestFileClassifier;
  testCommand: string;
  framework: TestFramework | null;
  /** `image` from .github/lilypad.yml, written into the instance. */
  configImage: string | undefined;
  setup: string[];
  sandbox: JudgeSandbox;
  repos: RepoCache;
  runId: string;
  opts: CollectOptions;
}

/** One line of the output: an instance as `lilypad eval run` reads it, plus where it came from. */
export interface CollectedInstance {
  instance_id: string;
  repo: string;
  base_commit: string;
  problem_statement: string;
  patch: string;
  test_patch: string;
  FAIL_TO_PASS: string[];
  PASS_TO_PASS: string[];
  test_command: string;
  image?: string;
  setup?: string[];
  test_framework?: TestFramework;
  created_at: string;
  issue_number: number;
  pull_number: number;
}

async function buildInstance(c: BuildContext): Promise<CollectedInstance> {
  const { issue } = c;
  if (issue.state_reason === 'not_planned') throw new Skip('not_planned', 'the issue was closed as not planned');
  const pull = await linkedPull(c);
  const diff = await pullDiff(c, pull);

  const problem = `${issue.title}\n${issue.body ?? ''}`.trim();
  const base: EvalInstance = {
    instance_id: c.instanceId,
    repo: c.bare,
    base_commit: diff.base,
    problem_statement: problem,
    patch: diff.patch,
    test_patch: diff.testPatch,
    FAIL_TO_PASS: [],
    PASS_TO_PASS: [],
    test_command: c.testCommand,
    setup: c.setup,
  };
  const judge = (instance: EvalInstance, patch: string | null, tag: string) =>
    judgePatch({
      instance,
      patch,
      runWithoutPatch: patch === null,
      repos: c.repos,
      docker: c.opts.docker,
      sandbox: c.sandbox,
      runId: `${c.runId}-${tag}-${issue.number}`,
      labels: { [LABEL_EVAL]: c.runId },
      signal: c.opts.signal,
    });

  // The whole suite with the test changes only, then with the fix too.
  const before = await judge(base, null, 'before');
  if (before.error) throw new Skip(judgeErrorReason(before.error), `with the test changes only: ${before.error}`, pull.number);
  const after = await judge(base, diff.patch, 'after');
  if (after.applyError) throw new Skip('patch_does_not_apply', `the fix does not apply to ${diff.base.slice(0, 12)}: ${after.applyError}`, pull.number);
  if (after.error) throw new Skip(judgeErrorReason(after.error), `with the fix: ${after.error}`, pull.number);
  const beforeMap = parseTestOutput(c.framework, before.output);
  const afterMap = parseTestOutput(c.framework, after.output);
  if (afterMap.size === 0) {
    throw new Skip(
      'tests_not_parsed',
      `no per-test results could be read from \`${after.command}\` (exit ${after.exitCode}${after.timedOut ? ', timed out' : ''}); use a runner Lilypad reads (pytest, unittest -v, node --test) with --test-command. Output ends: ${tail(after.output)}`,
      pull.number,
    );
  }
  const { failToPass, passToPass } = compareRuns(beforeMap, afterMap);
  if (failToPass.length === 0) {
    throw new Skip('no_fail_to_pass', `no test fails with the test changes only and passes with the fix (${afterMap.size} test(s) ran)`, pull.number);
  }

  // Validate as `lilypad eval run --validate` does: the gold patch resolves the instance, and
  // without it every FAIL_TO_PASS test fails and every PASS_TO_PASS test passes.
  const instance: EvalInstance = { ...base, FAIL_TO_PASS: failToPass, PASS_TO_PASS: passToPass };
  const problems = validationProblems(await judge(instance, diff.patch, 'gold'), await judge(instance, null, 'base'));
  if (problems.length) throw new Skip('does_not_validate', problems.join('; '), pull.number);

  const out: CollectedInstance = {
    instance_id: c.instanceId,
    repo: c.full,
    base_commit: diff.base,
    problem_statement: problem,
    patch: diff.patch,
    test_patch: diff.testPatch,
    FAIL_TO_PASS: failToPass,
    PASS_TO_PASS: passToPass,
    test_command: c.testCommand,
    ...(c.configImage ? { image: c.configImage } : {}),
    ...(c.setup.length ? { setup: c.setup } : {}),
    ...(c.framework ? { test_framework: c.framework } : {}),
    created_at: pull.created_at,
    issue_number: issue.number,
    pull_number: pull.number,
  };
  return out;
}

/** judge.ts's errors: the test changes not applying, the repository's setup failing, or the sandbox (Lilypad's side). */
function judgeErrorReason(error: string): SkipReason {
  if (/test_patch does not apply/.test(error)) return 'patch_does_not_apply';
  if (/could not run in the sandbox/.test(error)) return 'error';
  return 'tests_could_not_run';
}

const tail = (s: string) => JSON.stringify(s.trim().slice(-300));

/** FAIL_TO_PASS: passed after and did not pass before (failed, errored, skipped or not run); PASS_TO_PASS: passed in both. */
export function compareRuns(before: TestStatusMap, after: TestStatusMap): { failToPass: string[]; passToPass: string[] } {
  const failToPass: string[] = [];
  const passToPass: string[] = [];
  for (const [id, status] of after) {
    if (status !== 'passed') continue;
    (before.get(id) === 'passed' ? passToPass : failToPass).push(id);
  }
  return { failToPass: failToPass.sort(), passToPass: passToPass.sort() };
}

function validationProblems(gold: JudgeResult, none: JudgeResult): string[] {
  const problems: string[] = [];
  if (gold.applyError) problems.push(`the fix does not apply: ${gold.applyError}`);
  if (gold.error) problems.push(gold.error);
  const g = gold.report.tests_status;
  if (g.FAIL_TO_PASS.failure.length) problems.push(`run by id with the fix, FAIL_TO_PASS tests fail: ${g.FAIL_TO_PASS.failure.join(', ')} (flaky, or not runnable by id)`);
  if (g.PASS_TO_PASS.failure.length) problems.push(`run by id with the fix, PASS_TO_PASS tests fail: ${g.PASS_TO_PASS.failure.join(', ')}`);
  if (none.error) problems.push(`without the fix: ${none.error}`);
  const b = none.report.tests_status;
  if (b.FAIL_TO_PASS.success.length) problems.push(`run by id without the fix, FAIL_TO_PASS tests pass: ${b.FAIL_TO_PASS.success.join(', ')}`);
  if (b.PASS_TO_PASS.failure.length) problems.push(`run by id without the fix, PASS_TO_PASS tests fail: ${b.PASS_TO_PASS.failure.join(', ')}`);
  return problems;
}

/**
 * The merged pull request that fixed the issue, from its timeline: the pull requests of this
 * repository that reference it (`cross-referenced`), narrowed by the `closed` event's commit (the
 * merge commit of the pull request that closed it), else by a closing keyword (`Fixes #N`), else
 * the only one merged.
 */
async function linkedPull(c: BuildContext): Promise<PullInfo> {
  const timeline = await c.access.timeline(c.issue.number);
  const sameRepo = (item: TimelineItem) => (item.source?.issue?.repository?.full_name ?? c.full).toLowerCase() === c.full.toLowerCase();
  const refs = timeline.filter((t) => t.event === 'cross-referenced' && t.source?.issue?.pull_request);
  const numbers = [...new Set(refs.filter(sameRepo).map((t) => t.source!.issue!.number))];
  if (numbers.length === 0) {
    const elsewhere = refs.filter((t) => !sameRepo(t)).map((t) => `${t.source!.issue!.repository!.full_name}#${t.source!.issue!.number}`);
    throw new Skip('no_linked_pr', elsewhere.length ? `only pull requests in other repositories reference it (${elsewhere.join(', ')})` : 'no pull request references the issue');
  }
  const pulls = await Promise.all(numbers.map((n) => c.access.pull(n)));
  const merged = pulls.filter((p) => p.merged === true || p.merged_at !== null);
  if (merged.length === 0) {
    throw new Skip('pr_not_merged', `the pull request(s) that reference it were not merged: ${pulls.map((p) => `#${p.number} (${p.state === 'open' ? 'open' : 'closed without merging'})`).join(', ')}`, pulls[0]!.number);
  }
  const closingCommits = new Set(timeline.filter((t) => t.event === 'closed' && t.commit_id).map((t) => t.commit_id!));
  const byCommit = merged.filter((p) => p.merge_commit_sha && closingCommits.has(p.merge_commit_sha));
  if (byCommit.length === 1) return byCommit[0]!;
  const byKeyword = merged.filter((p) => closesIssue(p.body, c.full, c.issue.number) || closesIssue(p.title, c.full, c.issue.number));
  if (byKeyword.length === 1) return byKeyword[0]!;
  if (merged.length === 1) return merged[0]!;
  throw new Skip('ambiguous_pr', `several merged pull requests reference it and none is marked as closing it: ${merged.map((p) => `#${p.number}`).join(', ')}`);
}

const commitExists = async (bare: string, sha: string) => (await gitRun(['cat-file', '-e', `${sha}^{commit}`], { cwd: bare })).code === 0;

/**
 * The pull request's changes as git sees them: from the merge base of its base and head commits
 * (the commit the change was built on) to its head, fetched as `refs/pull/N/head` when the branch
 * is gone. Without the head (a force-push lost it), the merge commit against its first parent.
 * Renames count as a deletion and an addition, so that each path is classified on its own.
 */
async function pullDiff(c: BuildContext, pull: PullInfo): Promise<{ base: string; patch: string; testPatch: string }> {
  let head = pull.head.sha;
  if (!(await commitExists(c.bare, head))) await c.fetch([`+refs/pull/${pull.number}/head:refs/pull/${pull.number}/head`]);
  let base: string | null = null;
  if (await commitExists(c.bare, head)) {
    const onto = (await commitExists(c.bare, pull.base.sha)) ? pull.base.sha : pull.merge_commit_sha ? `${pull.merge_commit_sha}^1` : null;
    const mb = onto ? await gitRun(['merge-base', onto, head], { cwd: c.bare }) : null;
    if (mb && mb.code === 0) base = mb.stdout.trim();
  }
  if (!base && pull.merge_commit_sha && (await commitExists(c.bare, pull.merge_commit_sha))) {
    head = pull.merge_commit_sha;
    base = (await git(['rev-parse', `${head}^1`], { cwd: c.bare })).trim();
  }
  if (!base) throw new Skip('pr_head_unavailable', `neither the head ${pull.head.sha.slice(0, 12)} nor the merge commit of #${pull.number} could be fetched`, pull.number);

  const names = (await git(['diff', '--name-only', '-z', '--no-renames', base, head], { cwd: c.bare })).split('\0').filter(Boolean);
  const { tests, other } = c.classifier.split(names);
  const listed = (paths: string[]) => (paths.length ? paths.join(', ') : 'none');
  if (tests.length === 0) throw new Skip('no_test_changes', `#${pull.number} changes no test file (${listed(other)}); test files are recognised by ${c.classifier.patterns.join(' ')}`, pull.number);
  if (other.length === 0) throw new Skip('no_non_test_changes', `#${pull.number} changes only test files (${listed(tests)})`, pull.number);
  const diffOf = (paths: string[]) => git(['diff', '--binary', '--no-renames', '--no-color', '--no-ext-diff', base, head, '--', ...paths.map((p) => `:(literal)${p}`)], { cwd: c.bare });
  return { base, patch: await diffOf(other), testPatch: await diffOf(tests) };
}
