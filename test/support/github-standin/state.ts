/**
 * The stand-in's in-memory state (users, installations, repositories, issues, pull requests,
 * comments, reactions, tokens) and the serialisers that turn it into GitHub's JSON shapes.
 */
import * as gitRepo from './git-repo.ts';
import type {
  AccessLevel,
  App,
  Comment,
  Installation,
  Issue,
  IssueEvent,
  IssueEventType,
  Label,
  PermissionSet,
  Pull,
  PullRef,
  Reaction,
  ReactionContent,
  Review,
  ReviewComment,
  ReactionRollup,
  Repo,
  RoleName,
  User,
} from './types.ts';

export const GHES_VERSION = '3.15.0';
export const DOCS_ROOT = 'https://docs.github.com/enterprise-server@3.15/rest';

export interface UserRec {
  id: number;
  login: string;
  type: 'User' | 'Bot' | 'Organization';
  createdAt: string;
}

export interface InstallationRec {
  id: number;
  account: UserRec;
  permissions: PermissionSet;
  events: string[];
  createdAt: string;
  updatedAt: string;
}

export interface LabelRec {
  id: number;
  name: string;
  color: string;
  description: string | null;
  isDefault: boolean;
}

export interface ReactionRec {
  id: number;
  user: UserRec;
  content: ReactionContent;
  createdAt: string;
}

export interface PullRec {
  id: number;
  headRef: string;
  baseRef: string;
  draft: boolean;
  requestedReviewers: UserRec[];
  mergedAt: string | null;
  /** Set by a merge (history.ts): the merge (or squash) commit, who merged, and the head and base shas frozen at that moment. */
  mergeCommitSha?: string | null;
  mergedBy?: UserRec | null;
  frozenHeadSha?: string | null;
  frozenBaseSha?: string | null;
}

/** One entry of an issue's event log (GET /repos/{o}/{r}/issues/{n}/events), oldest first. */
export interface IssueEventRec {
  id: number;
  event: IssueEventType;
  actor: UserRec;
  createdAt: string;
  /** The label as it was when the event happened (labeled / unlabeled only). */
  label: { name: string; color: string } | null;
  /** The commit that caused the event (a `closed` by a merged pull request's merge commit). */
  commitId?: string | null;
}

export interface IssueRec {
  id: number;
  number: number;
  repo: RepoRec;
  title: string;
  body: string | null;
  user: UserRec;
  labels: LabelRec[];
  state: 'open' | 'closed';
  stateReason: 'completed' | 'not_planned' | 'reopened' | null;
  createdAt: string;
  updatedAt: string;
  closedAt: string | null;
  closedBy: UserRec | null;
  comments: CommentRec[];
  reactions: ReactionRec[];
  pull: PullRec | null;
  viaApp: boolean;
  events: IssueEventRec[];
  /** The last edit of the title or body (GraphQL's `editor` and `lastEditedAt`); absent: never edited. */
  lastEdit?: { editor: UserRec; at: string };
}

export interface CommentRec {
  id: number;
  issue: IssueRec;
  body: string;
  user: UserRec;
  createdAt: string;
  updatedAt: string;
  edits: string[];
  reactions: ReactionRec[];
  viaApp: boolean;
  deleted: boolean;
}

/** A review's state as the REST API spells it (webhook payloads use the lower-case form). */
export type ReviewState = 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED' | 'PENDING' | 'DISMISSED';

export interface ReviewRec {
  id: number;
  issue: IssueRec;
  user: UserRec;
  body: string;
  state: ReviewState;
  commitId: string;
  submittedAt: string | null;
  /** Reactions added with GraphQL `addReaction` (there is no REST endpoint for review reactions). */
  reactions: ReactionRec[];
}

/** A review thread: a root comment on a line and its replies. Resolution lives here, as on GitHub. */
export interface ThreadRec {
  id: number;
  issue: IssueRec;
  comments: ReviewCommentRec[];
  resolved: boolean;
  resolvedBy: UserRec | null;
}

export interface ReviewCommentRec {
  id: number;
  issue: IssueRec;
  review: ReviewRec;
  thread: ThreadRec;
  /** The thread's root comment for replies (GitHub points every reply at the root), else null. */
  inReplyTo: ReviewCommentRec | null;
  path: string;
  side: 'LEFT' | 'RIGHT';
  line: number;
  originalLine: number;
  /** The line's index in the file's diff (GitHub's legacy `position`). */
  originalPosition: number;
  diffHunk: string;
  commitId: string;
  originalCommitId: string;
  body: string;
  user: UserRec;
  createdAt: string;
  updatedAt: string;
  reactions: ReactionRec[];
  viaApp: boolean;
  /** The line is gone from the current diff: REST then reports `position` and `line` as null. */
  outdated: boolean;
}

