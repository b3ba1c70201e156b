import type { RegisteredManifest } from './manifest.ts';
/**
 * Public types of the GitHub Enterprise Server stand-in.
 *
 * The resource types (`User`, `Repo`, `Issue`, `IssueEvent`, `Comment`, `Pull`, `Reaction`, `Installation`) are the
 * JSON shapes the REST API returns (the fields Octokit, Probot and Lilypad read, plus the usual
 * `*_url` fields); the inspection helpers return fresh snapshots in the same shapes.
 */

export type AccessLevel = 'read' | 'write';
/** A repository role as set with addCollaborator; GitHub's legacy `permission` maps maintain→write, triage→read. */
export type RoleName = 'admin' | 'maintain' | 'write' | 'triage' | 'read';
/** App / installation / token permissions, e.g. `{ issues: 'write', metadata: 'read' }`. */
export type PermissionSet = Record<string, AccessLevel>;
export type ReactionContent = '+1' | '-1' | 'laugh' | 'confused' | 'heart' | 'hooray' | 'rocket' | 'eyes';

export interface StandinOptions {
  /** Default: a random 20-byte hex string. */
  webhookSecret?: string;
  /** Default: 1. */
  appId?: number;
  /** Default: 'lilypad'. The app's bot user is `${appSlug}[bot]`. */
  appSlug?: string;
  /** Lifetime of installation access tokens. Default 3600 (GitHub's one hour). */
  tokenTtlSeconds?: number;
  /** The app's permissions (every installation gets them). Default: metadata read, contents/issues/pull_requests write. */
  permissions?: PermissionSet;
  /** Events the app subscribes to (reported by GET /app). Default: issues, issue_comment, pull_request. */
  events?: string[];
  /**
   * Hold every REST request and JSON answer to GitHub's published descriptions (conformance.ts).
   * Default true; false only for tests that send the stand-in what GitHub would refuse on purpose.
   */
  conformance?: boolean;
}

/** GitHub's `simple-user` shape. */
export interface User {
  login: string;
  id: number;
  node_id: string;
  avatar_url: string;
  gravatar_id: string;
  url: string;
  html_url: string;
  followers_url: string;
  following_url: string;
  gists_url: string;
  starred_url: string;
  subscriptions_url: string;
  organizations_url: string;
  repos_url: string;
  events_url: string;
  received_events_url: string;
  type: 'User' | 'Bot' | 'Organization';
  user_view_type: 'public' | 'private';
  site_admin: boolean;
}

export interface Installation {
  id: number;
  client_id: string;
  account: User;
  repository_selection: 'all' | 'selected';
  access_tokens_url: string;
  repositories_url: string;
  html_url: string;
  app_id: number;
  app_slug: string;
  target_id: number;
  target_type: 'User' | 'Organization';
  permissions: PermissionSet;
  events: string[];
  created_at: string;
  updated_at: string;
  single_file_name: null;
  has_multiple_single_files: boolean;
  single_file_paths: string[];
  suspended_by: null;
  suspended_at: null;
}

export interface Label {
  id: number;
  node_id: string;
  url: string;
  name: string;
  color: string;
  default: boolean;
  description: string | null;
}

/** GitHub's full `repository` shape (the fields that matter typed; the `*_url` templates and the rest as unknown). */
export interface Repo {
  id: number;
  node_id: string;
  name: string;
  full_name: string;
  private: boolean;
  owner: User;
  html_url: string;
  description: string | null;
  fork: boolean;
  url: string;
  clone_url: string;
  git_url: string;
  ssh_url: string;
  svn_url: string;
  created_at: string;
  updated_at: string;
  pushed_at: string;
  default_branch: string;
  visibility: 'public' | 'private';
  archived: boolean;
  disabled: boolean;
  open_issues_count: number;
  [other: string]: unknown;
}

export interface ReactionRollup {
  url: string;
  total_count: number;
  '+1': number;
  '-1': number;
  laugh: number;
  hooray: number;
  confused: number;
  heart: number;
  rocket: number;
  eyes: number;
}

