import { z } from 'zod';
import { sanitizeIssueText } from '../agent/prompt.ts';
import type { SecretScanner } from '../observability/secrets.ts';
import { escapeMentions } from '../shared/escape-mentions.ts';
import { DEFAULT_LOG_TAIL_LIMITS, fetchJobLogTail, type LogTail, type LogTailLimits } from './ci-job-log.ts';
import { failureSignature } from './ci-signature.ts';
import { statusOf, type GitHubClient } from './client.ts';

/**
 * The failing CI checks on a commit of Lilypad's own pull request, for a "fix CI" follow-up.
 *
 * How the excerpt is bounded (CI output is untrusted data: a job may print an issue body, a
 * comment by someone without write access, or anything a dependency writes):
 * - Whose: only check suites that ran on the pull request's branch in its own repository count
 *   (GitHub names the branch and links the pull request to such a suite). A suite that a fork's
 *   pull request ran on the same commit (GitHub gives it no branch and no pull request), or one of
 *   another branch, is not read: a fork's workflow prints whatever its author wants. Commit
 *   statuses carry no branch: only the contexts the repository names (`ci_status_contexts`) count.
 * - Which checks: check runs of CI apps only (`ciApps`: GitHub Actions and a short list of CI
 *   services, configurable), never Lilypad's own; commit statuses of the named contexts (any poster
 *   but Lilypad's bot) contribute only their context and their description, which GitHub caps at
 *   140 characters. Only completed runs with conclusion failure, timed_out or action_required
 *   count; a check that was cancelled, skipped or neutral is not a failure.
 * - How much: at most `maxChecks` checks; per check a summary of `summaryChars`, `annotations`
 *   annotations of `annotationChars` each, and for an Actions job the last `lines` lines and
 *   `bytes` bytes of its log (downloaded as a byte range of `downloadBytes` from the end; a line is
 *   cut after `lineChars`). pipeline/ci-fix-task.ts then fits all of it into a token budget.
 * - What is removed: every text goes through the issue-text hygiene (HTML comments, zero-width and
 *   bidi characters) and the SecretScanner (`redact`) before it is cut, after terminal escapes and
 *   control characters are stripped from the log (a log: every whole line read, ci-job-log.ts); `@mentions` become inline code (`@name` in backticks), so
 *   a name a log prints pings nobody wherever the text is passed on.
 * - How it is shown: in its own section of the task, log tails in fenced blocks, introduced as CI
 *   output to diagnose rather than instructions. It cannot be told apart from the repository's own
 *   output, so none of it is given the standing of a writer's instruction.
 */

export const DEFAULT_CI_APPS: readonly string[] = ['github-actions', 'circleci-checks', 'travis-ci', 'azure-pipelines', 'cirrus-ci'];

/** Check run conclusions that mean "this check failed"; cancelled, skipped, neutral, stale and success do not. */
const FAILING_CONCLUSIONS = new Set(['failure', 'timed_out', 'action_required']);
const FAILING_STATUS_STATES = new Set(['failure', 'error']);
/** GitHub Actions' own annotation for a failed step; the log tail shows the same line. */
const EXIT_CODE_ANNOTATION = /^Process completed with exit code \d+\.$/;
const MAX_PAGES = 10;

export interface CiFeedbackLimits extends LogTailLimits {
  maxChecks: number;
  summaryChars: number;
  annotations: number;
  annotationChars: number;
}

export const DEFAULT_CI_FEEDBACK_LIMITS: CiFeedbackLimits = {
  ...DEFAULT_LOG_TAIL_LIMITS,
  maxChecks: 8,
  summaryChars: 2_000,
  annotations: 20,
  annotationChars: 500,
};

export interface CiAnnotation {
  path: string;
  startLine: number;
  level: string;
  message: string;
}

