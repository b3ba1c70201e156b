/**
 * An issue's history, as GitHub keeps it: merging a pull request (a real merge or squash commit on
 * the base branch, `refs/pull/N/head` kept, head and base shas frozen), issues closed by a merged
 * pull request's closing keywords (a `closed` event carrying the merge commit), issue timelines with
 * `cross-referenced` events, and listing a repository's issues with `state` and `since`.
 *
 * REST:
 * - `GET /repos/{o}/{r}/issues` (state, since, sort, direction, labels; pull requests included, as on GitHub)
 * - `GET /repos/{o}/{r}/issues/{n}/timeline` (labeled, unlabeled, closed, reopened, commented, cross-referenced)
 * - `PUT /repos/{o}/{r}/pulls/{n}/merge` (merge_method merge or squash; sha; commit_title, commit_message)
 */
import { spawnSync } from 'node:child_process';
import * as gitRepo from './git-repo.ts';
import type { RouteKit } from './rest.ts';
import { isoNow } from './state.ts';
import type { IssueRec, RepoRec, StandinState, UserRec } from './state.ts';
import type { StandinHistoryHelpers, WebhookPayload } from './types.ts';
import type { PayloadFactory } from './webhooks.ts';

/** A merge that cannot happen, with GitHub's status and message. */
export class MergeError extends Error {
  constructor(
    readonly status: 405 | 409,
    message: string,
  ) {
    super(message);
  }
}

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `#N`, `owner/repo#N` and the issue's or pull request's web address, in `text`. */
function mentions(state: StandinState, target: IssueRec, text: string | null): boolean {
  if (!text) return false;
  const repo = target.repo;
  const full = escape(`${repo.owner.login}/${repo.name}`);
  const short = new RegExp(`(?:^|[^\\w/#])(?:${full})?#${target.number}(?!\\d)`, 'i');
  const url = new RegExp(`${escape(state.origin)}/${full}/(?:issues|pull)/${target.number}(?!\\d)`, 'i');
  return short.test(text) || url.test(text);
}

/** The issue numbers a pull request body closes with GitHub's keywords (close, fixes, resolved, …). */
export function closingReferences(repo: RepoRec, text: string | null): number[] {
  if (!text) return [];
  const full = escape(`${repo.owner.login}/${repo.name}`);
  const re = new RegExp(`\\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\\s*:?\\s+(?:${full})?#(\\d+)(?!\\d)`, 'gi');
  return [...new Set([...text.matchAll(re)].map((m) => Number(m[1])))];
}

function git(gitDir: string, args: string[], opts: { input?: string; env?: Record<string, string> } = {}): { status: number; stdout: string; stderr: string } {
  const res = spawnSync('git', ['--git-dir', gitDir, ...args], { env: gitRepo.gitEnv(opts.env), input: opts.input, encoding: 'utf8' });
  return { status: res.status ?? 1, stdout: res.stdout ?? '', stderr: res.stderr ?? '' };
}

/**
 * Merges pull request `issue` as `by`: a merge commit (or, for squash, one commit) on the base
 * branch; `refs/pull/N/head` keeps the head; the pull request is closed and merged; every open issue
 * its body closes with a keyword is closed with a `closed` event carrying the merge commit (only
 * when merged into the default branch, as on GitHub). Returns the new commit's sha.
 */
