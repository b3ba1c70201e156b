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
  user_view_type: 'public';
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
  commit_id: null;
  commit_url: null;
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
  kind: 'api' | 'git';
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
}

export interface InjectedFailureHandle {
  /** How many requests this rule has failed so far. */
  readonly hits: number;
  /** Retires the rule now. */
  remove(): void;
}

export interface GitHubStandin {
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
  readonly deliveries: WebhookDelivery[];

  sendWebhook(targetUrl: string, event: string, payload: object, opts?: SendWebhookOptions): Promise<WebhookResult>;
  payloads: PayloadBuilders;

  /** Makes matching REST requests fail with `status` (recorded in `requests` like any other), `times` times. */
  failApiRequests(rule: InjectedFailure): InjectedFailureHandle;

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