export interface FailingCheck {
  source: 'check_run' | 'status';
  /** The check run's id (for GitHub Actions also the job's id) or the status's id. */
  id: number;
  /** The check run's name or the status's context. */
  name: string;
  /** The app's slug; null for a commit status. */
  app: string | null;
  /** The check run's conclusion or the status's state. */
  conclusion: string;
  /** Title and summary of the check run's output, or the status's description (cleaned, bounded). */
  summary: string;
  detailsUrl: string | null;
  /** The most severe annotations first, bounded. */
  annotations: CiAnnotation[];
  /** How many annotations the check has in all (GitHub's count). */
  annotationsTotal: number;
  /** GitHub Actions jobs: the end of the log. */
  log: LogTail | null;
  /** Why an Actions job has no log tail. */
  logUnavailable: string | null;
  /** Same value: fails the same way (ci-signature.ts). */
  signature: string;
}

export interface CiFeedback {
  headSha: string;
  failing: FailingCheck[];
  /** Names of CI checks not finished yet (queued or in progress, or a pending status). */
  pending: string[];
  /** CI checks that finished and did not fail. */
  passed: number;
  /** Failing checks beyond maxChecks, by name: not read further. */
  omitted: string[];
  /**
   * Left out: check runs whose app is not a CI app (by slug), Lilypad's own, check runs of suites
   * that did not run on the pull request's branch in its repository (`elsewhere`: a fork's pull
   * request on the same commit, another branch), and status contexts not named.
   */
  ignored: { otherApps: Record<string, number>; own: number; elsewhere: number; statusContexts: string[] };
  warnings: string[];
}

export interface FetchCiFeedbackOptions {
  owner: string;
  repo: string;
  headSha: string;
  /** The pull request whose CI this is: only suites that ran on its branch, in this repository, count. */
  pull: { number: number; branch: string };
  /** Lilypad's app slug: its check runs and its bot's statuses are never CI feedback. */
  ownAppSlug: string;
  /** Apps whose check runs are CI; default DEFAULT_CI_APPS. */
  ciApps?: readonly string[];
  /** The commit status contexts that count (`ci_status_contexts`); default none (statuses are not read). */
  statusContexts?: readonly string[];
  scanner: SecretScanner;
  limits?: Partial<CiFeedbackLimits>;
  signal?: AbortSignal;
}

/** GitHub refused or could not answer a question the feedback depends on; `message` says what to do. */
export class CiFeedbackError extends Error {
  override name = 'CiFeedbackError';
  constructor(
    message: string,
    readonly status: number | undefined,
  ) {
    super(message);
  }
}

const checkRunSchema = z.object({
  id: z.number(),
  name: z.string(),
  status: z.string(),
  conclusion: z.string().nullable(),
  details_url: z.string().nullable().optional(),
  html_url: z.string().nullable().optional(),
  output: z.object({ title: z.string().nullable(), summary: z.string().nullable(), text: z.string().nullable().optional(), annotations_count: z.number() }),
  app: z.object({ slug: z.string().optional() }).nullable(),
});
export type RestCheckRun = z.infer<typeof checkRunSchema>;
const checkRunsPage = z.object({ total_count: z.number(), check_runs: z.array(checkRunSchema) });

const checkSuiteSchema = z.object({
  id: z.number(),
  head_branch: z.string().nullable(),
  app: z.object({ slug: z.string().optional() }).nullable(),
  latest_check_runs_count: z.number(),
  repository: z.object({ id: z.number() }),
  pull_requests: z.array(z.object({ number: z.number(), head: z.object({ ref: z.string(), repo: z.object({ id: z.number() }) }) })).nullable(),
});
type RestCheckSuite = z.infer<typeof checkSuiteSchema>;
const checkSuitesPage = z.object({ total_count: z.number(), check_suites: z.array(checkSuiteSchema) });

/**
 * Whether the suite ran on the pull request's branch in the repository: GitHub names the branch
 * and links the pull request (whose head is in the suite's own repository) to it. A fork's suite
 * has neither (the Checks API does not see other repositories' branches).
 */