export function mergePull(
  state: StandinState,
  issue: IssueRec,
  by: UserRec,
  opts: { method?: 'merge' | 'squash'; sha?: string; commitTitle?: string; commitMessage?: string } = {},
): string {
  const pull = issue.pull;
  if (!pull) throw new Error(`#${issue.number} is not a pull request`);
  if (pull.mergedAt !== null || issue.state !== 'open') throw new MergeError(405, 'Pull Request is not mergeable');
  if (pull.draft) throw new MergeError(405, 'Pull Request is still a draft');
  const repo = issue.repo;
  const head = gitRepo.branchSha(repo.gitDir, pull.headRef);
  const base = gitRepo.branchSha(repo.gitDir, pull.baseRef);
  if (!head || !base) throw new MergeError(405, 'Pull Request is not mergeable');
  if (opts.sha !== undefined && opts.sha !== head) throw new MergeError(409, 'Head branch was modified. Review and try the merge again.');
  const tree = git(repo.gitDir, ['merge-tree', '--write-tree', base, head]);
  if (tree.status !== 0) throw new MergeError(405, 'Pull Request is not mergeable');
  const method = opts.method ?? 'merge';
  const title = opts.commitTitle ?? (method === 'squash' ? `${issue.title} (#${issue.number})` : `Merge pull request #${issue.number} from ${repo.owner.login}/${pull.headRef}`);
  const body = opts.commitMessage ?? (method === 'squash' ? '' : issue.title);
  const email = `${by.id}+${by.login}@users.noreply.${new URL(state.origin).hostname}`;
  const who = { GIT_AUTHOR_NAME: by.login, GIT_AUTHOR_EMAIL: email, GIT_COMMITTER_NAME: 'GitHub', GIT_COMMITTER_EMAIL: `noreply@${new URL(state.origin).hostname}` };
  const parents = method === 'squash' ? ['-p', base] : ['-p', base, '-p', head];
  const commit = git(repo.gitDir, ['commit-tree', tree.stdout.split('\n')[0]!.trim(), ...parents, '-F', '-'], { input: body ? `${title}\n\n${body}\n` : `${title}\n`, env: who });
  if (commit.status !== 0) throw new Error(`merge commit failed: ${commit.stderr}`);
  const sha = commit.stdout.trim();
  const moved = git(repo.gitDir, ['update-ref', `refs/heads/${pull.baseRef}`, sha, base]);
  if (moved.status !== 0) throw new MergeError(409, 'Base branch was modified. Review and try the merge again.');
  git(repo.gitDir, ['update-ref', `refs/pull/${issue.number}/head`, head]);

  const now = isoNow();
  pull.frozenHeadSha = head;
  pull.frozenBaseSha = base;
  pull.mergeCommitSha = sha;
  pull.mergedBy = by;
  pull.mergedAt = now;
  state.setState(issue, 'closed', by, null);
  issue.stateReason = null;
  repo.pushedAt = now;

  if (pull.baseRef === repo.defaultBranch) {
    for (const n of closingReferences(repo, issue.body)) {
      const target = repo.issues.get(n);
      if (!target || target.pull || target.state !== 'open') continue;
      state.setState(target, 'closed', by, 'completed');
      const closed = target.events[target.events.length - 1];
      if (closed?.event === 'closed') closed.commitId = sha;
    }
  }
  return sha;
}

/** Every place (issue or pull request body, or a comment) in the repository that mentions `target`, oldest first. */
function crossReferences(state: StandinState, target: IssueRec): Array<{ at: string; actor: UserRec; source: IssueRec }> {
  const refs: Array<{ at: string; actor: UserRec; source: IssueRec }> = [];
  for (const other of target.repo.issues.values()) {
    if (other === target) continue;
    // GitHub records one cross-reference per referencing issue or pull request: the first mention.
    if (mentions(state, target, other.body) || mentions(state, target, other.title)) {
      refs.push({ at: other.createdAt, actor: other.user, source: other });
      continue;
    }
    const comment = other.comments.find((c) => mentions(state, target, c.body));
    if (comment) refs.push({ at: comment.createdAt, actor: comment.user, source: other });
  }
  return refs;
}

/** GET /repos/{o}/{r}/issues/{n}/timeline items, oldest first. */
function timeline(state: StandinState, issue: IssueRec): Array<Record<string, unknown>> {
  const items: Array<{ at: string; item: Record<string, unknown> }> = [];
  for (const e of issue.events) {
    const json: Record<string, unknown> = { ...state.issueEvent(issue, e) };
    if (e.event === 'closed' || e.event === 'reopened') json.state_reason = e.event === 'closed' ? (issue.pull ? null : (issue.stateReason ?? 'completed')) : 'reopened';
    items.push({ at: e.createdAt, item: json });
  }
  for (const c of issue.comments) items.push({ at: c.createdAt, item: { ...state.comment(c), event: 'commented', actor: state.user(c.user) } });
  for (const ref of crossReferences(state, issue)) {
    items.push({
      at: ref.at,
      item: {
        actor: state.user(ref.actor),
        created_at: ref.at,
        updated_at: ref.at,
        source: { type: 'issue', issue: { ...state.issue(ref.source), repository: state.repo(ref.source.repo) } },
        event: 'cross-referenced',
      },
    });
  }
  // Stable: items of the same second keep events, comments, references in that order.
  return items.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0)).map((x) => x.item);
}

const ISSUE_STATES = ['open', 'closed', 'all'];
const ISSUE_SORTS = ['created', 'updated', 'comments'];