/** The GitHub App as GET /app returns it (also `performed_via_github_app`). */
export interface App {
  id: number;
  slug: string;
  node_id: string;
  client_id: string;
  owner: User;
  name: string;
  description: string;
  external_url: string;
  html_url: string;
  created_at: string;
  updated_at: string;
  permissions: PermissionSet;
  events: string[];
  installations_count: number;
}

export interface Issue {
  url: string;
  repository_url: string;
  labels_url: string;
  comments_url: string;
  events_url: string;
  html_url: string;
  id: number;
  node_id: string;
  number: number;
  title: string;
  user: User;
  labels: Label[];
  state: 'open' | 'closed';
  locked: boolean;
  assignee: null;
  assignees: User[];
  milestone: null;
  comments: number;
  created_at: string;
  updated_at: string;
  closed_at: string | null;
  author_association: string;
  active_lock_reason: null;
  /** Only on issues that are pull requests. */
  draft?: boolean;
  /** Only on issues that are pull requests. */
  pull_request?: { url: string; html_url: string; diff_url: string; patch_url: string; merged_at: string | null };
  body: string | null;
  closed_by: User | null;
  reactions: ReactionRollup;
  timeline_url: string;
  performed_via_github_app: App | null;
  state_reason: 'completed' | 'not_planned' | 'reopened' | null;
}

/** An issue as GET /search/issues returns it: the GET /repos/{o}/{r}/issues/{n} shape plus `score`. */
export interface IssueSearchItem extends Issue {
  /** Always 1 (the stand-in does not rank). */
  score: number;
}

/** The body of GET /search/issues. */
export interface IssueSearchResult {
  total_count: number;
  incomplete_results: false;
  /** Required by GitHub's descriptions since semantic issue search (`lexical` here: qualifiers and words). */
  search_type: 'lexical';
  items: IssueSearchItem[];
}

/** The issue events the stand-in records (GitHub has many more kinds). */
export type IssueEventType = 'labeled' | 'unlabeled' | 'closed' | 'reopened';

/**
 * GitHub's `issue-event-for-issue` shape, as GET /repos/{o}/{r}/issues/{n}/events returns it.
 * Recorded whenever a label is added or removed or the state changes, through the REST API (actor: the
 * app's bot user `<slug>[bot]` for an installation token) or through the state-changing helpers
 * (actor: `sender`; for createIssue's initial labels, the author).
 */
export interface IssueEvent {
  id: number;
  node_id: string;
  /** `${apiUrl}/repos/{owner}/{repo}/issues/events/{id}` */
  url: string;
  actor: User;
  event: IssueEventType;
  /** The commit that closed the issue (a merged pull request's merge commit), else null. */
  commit_id: string | null;
  commit_url: string | null;
  created_at: string;
  /** Only on `labeled` / `unlabeled`: the label as it was at the time. */
  label?: { name: string; color: string };
  performed_via_github_app: null;
}

export interface Comment {
  url: string;
  html_url: string;
  issue_url: string;
  id: number;
  node_id: string;
  user: User;
  created_at: string;
  updated_at: string;
  author_association: string;
  body: string;
  reactions: ReactionRollup;
  performed_via_github_app: App | null;
}

/** A comment as the inspection helper returns it: the REST shape plus the history of its bodies. */
export interface CommentWithHistory extends Comment {
  /** Every body the comment has had, oldest first; the last one is the current body. */
  edits: string[];
}

export interface PullRef {
  label: string;
  ref: string;
  sha: string;
  user: User;
  repo: Repo;
}