export function suiteOfPull(suite: Pick<RestCheckSuite, 'head_branch' | 'repository' | 'pull_requests'>, pull: { number: number; branch: string }): boolean {
  if (suite.head_branch !== pull.branch) return false;
  return (suite.pull_requests ?? []).some((p) => p.number === pull.number && p.head.ref === pull.branch && p.head.repo.id === suite.repository.id);
}

const annotationSchema = z.object({
  path: z.string(),
  start_line: z.number(),
  annotation_level: z.string().nullable(),
  title: z.string().nullable().optional(),
  message: z.string().nullable(),
});
export type RestAnnotation = z.infer<typeof annotationSchema>;

const statusSchema = z.object({
  id: z.number(),
  state: z.string(),
  context: z.string(),
  description: z.string().nullable(),
  target_url: z.string().nullable(),
  creator: z.object({ login: z.string() }).nullable().optional(),
});
export type RestStatus = z.infer<typeof statusSchema>;

/** Parses one check run as GitHub's REST API (or a check_run webhook) gives it; throws on another shape. */
export function parseCheckRun(raw: unknown): RestCheckRun {
  return checkRunSchema.parse(raw);
}

const LEVEL_RANK: Record<string, number> = { failure: 0, warning: 1, notice: 2 };

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)} [… ${text.length - max} more characters]` : text;
}

/** The cleaning every piece of CI text goes through: hidden text out, secrets redacted, mentions defused, bounded. */
function cleanText(text: string, max: number, scanner: SecretScanner): string {
  const visible = sanitizeIssueText(text.replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, '').replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '')).text;
  return clip(escapeMentions(scanner.redact(visible)).trim(), max);
}

/** The annotations worth showing, most severe first, bounded; the runner's exit-code note is left to the log. */
export function pickAnnotations(raw: readonly RestAnnotation[], limits: Pick<CiFeedbackLimits, 'annotations' | 'annotationChars'>, scanner: SecretScanner): CiAnnotation[] {
  return raw
    .filter((a) => !(a.path === '.github' && EXIT_CODE_ANNOTATION.test(a.message ?? '')))
    .map((a, i) => ({ a, i }))
    .sort((x, y) => (LEVEL_RANK[x.a.annotation_level ?? ''] ?? 3) - (LEVEL_RANK[y.a.annotation_level ?? ''] ?? 3) || x.i - y.i)
    .slice(0, limits.annotations)
    .map(({ a }) => ({
      path: cleanText(a.path, 300, scanner),
      startLine: a.start_line,
      level: a.annotation_level ?? 'failure',
      message: cleanText([a.title, a.message].filter((t): t is string => !!t && t.trim() !== '').join(': '), limits.annotationChars, scanner),
    }));
}

async function listPages<T>(client: GitHubClient, route: string, params: Record<string, unknown>, pick: (data: unknown) => { items: T[]; total: number }, signal: AbortSignal | undefined): Promise<T[]> {
  const out: T[] = [];
  for (let page = 1; page <= MAX_PAGES; page++) {
    const res = await client.request(route, { ...params, per_page: 100, page, ...(signal ? { request: { signal } } : {}) });
    const { items, total } = pick(res.data);
    out.push(...items);
    if (items.length < 100 || out.length >= total) break;
  }
  return out;
}

function refused(what: string, permission: string, err: unknown): CiFeedbackError {
  const status = statusOf(err);
  const reason = err instanceof Error ? err.message : String(err);
  if (status === 403) {
    return new CiFeedbackError(
      `GitHub refused to list the ${what} (403: ${reason}). The GitHub App needs the \`${permission}\` permission; an installation made before it was added must accept the new permissions in its settings.`,
      status,
    );
  }
  if (status === 404 || status === 422) return new CiFeedbackError(`GitHub does not know the commit whose ${what} were asked for (${status}: ${reason}); was the branch force-pushed?`, status);
  return new CiFeedbackError(`listing the ${what} failed: ${reason}`, status);
}