export interface RepoRec {
  id: number;
  owner: UserRec;
  name: string;
  private: boolean;
  description: string | null;
  defaultBranch: string;
  gitDir: string;
  createdAt: string;
  updatedAt: string;
  pushedAt: string;
  collaborators: Map<string, { user: UserRec; role: RoleName }>;
  labels: Map<string, LabelRec>;
  issues: Map<number, IssueRec>;
  nextNumber: number;
}

export interface TokenRec {
  token: string;
  installation: InstallationRec;
  /** null: every repository of the installation's account. */
  repositoryIds: number[] | null;
  permissions: PermissionSet;
  createdAt: Date;
  expiresAt: Date;
}

export function isoNow(date: Date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** GitHub's legacy global node id: base64("0" + len(type) + ":" + type + id). */
export function nodeId(type: string, id: number): string {
  return Buffer.from(`0${type.length}:${type}${id}`).toString('base64');
}

export function levelAllows(have: AccessLevel | undefined, need: AccessLevel): boolean {
  if (!have) return false;
  return need === 'read' || have === 'write';
}

const DEFAULT_LABEL_COLORS: Record<string, string> = {
  bug: 'd73a4a',
  documentation: '0075ca',
  duplicate: 'cfd3d7',
  enhancement: 'a2eeef',
  'good first issue': '7057ff',
  'help wanted': '008672',
  invalid: 'e4e669',
  question: 'd876e3',
  wontfix: 'ffffff',
};

export class StandinState {
  readonly users = new Map<string, UserRec>();
  readonly installations = new Map<number, InstallationRec>();
  readonly repos = new Map<string, RepoRec>();
  readonly comments = new Map<number, CommentRec>();
  readonly tokens = new Map<string, TokenRec>();
  readonly reviews = new Map<number, ReviewRec>();
  readonly reviewComments = new Map<number, ReviewCommentRec>();
  readonly threads = new Map<number, ThreadRec>();
  readonly botUser: UserRec;
  readonly appOwner: UserRec;
  readonly appCreatedAt = isoNow(new Date(Date.now() - 86_400_000));
  private seq = { user: 100, installation: 1000, repo: 5000, issue: 20000, comment: 900000, label: 40000, reaction: 70000, pull: 300000, event: 600000, review: 1_200_000, reviewComment: 1_500_000, thread: 1_800_000 };

  constructor(
    readonly origin: string,
    readonly gitRoot: string,
    readonly appId: number,
    readonly appSlug: string,
    readonly appPermissions: PermissionSet,
    readonly appEvents: string[],
  ) {
    this.appOwner = this.ensureUser('lilypad-admin', 'User');
    this.botUser = this.ensureUser(`${appSlug}[bot]`, 'Bot');
  }

  get apiUrl(): string {
    return `${this.origin}/api/v3`;
  }

  // ---------------------------------------------------------------- users

  ensureUser(login: string, type: UserRec['type'] = login.endsWith('[bot]') ? 'Bot' : 'User'): UserRec {
    const key = login.toLowerCase();
    const existing = this.users.get(key);
    if (existing) {
      if (type === 'Organization' && existing.type !== 'Organization') existing.type = 'Organization';
      return existing;
    }
    const rec: UserRec = { id: ++this.seq.user, login, type, createdAt: isoNow() };
    this.users.set(key, rec);
    return rec;
  }

  findUser(login: string): UserRec | undefined {
    return this.users.get(login.toLowerCase());
  }

  // -------------------------------------------------------- installations

  createInstallation(account: UserRec): InstallationRec {
    for (const inst of this.installations.values()) if (inst.account === account) return inst;
    const now = isoNow();
    const rec: InstallationRec = {
      id: ++this.seq.installation,
      account,
      permissions: { ...this.appPermissions },
      events: [...this.appEvents],
      createdAt: now,
      updatedAt: now,
    };
    this.installations.set(rec.id, rec);
    return rec;
  }

  installationFor(account: UserRec): InstallationRec | undefined {
    for (const inst of this.installations.values()) if (inst.account === account) return inst;
    return undefined;
  }

  // ---------------------------------------------------------------- repos

  findRepo(owner: string, name: string): RepoRec | undefined {
    return this.repos.get(`${owner}/${name}`.toLowerCase());
  }

  repoById(id: number): RepoRec | undefined {
    for (const r of this.repos.values()) if (r.id === id) return r;
    return undefined;
  }

  addRepo(owner: UserRec, name: string, isPrivate: boolean, defaultBranch: string, gitDir: string, description: string | null): RepoRec {
    const now = isoNow();
    const rec: RepoRec = {
      id: ++this.seq.repo,
      owner,
      name,
      private: isPrivate,
      description,
      defaultBranch,
      gitDir,
      createdAt: now,
      updatedAt: now,
      pushedAt: now,
      collaborators: new Map(),
      labels: new Map(),
      issues: new Map(),
      nextNumber: 1,
    };
    this.repos.set(`${owner.login}/${name}`.toLowerCase(), rec);
    return rec;
  }

  ensureLabel(repo: RepoRec, name: string): LabelRec {
    const key = name.toLowerCase();
    const existing = repo.labels.get(key);
    if (existing) return existing;
    const color = DEFAULT_LABEL_COLORS[key];
    const rec: LabelRec = { id: ++this.seq.label, name, color: color ?? 'ededed', description: null, isDefault: color !== undefined };
    repo.labels.set(key, rec);
    return rec;
  }

  /** The role a user has on a repository ('none' if none). The owner of a user-owned repo is admin. */
  roleOf(repo: RepoRec, user: UserRec): RoleName | 'none' {
    if (repo.owner === user) return 'admin';
    return repo.collaborators.get(user.login.toLowerCase())?.role ?? (repo.private ? 'none' : 'read');
  }

  isCollaborator(repo: RepoRec, user: UserRec): boolean {
    return repo.owner === user || repo.collaborators.has(user.login.toLowerCase());
  }

  // --------------------------------------------------------------- issues

  createIssue(repo: RepoRec, fields: { title: string; body: string | null; user: UserRec; labels: string[]; viaApp: boolean; pull?: Omit<PullRec, 'id'> }): IssueRec {
    const now = isoNow();
    const rec: IssueRec = {
      id: ++this.seq.issue,
      number: repo.nextNumber++,
      repo,
      title: fields.title,
      body: fields.body,
      user: fields.user,
      labels: fields.labels.map((l) => this.ensureLabel(repo, l)),
      state: 'open',
      stateReason: null,
      createdAt: now,
      updatedAt: now,
      closedAt: null,
      closedBy: null,
      comments: [],
      reactions: [],
      pull: fields.pull ? { ...fields.pull, id: ++this.seq.pull } : null,
      viaApp: fields.viaApp,
      events: [],
    };
    // Initial labels show up in the issue's event log as `labeled` by the author, as on GitHub.
    for (const label of new Set(rec.labels)) this.recordEvent(rec, 'labeled', fields.user, label);
    repo.issues.set(rec.number, rec);
    return rec;
  }

  addComment(issue: IssueRec, user: UserRec, body: string, viaApp: boolean): CommentRec {
    const now = isoNow();
    const rec: CommentRec = {
      id: ++this.seq.comment,
      issue,
      body,
      user,
      createdAt: now,
      updatedAt: now,
      edits: [body],
      reactions: [],
      viaApp,
      deleted: false,
    };
    issue.comments.push(rec);
    issue.updatedAt = now;
    this.comments.set(rec.id, rec);
    return rec;
  }

  editComment(comment: CommentRec, body: string): void {
    comment.body = body;
    comment.updatedAt = isoNow();
    comment.edits.push(body);
  }

  deleteComment(comment: CommentRec): void {
    comment.deleted = true;
    comment.issue.comments = comment.issue.comments.filter((c) => c !== comment);
    this.comments.delete(comment.id);
  }

  addReaction(list: ReactionRec[], user: UserRec, content: ReactionContent): { reaction: ReactionRec; created: boolean } {
    const existing = list.find((r) => r.user === user && r.content === content);
    if (existing) return { reaction: existing, created: false };
    const reaction: ReactionRec = { id: ++this.seq.reaction, user, content, createdAt: isoNow() };
    list.push(reaction);
    return { reaction, created: true };
  }

  /** Appends to the issue's event log. */
  recordEvent(issue: IssueRec, event: IssueEventType, actor: UserRec, label?: LabelRec): IssueEventRec {
    const rec: IssueEventRec = {
      id: ++this.seq.event,
      event,
      actor,
      createdAt: isoNow(),
      label: label ? { name: label.name, color: label.color } : null,
    };
    issue.events.push(rec);
    return rec;
  }

  /** Adds a label (recording a `labeled` event by `actor` when the issue did not have it yet). */
  addLabel(issue: IssueRec, name: string, actor: UserRec): void {
    const label = this.ensureLabel(issue.repo, name);
    if (!issue.labels.includes(label)) {
      issue.labels.push(label);
      this.recordEvent(issue, 'labeled', actor, label);
    }
    issue.updatedAt = isoNow();
  }

  /** Removes a label (recording an `unlabeled` event by `actor`); false if the issue did not have it. */
  removeLabel(issue: IssueRec, name: string, actor: UserRec): boolean {
    const removed = issue.labels.filter((l) => l.name.toLowerCase() === name.toLowerCase());
    if (removed.length === 0) return false;
    issue.labels = issue.labels.filter((l) => !removed.includes(l));
    issue.updatedAt = isoNow();
    for (const label of new Set(removed)) this.recordEvent(issue, 'unlabeled', actor, label);
    return true;
  }

  /**
   * Replaces the issue's labels with `names` (in that order), recording `unlabeled` for each label
   * dropped and `labeled` for each label gained, by `actor`.
   */
  setLabels(issue: IssueRec, names: string[], actor: UserRec): void {
    const before = new Set(issue.labels);
    issue.labels = [];
    for (const name of names) {
      const label = this.ensureLabel(issue.repo, name);
      if (!issue.labels.includes(label)) issue.labels.push(label);
      issue.updatedAt = isoNow();
    }
    for (const label of before) if (!issue.labels.includes(label)) this.recordEvent(issue, 'unlabeled', actor, label);
    for (const label of issue.labels) if (!before.has(label)) this.recordEvent(issue, 'labeled', actor, label);
  }

  setState(issue: IssueRec, state: 'open' | 'closed', by: UserRec, reason?: 'completed' | 'not_planned' | 'reopened' | null): void {
    if (issue.state === state) return;
    const now = isoNow();
    issue.state = state;
    issue.updatedAt = now;
    if (state === 'closed') {
      issue.closedAt = now;
      issue.closedBy = by;
      issue.stateReason = reason ?? 'completed';
    } else {
      issue.closedAt = null;
      issue.closedBy = null;
      issue.stateReason = reason ?? 'reopened';
    }
    this.recordEvent(issue, state === 'closed' ? 'closed' : 'reopened', by);
  }

  // -------------------------------------------------------------- reviews

  addReview(issue: IssueRec, fields: { user: UserRec; body: string; state: ReviewState; commitId: string; at?: string }): ReviewRec {
    const rec: ReviewRec = {
      id: ++this.seq.review,
      issue,
      user: fields.user,
      body: fields.body,
      state: fields.state,
      commitId: fields.commitId,
      submittedAt: fields.state === 'PENDING' ? null : (fields.at ?? isoNow()),
      reactions: [],
    };
    this.reviews.set(rec.id, rec);
    issue.updatedAt = isoNow();
    return rec;
  }

  reviewsOf(issue: IssueRec): ReviewRec[] {
    return [...this.reviews.values()].filter((r) => r.issue === issue);
  }

  /** Adds a review comment: a new thread when `replyTo` is null, else a reply in `replyTo`'s thread. */
  addReviewComment(
    review: ReviewRec,
    fields: { user: UserRec; body: string; viaApp: boolean; at?: string } & (
      | { replyTo: ReviewCommentRec }
      | { replyTo: null; path: string; side: 'LEFT' | 'RIGHT'; line: number; position: number; diffHunk: string; commitId: string }
    ),
  ): ReviewCommentRec {
    const at = fields.at ?? isoNow();
    const root = fields.replyTo ? (fields.replyTo.inReplyTo ?? fields.replyTo) : null;
    const thread: ThreadRec = root ? root.thread : { id: ++this.seq.thread, issue: review.issue, comments: [], resolved: false, resolvedBy: null };
    if (!root) this.threads.set(thread.id, thread);
    const where = root
      ? { path: root.path, side: root.side, line: root.line, originalLine: root.originalLine, originalPosition: root.originalPosition, diffHunk: root.diffHunk, commitId: root.commitId, originalCommitId: root.originalCommitId }
      : fields.replyTo === null
        ? { path: fields.path, side: fields.side, line: fields.line, originalLine: fields.line, originalPosition: fields.position, diffHunk: fields.diffHunk, commitId: fields.commitId, originalCommitId: fields.commitId }
        : undefined;
    if (!where) throw new Error('unreachable');
    const rec: ReviewCommentRec = {
      id: ++this.seq.reviewComment,
      issue: review.issue,
      review,
      thread,
      inReplyTo: root,
      ...where,
      body: fields.body,
      user: fields.user,
      createdAt: at,
      updatedAt: at,
      reactions: [],
      viaApp: fields.viaApp,
      outdated: root ? root.outdated : false,
    };
    thread.comments.push(rec);
    this.reviewComments.set(rec.id, rec);
    review.issue.updatedAt = isoNow();
    return rec;
  }

  reviewCommentsOf(issue: IssueRec): ReviewCommentRec[] {
    return [...this.reviewComments.values()].filter((c) => c.issue === issue);
  }

  threadsOf(issue: IssueRec): ThreadRec[] {
    return [...this.threads.values()].filter((t) => t.issue === issue);
  }

  // ---------------------------------------------------------------- urls

  private api(p: string): string {
    return `${this.apiUrl}${p}`;
  }

  private web(p: string): string {
    return `${this.origin}${p}`;
  }

  // ---------------------------------------------------------- serialisers

  user(u: UserRec): User {
    const base = this.api(`/users/${u.login}`);
    return {
      login: u.login,
      id: u.id,
      node_id: nodeId(u.type === 'Bot' ? 'Bot' : u.type === 'Organization' ? 'Organization' : 'User', u.id),
      avatar_url: this.web(`/avatars/u/${u.id}?`),
      gravatar_id: '',
      url: base,
      html_url: u.type === 'Bot' ? this.web(`/apps/${u.login.replace(/\[bot\]$/, '')}`) : this.web(`/${u.login}`),
      followers_url: `${base}/followers`,
      following_url: `${base}/following{/other_user}`,
      gists_url: `${base}/gists{/gist_id}`,
      starred_url: `${base}/starred{/owner}{/repo}`,
      subscriptions_url: `${base}/subscriptions`,
      organizations_url: `${base}/orgs`,
      repos_url: `${base}/repos`,
      events_url: `${base}/events{/privacy}`,
      received_events_url: `${base}/received_events`,
      type: u.type,
      user_view_type: 'public',
      site_admin: false,
    };
  }

  /** GET /user with the user's own token: GitHub's private-user shape (the profile and the account's counts). */
  authenticatedUser(u: UserRec): User & Record<string, unknown> {
    const stamp = '2024-01-01T00:00:00Z';
    const own = [...this.repos.values()].filter((r) => r.owner === u);
    return {
      ...this.user(u),
      user_view_type: 'private',
      name: null,
      company: null,
      blog: '',
      location: null,
      email: null,
      hireable: null,
      bio: null,
      public_repos: own.filter((r) => !r.private).length,
      public_gists: 0,
      followers: 0,
      following: 0,
      created_at: stamp,
      updated_at: stamp,
      private_gists: 0,
      total_private_repos: own.filter((r) => r.private).length,
      owned_private_repos: own.filter((r) => r.private).length,
      disk_usage: 0,
      collaborators: 0,
      two_factor_authentication: true,
    };
  }

  app(): App {
    return {
      id: this.appId,
      slug: this.appSlug,
      node_id: nodeId('App', this.appId),
      client_id: `Iv1.${this.appId.toString(16).padStart(16, '0')}`,
      owner: this.user(this.appOwner),
      name: this.appSlug.charAt(0).toUpperCase() + this.appSlug.slice(1),
      description: 'GitHub stand-in app',
      external_url: this.origin,
      html_url: this.web(`/github-apps/${this.appSlug}`),
      created_at: this.appCreatedAt,
      updated_at: this.appCreatedAt,
      permissions: { ...this.appPermissions },
      events: [...this.appEvents],
      installations_count: this.installations.size,
    };
  }

  installation(i: InstallationRec): Installation {
    return {
      id: i.id,
      client_id: this.app().client_id,
      account: this.user(i.account),
      repository_selection: 'all',
      access_tokens_url: this.api(`/app/installations/${i.id}/access_tokens`),
      repositories_url: this.api('/installation/repositories'),
      html_url: i.account.type === 'Organization'
        ? this.web(`/organizations/${i.account.login}/settings/installations/${i.id}`)
        : this.web(`/settings/installations/${i.id}`),
      app_id: this.appId,
      app_slug: this.appSlug,
      target_id: i.account.id,
      target_type: i.account.type === 'Organization' ? 'Organization' : 'User',
      permissions: { ...i.permissions },
      events: [...i.events],
      created_at: i.createdAt,
      updated_at: i.updatedAt,
      single_file_name: null,
      has_multiple_single_files: false,
      single_file_paths: [],
      suspended_by: null,
      suspended_at: null,
    };
  }

  repo(r: RepoRec): Repo {
    const full = `${r.owner.login}/${r.name}`;
    const base = this.api(`/repos/${full}`);
    const openIssues = [...r.issues.values()].filter((i) => i.state === 'open').length;
    const host = new URL(this.origin).host;
    return {
      id: r.id,
      node_id: nodeId('Repository', r.id),
      name: r.name,
      full_name: full,
      private: r.private,
      owner: this.user(r.owner),
      html_url: this.web(`/${full}`),
      description: r.description,
      fork: false,
      url: base,
      forks_url: `${base}/forks`,
      keys_url: `${base}/keys{/key_id}`,
      collaborators_url: `${base}/collaborators{/collaborator}`,
      teams_url: `${base}/teams`,
      hooks_url: `${base}/hooks`,
      issue_events_url: `${base}/issues/events{/number}`,
      events_url: `${base}/events`,
      assignees_url: `${base}/assignees{/user}`,
      branches_url: `${base}/branches{/branch}`,
      tags_url: `${base}/tags`,
      blobs_url: `${base}/git/blobs{/sha}`,
      git_tags_url: `${base}/git/tags{/sha}`,
      git_refs_url: `${base}/git/refs{/sha}`,
      trees_url: `${base}/git/trees{/sha}`,
      statuses_url: `${base}/statuses/{sha}`,
      languages_url: `${base}/languages`,
      stargazers_url: `${base}/stargazers`,
      contributors_url: `${base}/contributors`,
      subscribers_url: `${base}/subscribers`,
      subscription_url: `${base}/subscription`,
      commits_url: `${base}/commits{/sha}`,
      git_commits_url: `${base}/git/commits{/sha}`,
      comments_url: `${base}/comments{/number}`,
      issue_comment_url: `${base}/issues/comments{/number}`,
      contents_url: `${base}/contents/{+path}`,
      compare_url: `${base}/compare/{base}...{head}`,
      merges_url: `${base}/merges`,
      archive_url: `${base}/{archive_format}{/ref}`,
      downloads_url: `${base}/downloads`,
      issues_url: `${base}/issues{/number}`,
      pulls_url: `${base}/pulls{/number}`,
      milestones_url: `${base}/milestones{/number}`,
      notifications_url: `${base}/notifications{?since,all,participating}`,
      labels_url: `${base}/labels{/name}`,
      releases_url: `${base}/releases{/id}`,
      deployments_url: `${base}/deployments`,
      created_at: r.createdAt,
      updated_at: r.updatedAt,
      pushed_at: r.pushedAt,
      git_url: `git://${host}/${full}.git`,
      ssh_url: `git@${host}:${full}.git`,
      clone_url: this.web(`/${full}.git`),
      svn_url: this.web(`/${full}`),
      homepage: null,
      size: 0,
      stargazers_count: 0,
      watchers_count: 0,
      language: null,
      has_issues: true,
      has_projects: true,
      has_downloads: true,
      has_wiki: true,
      has_pages: false,
      has_discussions: false,
      forks_count: 0,
      mirror_url: null,
      archived: false,
      disabled: false,
      open_issues_count: openIssues,
      license: null,
      allow_forking: true,
      is_template: false,
      web_commit_signoff_required: false,
      topics: [],
      visibility: r.private ? 'private' : 'public',
      forks: 0,
      open_issues: openIssues,
      watchers: 0,
      default_branch: r.defaultBranch,
    };
  }

  label(repo: RepoRec, l: LabelRec): Label {
    return {
      id: l.id,
      node_id: nodeId('Label', l.id),
      url: this.api(`/repos/${repo.owner.login}/${repo.name}/labels/${encodeURIComponent(l.name)}`),
      name: l.name,
      color: l.color,
      default: l.isDefault,
      description: l.description,
    };
  }

  authorAssociation(repo: RepoRec, user: UserRec): string {
    if (user === repo.owner) return 'OWNER';
    if (repo.collaborators.has(user.login.toLowerCase())) return 'COLLABORATOR';
    return 'NONE';
  }

  reactionRollup(url: string, list: ReactionRec[]): ReactionRollup {
    const count = (c: ReactionContent): number => list.filter((r) => r.content === c).length;
    return {
      url,
      total_count: list.length,
      '+1': count('+1'),
      '-1': count('-1'),
      laugh: count('laugh'),
      hooray: count('hooray'),
      confused: count('confused'),
      heart: count('heart'),
      rocket: count('rocket'),
      eyes: count('eyes'),
    };
  }

  reaction(r: ReactionRec): Reaction {
    return { id: r.id, node_id: nodeId('Reaction', r.id), user: this.user(r.user), content: r.content, created_at: r.createdAt };
  }

  issue(i: IssueRec): Issue {
    const repo = i.repo;
    const full = `${repo.owner.login}/${repo.name}`;
    const base = this.api(`/repos/${full}/issues/${i.number}`);
    const issue: Issue = {
      url: base,
      repository_url: this.api(`/repos/${full}`),
      labels_url: `${base}/labels{/name}`,
      comments_url: `${base}/comments`,
      events_url: `${base}/events`,
      html_url: this.web(`/${full}/${i.pull ? 'pull' : 'issues'}/${i.number}`),
      id: i.id,
      node_id: nodeId(i.pull ? 'PullRequest' : 'Issue', i.id),
      number: i.number,
      title: i.title,
      user: this.user(i.user),
      labels: i.labels.map((l) => this.label(repo, l)),
      state: i.state,
      locked: false,
      assignee: null,
      assignees: [],
      milestone: null,
      comments: i.comments.length,
      created_at: i.createdAt,
      updated_at: i.updatedAt,
      closed_at: i.closedAt,
      author_association: this.authorAssociation(repo, i.user),
      active_lock_reason: null,
      body: i.body,
      closed_by: i.closedBy ? this.user(i.closedBy) : null,
      reactions: this.reactionRollup(`${base}/reactions`, i.reactions),
      timeline_url: `${base}/timeline`,
      performed_via_github_app: i.viaApp ? this.app() : null,
      state_reason: i.stateReason,
    };
    if (i.pull) {
      const pullBase = this.api(`/repos/${full}/pulls/${i.number}`);
      const html = this.web(`/${full}/pull/${i.number}`);
      // GitHub puts `draft` and `pull_request` just before `body`; key order is cosmetic here.
      issue.draft = i.pull.draft;
      issue.pull_request = { url: pullBase, html_url: html, diff_url: `${html}.diff`, patch_url: `${html}.patch`, merged_at: i.pull.mergedAt };
    }
    return issue;
  }

  issueEvent(i: IssueRec, e: IssueEventRec): IssueEvent {
    const repo = i.repo;
    const nodeType = { labeled: 'LabeledEvent', unlabeled: 'UnlabeledEvent', closed: 'ClosedEvent', reopened: 'ReopenedEvent' }[e.event];
    return {
      id: e.id,
      node_id: nodeId(nodeType, e.id),
      url: this.api(`/repos/${repo.owner.login}/${repo.name}/issues/events/${e.id}`),
      actor: this.user(e.actor),
      event: e.event,
      commit_id: e.commitId ?? null,
      commit_url: e.commitId ? this.api(`/repos/${repo.owner.login}/${repo.name}/commits/${e.commitId}`) : null,
      created_at: e.createdAt,
      ...(e.label ? { label: { ...e.label } } : {}),
      performed_via_github_app: null,
    };
  }

  comment(c: CommentRec): Comment {
    const repo = c.issue.repo;
    const full = `${repo.owner.login}/${repo.name}`;
    const url = this.api(`/repos/${full}/issues/comments/${c.id}`);
    return {
      url,
      html_url: this.web(`/${full}/${c.issue.pull ? 'pull' : 'issues'}/${c.issue.number}#issuecomment-${c.id}`),
      issue_url: this.api(`/repos/${full}/issues/${c.issue.number}`),
      id: c.id,
      node_id: nodeId('IssueComment', c.id),
      user: this.user(c.user),
      created_at: c.createdAt,
      updated_at: c.updatedAt,
      author_association: this.authorAssociation(repo, c.user),
      body: c.body,
      reactions: this.reactionRollup(`${url}/reactions`, c.reactions),
      performed_via_github_app: c.viaApp ? this.app() : null,
    };
  }

  /** GET /pulls/{n}/reviews shape; `webhook` gives the `pull_request_review` payload form (lower-case state). */
  review(r: ReviewRec, webhook = false): Review {
    const repo = r.issue.repo;
    const full = `${repo.owner.login}/${repo.name}`;
    const html = this.web(`/${full}/pull/${r.issue.number}#pullrequestreview-${r.id}`);
    const pullUrl = this.api(`/repos/${full}/pulls/${r.issue.number}`);
    const out: Review = {
      id: r.id,
      node_id: nodeId('PullRequestReview', r.id),
      user: this.user(r.user),
      body: webhook && r.body === '' ? null : r.body,
      state: webhook ? (r.state.toLowerCase() as Review['state']) : r.state,
      html_url: html,
      pull_request_url: pullUrl,
      author_association: this.authorAssociation(repo, r.user),
      _links: { html: { href: html }, pull_request: { href: pullUrl } },
      commit_id: r.commitId,
    };
    if (r.submittedAt !== null) out.submitted_at = r.submittedAt;
    return out;
  }

  /** GET /pulls/{n}/comments shape (also the `pull_request_review_comment` payload's `comment`). */
  reviewComment(c: ReviewCommentRec): ReviewComment {
    const repo = c.issue.repo;
    const full = `${repo.owner.login}/${repo.name}`;
    const url = this.api(`/repos/${full}/pulls/comments/${c.id}`);
    const html = this.web(`/${full}/pull/${c.issue.number}#discussion_r${c.id}`);
    const pullUrl = this.api(`/repos/${full}/pulls/${c.issue.number}`);
    return {
      url,
      pull_request_review_id: c.review.id,
      id: c.id,
      node_id: nodeId('PullRequestReviewComment', c.id),
      diff_hunk: c.diffHunk,
      path: c.path,
      position: c.outdated ? null : c.originalPosition,
      original_position: c.originalPosition,
      commit_id: c.commitId,
      original_commit_id: c.originalCommitId,
      ...(c.inReplyTo ? { in_reply_to_id: c.inReplyTo.id } : {}),
      user: this.user(c.user),
      body: c.body,
      created_at: c.createdAt,
      updated_at: c.updatedAt,
      html_url: html,
      pull_request_url: pullUrl,
      author_association: this.authorAssociation(repo, c.user),
      _links: { self: { href: url }, html: { href: html }, pull_request: { href: pullUrl } },
      reactions: this.reactionRollup(`${url}/reactions`, c.reactions),
      start_line: null,
      original_start_line: null,
      start_side: null,
      line: c.outdated ? null : c.line,
      original_line: c.originalLine,
      side: c.side,
      subject_type: 'line',
      performed_via_github_app: c.viaApp ? this.app() : null,
    };
  }

  private pullRef(repo: RepoRec, ref: string, fallbackSha: string, frozenSha?: string | null): PullRef {
    return {
      label: `${repo.owner.login}:${ref}`,
      ref,
      sha: frozenSha ?? gitRepo.branchSha(repo.gitDir, ref) ?? fallbackSha,
      user: this.user(repo.owner),
      repo: this.repo(repo),
    };
  }

  pull(i: IssueRec, full = false): Pull {
    const p = i.pull;
    if (!p) throw new Error(`#${i.number} is not a pull request`);
    const repo = i.repo;
    const fullName = `${repo.owner.login}/${repo.name}`;
    const base = this.api(`/repos/${fullName}/pulls/${i.number}`);
    const html = this.web(`/${fullName}/pull/${i.number}`);
    const issueUrl = this.api(`/repos/${fullName}/issues/${i.number}`);
    const head = this.pullRef(repo, p.headRef, '0'.repeat(40), p.frozenHeadSha);
    const baseRef = this.pullRef(repo, p.baseRef, '0'.repeat(40), p.frozenBaseSha);
    const pull: Pull = {
      url: base,
      id: p.id,
      node_id: nodeId('PullRequest', p.id),
      html_url: html,
      diff_url: `${html}.diff`,
      patch_url: `${html}.patch`,
      issue_url: issueUrl,
      commits_url: `${base}/commits`,
      review_comments_url: `${base}/comments`,
      review_comment_url: this.api(`/repos/${fullName}/pulls/comments{/number}`),
      comments_url: `${issueUrl}/comments`,
      statuses_url: this.api(`/repos/${fullName}/statuses/${head.sha}`),
      number: i.number,
      state: i.state,
      locked: false,
      title: i.title,
      user: this.user(i.user),
      body: i.body,
      labels: i.labels.map((l) => this.label(repo, l)),
      milestone: null,
      active_lock_reason: null,
      created_at: i.createdAt,
      updated_at: i.updatedAt,
      closed_at: i.closedAt,
      merged_at: p.mergedAt,
      merge_commit_sha: p.mergeCommitSha ?? null,
      assignee: null,
      assignees: [],
      requested_reviewers: p.requestedReviewers.map((u) => this.user(u)),
      requested_teams: [],
      head,
      base: baseRef,
      _links: {
        self: { href: base },
        html: { href: html },
        issue: { href: issueUrl },
        comments: { href: `${issueUrl}/comments` },
        review_comments: { href: `${base}/comments` },
        review_comment: { href: this.api(`/repos/${fullName}/pulls/comments{/number}`) },
        commits: { href: `${base}/commits` },
        statuses: { href: this.api(`/repos/${fullName}/statuses/${head.sha}`) },
      },
      author_association: this.authorAssociation(repo, i.user),
      auto_merge: null,
      draft: p.draft,
    };
    if (full) {
      const stats = gitRepo.diffStats(repo.gitDir, baseRef.sha, head.sha);
      pull.merged = p.mergedAt !== null;
      pull.mergeable = i.state === 'open' ? true : null;
      pull.rebaseable = i.state === 'open' ? true : null;
      pull.mergeable_state = p.draft ? 'draft' : 'clean';
      pull.merged_by = p.mergedBy ? this.user(p.mergedBy) : null;
      pull.comments = i.comments.length;
      pull.review_comments = this.reviewCommentsOf(i).length;
      pull.maintainer_can_modify = false;
      pull.commits = gitRepo.countCommits(repo.gitDir, baseRef.sha, head.sha);
      pull.additions = stats.additions;
      pull.deletions = stats.deletions;
      pull.changed_files = stats.changedFiles;
    }
    return pull;
  }
}