export interface Pull {
  url: string;
  id: number;
  node_id: string;
  html_url: string;
  diff_url: string;
  patch_url: string;
  issue_url: string;
  commits_url: string;
  review_comments_url: string;
  review_comment_url: string;
  comments_url: string;
  statuses_url: string;
  number: number;
  state: 'open' | 'closed';
  locked: boolean;
  title: string;
  user: User;
  body: string | null;
  labels: Label[];
  milestone: null;
  active_lock_reason: null;
  created_at: string;
  updated_at: string;
  closed_at: string | null;
  merged_at: string | null;
  merge_commit_sha: string | null;
  assignee: null;
  assignees: User[];
  requested_reviewers: User[];
  requested_teams: never[];
  head: PullRef;
  base: PullRef;
  _links: Record<string, { href: string }>;
  author_association: string;
  auto_merge: null;
  draft: boolean;
  /** The fields below are only in single-pull responses (GET/PATCH/POST), as on GitHub. */
  merged?: boolean;
  mergeable?: boolean | null;
  rebaseable?: boolean | null;
  mergeable_state?: string;
  merged_by?: User | null;
  comments?: number;
  review_comments?: number;
  maintainer_can_modify?: boolean;
  commits?: number;
  additions?: number;
  deletions?: number;
  changed_files?: number;
}

/** GitHub's `pull-request-review` shape (REST). In webhook payloads `state` is lower-case and an empty body is null. */
export interface Review {
  id: number;
  node_id: string;
  user: User;
  body: string | null;
  state: 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED' | 'PENDING' | 'DISMISSED' | 'approved' | 'changes_requested' | 'commented' | 'pending' | 'dismissed';
  html_url: string;
  pull_request_url: string;
  author_association: string;
  _links: { html: { href: string }; pull_request: { href: string } };
  /** Absent on pending reviews. */
  submitted_at?: string;
  commit_id: string;
}

/**
 * GitHub's `pull-request-review-comment` shape. `position` and `line` are null once the comment is
 * outdated (its line is no longer in the pull request's diff); `original_*` keep where it was made.
 * `in_reply_to_id` is only present on replies and always names the thread's first comment.
 */
export interface ReviewComment {
  url: string;
  pull_request_review_id: number;
  id: number;
  node_id: string;
  diff_hunk: string;
  path: string;
  position: number | null;
  original_position: number;
  commit_id: string;
  original_commit_id: string;
  in_reply_to_id?: number;
  user: User;
  body: string;
  created_at: string;
  updated_at: string;
  html_url: string;
  pull_request_url: string;
  author_association: string;
  _links: { self: { href: string }; html: { href: string }; pull_request: { href: string } };
  reactions: ReactionRollup;
  start_line: null;
  original_start_line: null;
  start_side: null;
  line: number | null;
  original_line: number;
  side: 'LEFT' | 'RIGHT';
  subject_type: 'line';
  performed_via_github_app: App | null;
}

/** A review thread as the stand-in keeps it (GitHub exposes threads only through GraphQL). */
export interface ReviewThread {
  /** The GraphQL node id (`PullRequestReviewThread`). */
  id: string;
  /** The database id of the thread's first comment. */
  rootCommentId: number;
  isResolved: boolean;
  resolvedBy: string | null;
  isOutdated: boolean;
  commentIds: number[];
}

export interface Reaction {
  id: number;
  node_id: string;
  user: User;
  content: ReactionContent;
  created_at: string;
}

export interface IssuedToken {
  token: string;
  installationId: number;
  /** Repository names the token is restricted to, or null for every repository of the installation. */
  repositories: string[] | null;
  permissions: PermissionSet;
  expiresAt: Date;
  createdAt: Date;
}

export interface RecordedApiRequest {
  /** `download`: a log download from the address GET .../actions/jobs/{id}/logs redirects to. */
  kind: 'api' | 'git' | 'download';
  method: string;
  /** The raw request target including the query string, e.g. `/api/v3/repos/o/r/pulls?head=o%3Ab`. */
  path: string;
  status: number;
  /** Request headers as received (nothing redacted). */
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body for API requests (undefined when empty or not JSON); undefined for git requests. */
  body: unknown;
  /** Raw body text for API requests; '' for git requests. */
  rawBody: string;
  /** The installation token used, if any (API or git). */
  token: string | null;
  receivedAt: number;
}

export interface WebhookDelivery {
  targetUrl: string;
  event: string;
  deliveryId: string;
  headers: Record<string, string>;
  body: string;
  status: number;
  responseBody: string;
}

export interface SendWebhookOptions {
  deliveryId?: string;
}

export interface WebhookResult {
  status: number;
  body: string;
  deliveryId: string;
}