/** Reads the failing CI checks on `headSha`: check runs by CI apps and commit statuses, bounded and cleaned as described above. */
export async function fetchCiFeedback(client: GitHubClient, opts: FetchCiFeedbackOptions): Promise<CiFeedback> {
  const limits = { ...DEFAULT_CI_FEEDBACK_LIMITS, ...opts.limits };
  const ciApps = new Set((opts.ciApps ?? DEFAULT_CI_APPS).map((s) => s.toLowerCase()));
  const own = opts.ownAppSlug.toLowerCase();
  const base = { owner: opts.owner, repo: opts.repo };
  const feedback: CiFeedback = {
    headSha: opts.headSha,
    failing: [],
    pending: [],
    passed: 0,
    omitted: [],
    ignored: { otherApps: {}, own: 0, elsewhere: 0, statusContexts: [] },
    warnings: [],
  };
  const countOther = (slug: string, n: number) => {
    const key = slug || '(unknown app)';
    feedback.ignored.otherApps[key] = (feedback.ignored.otherApps[key] ?? 0) + n;
  };

  // 1. The commit's check suites: only those of the pull request's branch are read further. Then
  // their check runs (the latest of each name), sorted into CI failures, pending, passed and ignored.
  const runs: RestCheckRun[] = [];
  try {
    const suites = await listPages(client, 'GET /repos/{owner}/{repo}/commits/{ref}/check-suites', { ...base, ref: opts.headSha }, (d) => {
      const page = checkSuitesPage.parse(d);
      return { items: page.check_suites, total: page.total_count };
    }, opts.signal);
    for (const suite of suites) {
      const slug = (suite.app?.slug ?? '').toLowerCase();
      if (!suiteOfPull(suite, opts.pull)) feedback.ignored.elsewhere += suite.latest_check_runs_count;
      else if (slug === own) feedback.ignored.own += suite.latest_check_runs_count;
      else if (!ciApps.has(slug)) countOther(slug, suite.latest_check_runs_count);
      else {
        const route = 'GET /repos/{owner}/{repo}/check-suites/{check_suite_id}/check-runs';
        runs.push(...(await listPages(client, route, { ...base, check_suite_id: suite.id, filter: 'latest' }, (d) => {
          const page = checkRunsPage.parse(d);
          return { items: page.check_runs, total: page.total_count };
        }, opts.signal)));
      }
    }
  } catch (err) {
    if (opts.signal?.aborted || err instanceof z.ZodError) throw err;
    throw refused('check runs', 'checks: read', err);
  }
  const failingRuns: RestCheckRun[] = [];
  for (const run of runs) {
    // The suite's app said which app this is; a run names its own, which is checked again.
    const slug = (run.app?.slug ?? '').toLowerCase();
    if (slug === own) feedback.ignored.own++;
    else if (!ciApps.has(slug)) countOther(slug, 1);
    else if (run.status !== 'completed') feedback.pending.push(run.name);
    else if (run.conclusion !== null && FAILING_CONCLUSIONS.has(run.conclusion)) failingRuns.push(run);
    else feedback.passed++;
  }

  // 2. Commit statuses (the newest of each context) of the contexts the repository named.
  const failingStatuses: RestStatus[] = [];
  const named = new Set(opts.statusContexts ?? []);
  if (named.size > 0) {
    try {
      const all = await listPages(client, 'GET /repos/{owner}/{repo}/commits/{ref}/statuses', { ...base, ref: opts.headSha }, (d) => {
        const items = z.array(statusSchema).parse(d);
        return { items, total: Number.POSITIVE_INFINITY };
      }, opts.signal);
      const seen = new Set<string>();
      for (const st of all) {
        if (seen.has(st.context)) continue;
        seen.add(st.context);
        if (!named.has(st.context)) feedback.ignored.statusContexts.push(st.context);
        else if (st.creator?.login.toLowerCase() === `${own}[bot]`) continue;
        else if (FAILING_STATUS_STATES.has(st.state)) failingStatuses.push(st);
        else if (st.state === 'pending') feedback.pending.push(st.context);
        else feedback.passed++;
      }
    } catch (err) {
      if (opts.signal?.aborted || err instanceof z.ZodError) throw err;
      feedback.warnings.push(refused('commit statuses', 'statuses: read', err).message);
    }
  }

  // 3. Details of the failing ones, up to maxChecks: annotations, log tails, signatures.
  const all = [...failingRuns.map((r) => ({ kind: 'run' as const, r })), ...failingStatuses.map((s) => ({ kind: 'status' as const, s }))];
  for (const item of all.slice(limits.maxChecks)) feedback.omitted.push(item.kind === 'run' ? item.r.name : item.s.context);
  for (const item of all.slice(0, limits.maxChecks)) {
    feedback.failing.push(item.kind === 'run' ? await describeRun(client, opts, limits, item.r, feedback.warnings) : describeStatus(opts, limits, item.s));
  }
  return feedback;
}