export function defineHistoryRoutes(s: StandinState, kit: RouteKit): void {
  kit.add('GET', '/repos/{owner}/{repo}/issues', 'installation', 'issues=read', 'issues/issues#list-repository-issues', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    kit.need(req, ctx, [['issues', 'read']]);
    const state = req.query.get('state') ?? 'open';
    const sort = req.query.get('sort') ?? 'created';
    const direction = req.query.get('direction') ?? 'desc';
    const sinceText = req.query.get('since');
    const since = sinceText === null ? null : Date.parse(sinceText);
    if (!ISSUE_STATES.includes(state)) kit.validation(req, [{ resource: 'Issue', field: 'state', code: 'invalid' }]);
    if (!ISSUE_SORTS.includes(sort)) kit.validation(req, [{ resource: 'Issue', field: 'sort', code: 'invalid' }]);
    if (direction !== 'asc' && direction !== 'desc') kit.validation(req, [{ resource: 'Issue', field: 'direction', code: 'invalid' }]);
    if (since !== null && Number.isNaN(since)) kit.validation(req, [{ resource: 'Issue', field: 'since', code: 'invalid' }]);
    const labels = (req.query.get('labels') ?? '').split(',').map((l) => l.trim().toLowerCase()).filter(Boolean);
    const items = [...ctx.repo.issues.values()].filter(
      (i) =>
        (state === 'all' || i.state === state) &&
        (since === null || Date.parse(i.updatedAt) >= since) &&
        labels.every((l) => i.labels.some((x) => x.name.toLowerCase() === l)),
    );
    const key = (i: IssueRec): string | number => (sort === 'updated' ? i.updatedAt : sort === 'comments' ? i.comments.length : i.createdAt);
    items.sort((a, b) => {
      const ka = key(a);
      const kb = key(b);
      const order = ka < kb ? -1 : ka > kb ? 1 : a.number - b.number;
      return direction === 'asc' ? order : -order;
    });
    return kit.list(req, items.map((i) => s.issue(i)));
  });

  kit.add('GET', '/repos/{owner}/{repo}/issues/{issue_number}/timeline', 'installation', 'issues=read; pull_requests=read', 'issues/timeline#list-timeline-events-for-an-issue', (req, p) => {
    const ctx = kit.repoCtx(req, p, false);
    const issue = kit.issueOr404(req, ctx.repo, p.issue_number);
    kit.need(req, ctx, kit.conversationNeeds(issue, 'read'));
    return kit.list(req, timeline(s, issue));
  });

  kit.add('PUT', '/repos/{owner}/{repo}/pulls/{pull_number}/merge', 'installation', 'contents=write', 'pulls/pulls#merge-a-pull-request', (req, p) => {
    const ctx = kit.repoCtx(req, p, true);
    kit.need(req, ctx, [['contents', 'write']]);
    const issue = kit.pullOr404(req, ctx.repo, p.pull_number);
    const b = kit.bodyRecord(req);
    const method = b.merge_method ?? 'merge';
    if (method !== 'merge' && method !== 'squash') {
      kit.validation(req, [{ resource: 'PullRequest', field: 'merge_method', code: 'invalid', message: `The stand-in merges with "merge" or "squash", not ${JSON.stringify(method)}` }]);
    }
    try {
      const sha = mergePull(s, issue, kit.actor(ctx), {
        method,
        ...(typeof b.sha === 'string' ? { sha: b.sha } : {}),
        ...(typeof b.commit_title === 'string' ? { commitTitle: b.commit_title } : {}),
        ...(typeof b.commit_message === 'string' ? { commitMessage: b.commit_message } : {}),
      });
      return { status: 200, json: { sha, merged: true, message: 'Pull Request successfully merged' } };
    } catch (err) {
      if (err instanceof MergeError) kit.fail(req, err.status, err.message);
      throw err;
    }
  });
}

export function historyHelpers(state: StandinState, payloads: PayloadFactory): StandinHistoryHelpers {
  const repoOrThrow = (owner: string, repo: string): RepoRec => {
    const r = state.findRepo(owner, repo);
    if (!r) throw new Error(`no repository ${owner}/${repo} in the stand-in`);
    return r;
  };
  return {
    mergePullRequest(owner, repo, number, sender, o = {}): WebhookPayload {
      const issue = repoOrThrow(owner, repo).issues.get(number);
      if (!issue || !issue.pull) throw new Error(`no pull request ${owner}/${repo}#${number} in the stand-in`);
      mergePull(state, issue, state.ensureUser(sender), o.method ? { method: o.method } : {});
      return payloads.pullRequestEvent('closed', issue, sender);
    },

    setRepoVisibility(owner, repo, visibility): void {
      repoOrThrow(owner, repo).private = visibility === 'private';
    },
  };
}