export interface CreateRepoOptions {
  files?: Record<string, string>;
  /** Default 'main'. */
  defaultBranch?: string;
  /** Default true (a private repository: unreachable without a token scoped to it). */
  private?: boolean;
  description?: string;
}

export interface CreateIssueInput {
  title: string;
  body?: string;
  author: string;
  labels?: string[];
}

export type WebhookPayload = Record<string, unknown>;

export interface PayloadBuilders {
  issueOpened(owner: string, repo: string, number: number, sender: string): WebhookPayload;
  issueLabeled(owner: string, repo: string, number: number, label: string, sender: string): WebhookPayload;
  issueUnlabeled(owner: string, repo: string, number: number, label: string, sender: string): WebhookPayload;
  issueClosed(owner: string, repo: string, number: number, sender: string): WebhookPayload;
  /** Also creates the comment (authored by `sender`) in the stand-in's state. */
  issueCommentCreated(owner: string, repo: string, number: number, body: string, sender: string): WebhookPayload;
}

/** A failure the stand-in answers instead of handling matching REST requests (for retry tests). */
export interface InjectedFailure {
  /** Which requests fail: `path` is the REST path without `/api/v3` and without the query; `body` is the parsed JSON body. */
  match: (req: { method: string; path: string; body: unknown }) => boolean;
  /** The HTTP status to answer, e.g. 502. */
  status: number;
  /** How many matching requests fail before the rule retires itself; default 1. */
  times?: number;
  /** Default: the status text (e.g. `Bad Gateway`). */
  message?: string;
  /** The error body's `documentation_url`. */
  documentationUrl?: string;
  /** Extra response headers (e.g. `retry-after`). */
  headers?: Record<string, string>;
}

/** See GitHubStandin.rateLimitApiRequests. */
export interface SecondaryRateLimitRule {
  /** As for InjectedFailure; GraphQL requests are matched as `POST /graphql`. */
  match: InjectedFailure['match'];
  /** 403 (what GitHub usually sends) or 429; default 403. */
  status?: 403 | 429;
  /** Default 1. */
  times?: number;
  /** The `retry-after` header; default 1. */
  retryAfterSeconds?: number;
}

/** A comment on one line of a pull request's diff (`line` in the new file for RIGHT, the old one for LEFT). */
export interface LineCommentInput {
  path: string;
  line: number;
  side?: 'LEFT' | 'RIGHT';
  body: string;
}

/**
 * Helpers for pull requests and their reviews. Every helper acts as a person (no token involved)
 * and returns the webhook payload GitHub would send for it (not delivered: see sendWebhook).
 * `at` backdates what is created (GitHub timestamps are whole seconds), for "since" filters.
 */