async function describeRun(client: GitHubClient, opts: FetchCiFeedbackOptions, limits: CiFeedbackLimits, run: RestCheckRun, warnings: string[]): Promise<FailingCheck> {
  const base = { owner: opts.owner, repo: opts.repo };
  let annotations: CiAnnotation[] = [];
  if (run.output.annotations_count > 0) {
    try {
      const res = await client.request('GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations', { ...base, check_run_id: run.id, per_page: 100, ...(opts.signal ? { request: { signal: opts.signal } } : {}) });
      annotations = pickAnnotations(z.array(annotationSchema).parse(res.data), limits, opts.scanner);
    } catch (err) {
      if (opts.signal?.aborted || err instanceof z.ZodError) throw err;
      warnings.push(`the annotations of check "${run.name}" could not be read: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  let log: LogTail | null = null;
  let logUnavailable: string | null = null;
  if (run.app?.slug === 'github-actions') {
    const tail = await fetchJobLogTail(client, { ...base, jobId: run.id, scanner: opts.scanner, limits, ...(opts.signal ? { signal: opts.signal } : {}) });
    if (tail.ok) log = tail.tail;
    else logUnavailable = tail.reason;
  }
  const output = run.output;
  const summaryText = [output.title, output.summary].filter((t): t is string => !!t && t.trim() !== '').join('\n\n') || (output.text ?? '');
  const summary = cleanText(summaryText, limits.summaryChars, opts.scanner);
  return {
    source: 'check_run',
    id: run.id,
    name: cleanText(run.name, 200, opts.scanner),
    app: run.app?.slug ?? null,
    conclusion: run.conclusion ?? 'failure',
    summary,
    detailsUrl: run.details_url ?? run.html_url ?? null,
    annotations,
    annotationsTotal: output.annotations_count,
    log,
    logUnavailable,
    signature: failureSignature({ name: run.name, annotationMessages: annotations.map((a) => a.message), logLines: log?.lines ?? [], summary }),
  };
}

function describeStatus(opts: FetchCiFeedbackOptions, limits: CiFeedbackLimits, st: RestStatus): FailingCheck {
  const summary = cleanText(st.description ?? '', limits.summaryChars, opts.scanner);
  return {
    source: 'status',
    id: st.id,
    name: cleanText(st.context, 200, opts.scanner),
    app: null,
    conclusion: st.state,
    summary,
    detailsUrl: st.target_url,
    annotations: [],
    annotationsTotal: 0,
    log: null,
    logUnavailable: null,
    signature: failureSignature({ name: st.context, annotationMessages: [], logLines: [], summary }),
  };
}