export interface StandinReviewHelpers {
  /** Commits `files` on `branch` (created from `from`, default the default branch, when missing); returns the commit sha. */
  createBranch(owner: string, repo: string, branch: string, files: Record<string, string | null>, opts?: { from?: string; message?: string; author?: string }): string;
  /** Opens a pull request as `author` (a person, or the app's `<slug>[bot]`); draft by default. */
  createPullRequest(owner: string, repo: string, input: { head: string; base?: string; title: string; body?: string; author: string; draft?: boolean; labels?: string[] }): Pull;
  /** Submits a review with optional line comments (each opens a thread); returns `pull_request_review.submitted`. */
  submitReview(
    owner: string,
    repo: string,
    number: number,
    input: { author: string; state: 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED'; body?: string; comments?: LineCommentInput[]; at?: Date },
  ): WebhookPayload;
  /** A single comment on a line (GitHub wraps it in a COMMENTED review with an empty body); returns `pull_request_review_comment.created`. */
  commentOnLine(owner: string, repo: string, number: number, input: LineCommentInput & { author: string; at?: Date }): WebhookPayload;
  /** Replies in the thread of review comment `commentId`; returns `pull_request_review_comment.created`. */
  replyToReviewComment(commentId: number, body: string, author: string, opts?: { at?: Date }): WebhookPayload;
  /** A conversation comment on the pull request; returns `issue_comment.created` (its `issue.pull_request` is set). */
  commentOnPullRequest(owner: string, repo: string, number: number, body: string, sender: string, opts?: { at?: Date }): WebhookPayload;
  /** Resolves (or unresolves) the thread that review comment `commentId` belongs to. */
  resolveReviewThread(commentId: number, by: string, resolved?: boolean): void;
  /**
   * Outdates the thread of review comment `commentId`, as a push that drops the commented line does:
   * every comment in it gets `position`/`line` null over REST and `outdated: true` over GraphQL.
   */
  outdateReviewThread(commentId: number): void;
  /** Closes the pull request (merging head into base first when `merged`); returns `pull_request.closed`. */
  closePullRequest(owner: string, repo: string, number: number, sender: string, opts?: { merged?: boolean }): WebhookPayload;
  reviews(owner: string, repo: string, number: number): Review[];
  reviewComments(owner: string, repo: string, number: number): ReviewComment[];
  reviewThreads(owner: string, repo: string, number: number): ReviewThread[];
  /** Reactions on a review comment (POST /repos/{o}/{r}/pulls/comments/{id}/reactions). */
  reviewCommentReactions(commentId: number): Reaction[];
  /**
   * Reactions on a review. GitHub has no REST endpoint for these: the only way is the GraphQL
   * mutation `addReaction(input: {subjectId: <review node_id>, content: EYES})`, which the stand-in
   * serves. (A client without GraphQL can react on the pull request itself instead.)
   */
  reviewReactions(reviewId: number): Reaction[];
}

/** Helpers for an issue's history (history.ts). Each acts as a person (no token involved). */
export interface StandinHistoryHelpers {
  /**
   * Merges the pull request as `sender`, as GitHub's merge button does: a merge commit (or, with
   * `method: 'squash'`, one commit) on the base branch, `refs/pull/N/head` kept, `merged`,
   * `merge_commit_sha` and `merged_by` set, head and base shas frozen. When the base is the default
   * branch, every open issue the body closes with a keyword (`Fixes #3`, `closes o/r#3`, …) is
   * closed with a `closed` event whose `commit_id` is the merge commit. Returns `pull_request.closed`.
   * Throws when GitHub would refuse (closed, draft, conflicting).
   */
  mergePullRequest(owner: string, repo: string, number: number, sender: string, opts?: { method?: 'merge' | 'squash' }): WebhookPayload;
  /** Makes the repository public (anyone may read it over REST and git) or private again. */
  setRepoVisibility(owner: string, repo: string, visibility: 'public' | 'private'): void;
}

export type CheckStatus = 'queued' | 'in_progress' | 'completed';
export type CheckConclusion = 'success' | 'failure' | 'neutral' | 'cancelled' | 'skipped' | 'timed_out' | 'action_required';
export type CommitStatusState = 'error' | 'failure' | 'pending' | 'success';

/** An app as check runs and suites carry it (GitHub's `integration`). */
export interface CheckApp {
  id: number;
  slug: string;
  node_id: string;
  owner: User;
  name: string;
  description: string;
  external_url: string;
  html_url: string;
  created_at: string;
  updated_at: string;
  permissions: PermissionSet;
  events: string[];
  [other: string]: unknown;
}

/** GitHub's `pull-request-minimal` (in check runs and suites). */
export interface PullRequestMinimal {
  url: string;
  id: number;
  number: number;
  head: { ref: string; sha: string; repo: { id: number; url: string; name: string } };
  base: { ref: string; sha: string; repo: { id: number; url: string; name: string } };
}

/** GitHub's `check-suite`. */
export interface CheckSuite {
  id: number;
  node_id: string;
  head_branch: string | null;
  head_sha: string;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  url: string;
  before: string | null;
  after: string;
  pull_requests: PullRequestMinimal[];
  app: CheckApp;
  repository: Record<string, unknown>;
  created_at: string;
  updated_at: string;
  head_commit: { id: string; tree_id: string; message: string; timestamp: string; author: { name: string; email: string }; committer: { name: string; email: string } };
  latest_check_runs_count: number;
  check_runs_url: string;
  rerequestable: boolean;
  runs_rerequestable: boolean;
}

/** GitHub's `check-run`; `check_suite` is `{ id }` over REST and the whole suite in webhook payloads. */
export interface CheckRun {
  id: number;
  head_sha: string;
  node_id: string;
  external_id: string;
  url: string;
  html_url: string;
  details_url: string;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  started_at: string;
  completed_at: string | null;
  output: { title: string | null; summary: string | null; text: string | null; annotations_count: number; annotations_url: string };
  name: string;
  check_suite: { id: number } | Omit<CheckSuite, 'repository' | 'head_commit' | 'latest_check_runs_count' | 'check_runs_url' | 'rerequestable' | 'runs_rerequestable'>;
  app: CheckApp;
  pull_requests: PullRequestMinimal[];
}

/** An annotation as a test creates it (GitHub's create-check-run input). */
export interface CheckAnnotationInput {
  path: string;
  start_line: number;
  end_line?: number;
  start_column?: number;
  end_column?: number;
  annotation_level: 'notice' | 'warning' | 'failure';
  message: string;
  title?: string;
  raw_details?: string;
}

/** GitHub's `check-annotation`. */
export interface CheckAnnotation {
  path: string;
  start_line: number;
  end_line: number;
  start_column: number | null;
  end_column: number | null;
  annotation_level: 'notice' | 'warning' | 'failure';
  title: string | null;
  message: string;
  raw_details: string | null;
  blob_href: string;
}

/** GitHub's `status` (GET .../statuses); the combined status lists them without `creator`. */
export interface CommitStatus {
  url: string;
  avatar_url: string;
  id: number;
  node_id: string;
  state: CommitStatusState;
  description: string | null;
  target_url: string | null;
  context: string;
  created_at: string;
  updated_at: string;
  creator?: User;
}

/** GitHub's `combined-commit-status`. */
export interface CombinedStatus {
  state: 'failure' | 'pending' | 'success';
  statuses: CommitStatus[];
  sha: string;
  total_count: number;
  repository: Record<string, unknown>;
  commit_url: string;
  url: string;
}

/** GitHub's `job` (Actions). */
export interface ActionsJob {
  id: number;
  run_id: number;
  run_url: string;
  run_attempt: number;
  node_id: string;
  head_sha: string;
  url: string;
  html_url: string;
  status: CheckStatus;
  conclusion: CheckConclusion | null;
  created_at: string;
  started_at: string;
  completed_at: string | null;
  name: string;
  steps: Array<{ name: string; status: 'in_progress' | 'completed'; conclusion: CheckConclusion | null; number: number; started_at: string; completed_at: string | null }>;
  check_run_url: string;
  labels: string[];
  runner_id: number;
  runner_name: string;
  runner_group_id: number;
  runner_group_name: string;
  workflow_name: string;
  head_branch: string | null;
}

/** A webhook a CI helper produced, in the order GitHub sends them. */
export interface ProducedWebhook {
  event: 'check_run' | 'check_suite' | 'status';
  payload: WebhookPayload;
}

export interface CheckRunInput {
  /** The commit: a sha, or a branch name (its tip). */
  ref: string;
  name: string;
  /**
   * The app that owns the check run: `github-actions` (the default: the run is an Actions job, with
   * a job log), the stand-in's own app slug (Lilypad's own check), or any other slug (a third-party
   * app, made up on first use).
   */
  app?: string;
  /** Default `completed`. */
  status?: CheckStatus;
  /** Default `success` for a completed run; null while it is not. */
  conclusion?: CheckConclusion;
  title?: string | null;
  summary?: string | null;
  text?: string | null;
  annotations?: CheckAnnotationInput[];
  /**
   * GitHub Actions: the job log's lines without timestamps (the stand-in stamps them as the runner
   * does, starts the file with a byte order mark and, for a failed job, ends it with the runner's
   * `##[error]Process completed with exit code N.` line, also added as an annotation on `.github`,
   * as GitHub does).
   */
  log?: string | readonly string[];
  /** GitHub Actions: the workflow's name (one workflow run and check suite per workflow and commit). Default `CI`. */
  workflow?: string;
  /** GitHub Actions: the failing step's exit code. Default 1. */
  exitCode?: number;
  /**
   * The branch of this repository the suite ran on (its `head_branch`; pull requests are matched
   * by it). Default: the branch whose tip is the commit, an open pull request's first.
   */
  headBranch?: string;
  /**
   * The suite ran for a pull request from this fork (`owner/name`, a repository of the stand-in)
   * whose head is the same commit: the suite lives in this repository, and, as on GitHub, has a
   * null head_branch and no pull requests.
   */
  fromFork?: string;
  detailsUrl?: string;
  /** The webhooks' `sender`. Default the repository's owner. */
  sender?: string;
  /** Deliver the webhooks to this address (signed, as sendWebhook does), in order. */
  deliverTo?: string;
}

export interface CheckRunResult {
  checkRun: CheckRun;
  checkSuite: CheckSuite;
  /** GitHub Actions: the job id (the check run's id) and its workflow run's id; else null. */
  jobId: number | null;
  runId: number | null;
  /** check_run `created` (a new run), check_run `completed` (when it completed), check_suite `completed` (when every run of its suite has). */
  webhooks: ProducedWebhook[];
  /** Set when `deliverTo` was given. */
  deliveries: WebhookResult[];
}

export interface CommitStatusInput {
  /** The commit: a sha, or a branch name (its tip). */
  ref: string;
  state: CommitStatusState;
  /** Default `default`, as on GitHub. */
  context?: string;
  /** At most 140 characters, as GitHub accepts. */
  description?: string | null;
  targetUrl?: string | null;
  /** Who posted it (the webhook's `sender`). Default the repository's owner. */
  creator?: string;
  deliverTo?: string;
}

export interface CommitStatusResult {
  status: CommitStatus;
  webhooks: ProducedWebhook[];
  deliveries: WebhookResult[];
}

/**
 * CI on a commit (ci-helpers.ts): check runs (by GitHub Actions, with a job log, or by another
 * app), commit statuses, and the check_run / check_suite / status webhooks GitHub sends for them.
 */
export interface StandinCiHelpers {
  addCheckRun(owner: string, repo: string, input: CheckRunInput): Promise<CheckRunResult>;
  /** Completes a queued or in-progress run (appending `log` lines to an Actions job's log). */
  completeCheckRun(
    owner: string,
    repo: string,
    checkRunId: number,
    input: Pick<CheckRunInput, 'conclusion' | 'title' | 'summary' | 'text' | 'annotations' | 'log' | 'exitCode' | 'sender' | 'deliverTo'>,
  ): Promise<CheckRunResult>;
  addCommitStatus(owner: string, repo: string, input: CommitStatusInput): Promise<CommitStatusResult>;
  /** The check runs on a commit (REST shape), newest first. */
  checkRuns(owner: string, repo: string, ref: string): CheckRun[];
  /** An Actions job's whole log, as the download serves it (null when the job has none). */
  jobLog(jobId: number): string | null;
}

export interface InjectedFailureHandle {
  /** How many requests this rule has failed so far. */
  readonly hits: number;
  /** Retires the rule now. */
  remove(): void;
}

export interface GitHubStandin extends StandinReviewHelpers, StandinHistoryHelpers, StandinCiHelpers {
  /** http://127.0.0.1:PORT */
  origin: string;
  /** 127.0.0.1:PORT (for GHE_HOST; use GHE_PROTOCOL=http) */
  host: string;
  /** http://127.0.0.1:PORT/api/v3 */
  apiUrl: string;
  appId: number;
  appSlug: string;
  /** PKCS#1 PEM (`-----BEGIN RSA PRIVATE KEY-----`), as GitHub issues them. */
  privateKeyPem: string;
  webhookSecret: string;
  /** Where the bare repositories live: `${gitRoot}/<owner>/<repo>.git` (lower-cased). */
  gitRoot: string;
  /** Manifests posted to the app-creation form (GitHub's manifest flow), oldest first. */
  registeredManifests(): RegisteredManifest[];

  createInstallation(account: { login: string; type?: 'Organization' | 'User' }): Installation;
  createUser(login: string, opts?: { type?: 'User' | 'Bot' }): User;
  createRepo(owner: string, name: string, opts?: CreateRepoOptions): Repo;
  addCollaborator(owner: string, repo: string, login: string, permission: RoleName): void;
  createIssue(owner: string, repo: string, input: CreateIssueInput): Issue;
  /** Commits `content` at `path` on the default branch; returns the new commit sha. */
  setFile(owner: string, repo: string, path: string, content: string, message?: string): string;
  readFile(owner: string, repo: string, ref: string, path: string): string | null;
  branchSha(owner: string, repo: string, branch: string): string | null;

  issue(owner: string, repo: string, number: number): Issue;
  comments(owner: string, repo: string, number: number): CommentWithHistory[];
  pulls(owner: string, repo: string): Pull[];
  reactions(commentId: number): Reaction[];
  issueReactions(owner: string, repo: string, number: number): Reaction[];
  /** The issue's event log (as GET /repos/{o}/{r}/issues/{n}/events returns it), oldest first. */
  issueEvents(owner: string, repo: string, number: number): IssueEvent[];
  tokens(): IssuedToken[];
  /** Expires every token issued so far (or one) now, as if its hour had passed. */
  expireTokens(token?: string): void;
  readonly requests: RecordedApiRequest[];
  /** Requests and answers that did not conform to GitHub's REST descriptions, in order (conformance.ts). */
  readonly conformanceViolations: readonly string[];
  /**
   * Takes the violations not yet reported (so they fail no test): for a test that sends a request
   * GitHub would refuse on purpose, which asserts on what it gets back.
   */
  takeConformanceViolations(): string[];
  readonly deliveries: WebhookDelivery[];

  sendWebhook(targetUrl: string, event: string, payload: object, opts?: SendWebhookOptions): Promise<WebhookResult>;
  payloads: PayloadBuilders;

  /** Makes matching REST requests fail with `status` (recorded in `requests` like any other), `times` times. */
  failApiRequests(rule: InjectedFailure): InjectedFailureHandle;
  /** Answers matching requests with GitHub's secondary rate limit (403 or 429, `retry-after`), `times` times. */
  rateLimitApiRequests(rule: SecondaryRateLimitRule): InjectedFailureHandle;
  /** Answers the next `times` (default 1) git pushes (POST git-receive-pack) with `status` (default 502) before git sees them. */
  failGitPushes(opts?: { times?: number; status?: number }): InjectedFailureHandle;
  /**
   * GraphQL (`POST /api/graphql`) on or off; off answers 404 as Enterprise servers without the
   * GraphQL API do. On by default.
   */
  setGraphqlEnabled(enabled: boolean): void;

  /** Applies `label` as `sender` (recording a `labeled` issue event unless the issue had it) and returns the `issues.labeled` payload (not delivered: see sendWebhook). */
  labelIssue(owner: string, repo: string, number: number, label: string, sender: string): WebhookPayload;
  /**
   * Applies `label` as `sender` and records the `labeled` event exactly like labelIssue, but returns
   * nothing: for simulating a label whose `issues.labeled` webhook GitHub never delivered (the change is
   * only visible through the REST API: the issue, GET /search/issues, GET .../issues/{n}/events).
   */
  labelIssueSilently(owner: string, repo: string, number: number, label: string, sender: string): void;
  /** Removes `label` as `sender` (recording an `unlabeled` issue event if the issue had it) and returns the `issues.unlabeled` payload. */
  unlabelIssue(owner: string, repo: string, number: number, label: string, sender: string): WebhookPayload;
  /** Closes the issue as `sender` (recording a `closed` issue event if it was open) and returns the `issues.closed` payload. */
  closeIssue(owner: string, repo: string, number: number, sender: string): WebhookPayload;
  commentOnIssue(owner: string, repo: string, number: number, body: string, sender: string): WebhookPayload;
  /** Edits the issue's title and/or body as `sender` and returns the `issues.edited` payload (with `changes`). */
  editIssue(owner: string, repo: string, number: number, fields: { title?: string; body?: string }, sender: string): WebhookPayload;

  close(): Promise<void>;
}
