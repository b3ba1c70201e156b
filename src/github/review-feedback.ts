import { z } from 'zod';
import type { Logger } from '../observability/logger.ts';
import { statusOf, type GitHubClient, graphqlBaseUrl } from './client.ts';
import { hasWriteAccess } from './permissions.ts';

/**
 * The review feedback on one of Lilypad's pull requests, for a follow-up run: unresolved review
 * threads, the conversation since Lilypad's last revision and the review bodies, each said by
 * someone allowed to steer Lilypad. Everything else is counted, never returned: the text of anyone
 * without write access would be a prompt-injection channel into the model.
 */

/** Lilypad's last revision: a commit sha (its committer date is used) and/or a time. `at` wins. */
export interface FeedbackSince {
  sha?: string;
  at?: string | Date;
}

export interface FetchReviewFeedbackOptions {
  owner: string;
  repo: string;
  pullNumber: number;
  since?: FeedbackSince;
  /** Lilypad's own login (`<slug>[bot]`): its comments are never feedback. */
  botLogin: string;
  /**
   * The repository's `allow_bots`: a bot must be listed here and have write access, the same rule
   * as for a bot's `/lilypad` or review that starts a run.
   */
  allowBots: readonly string[];
  logger?: Pick<Logger, 'info' | 'warn'>;
  signal?: AbortSignal;
}

export interface FeedbackComment {
  /** The REST id (`databaseId` in GraphQL). */
  id: number;
  author: string;
  body: string;
  createdAt: string;
}

export interface FeedbackThread {
  /** The GraphQL node id; `rest:<root comment id>` when read over REST. */
  id: string;
  /** The thread's first comment: where replies go (POST /pulls/{n}/comments/{id}/replies). */
  rootCommentId: number;
  path: string;
  /** The commented line in the current head (null when GitHub no longer knows it). */
  line: number | null;
  /** The diff hunk ending at the commented line. */
  diffHunk: string;
  /** The included comments, oldest first. */
  comments: FeedbackComment[];
}

export type FeedbackReviewState = 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED';

export interface FeedbackReview {
  id: number;
  nodeId: string;
  author: string;
  state: FeedbackReviewState;
  body: string;
  submittedAt: string;
}

export interface FeedbackExclusions {
  /** Comments, review bodies and thread comments by people without write access. */
  notWriters: number;
  /** The same by bots not in `allow_bots`. */
  botsNotAllowed: number;
  /** Lilypad's own comments. */
  own: number;
  resolvedThreads: number;
  outdatedThreads: number;
  /** Outdated comments inside threads that are otherwise current. */
  outdatedComments: number;
  /** Threads whose last word is Lilypad's reply: answered, waiting for the reviewer. */
  answeredThreads: number;
  /**
   * Review bodies, and conversation comments edited since but created before `since` (comments not
   * updated since are not fetched at all, so not counted).
   */
  beforeSince: number;
  /**
   * Quoted lines (`>` block quotes) dropped from kept comments: a quote-reply carries someone
   * else's words, possibly a non-writer's, under a writer's name.
   */
  quotedLines: number;
}

export interface ReviewFeedback {
  /** Where the threads came from. Over REST, resolution is invisible: resolved threads are included. */
  source: 'graphql' | 'rest';
  /** Why GraphQL was not used, when it was not. */
  fallbackReason?: string;
  /** The cut-off used for conversation comments and review bodies (ISO time), null for none. */
  since: string | null;
  threads: FeedbackThread[];
  /** PR conversation comments since `since`, oldest first. */
  conversation: FeedbackComment[];
  /** Non-empty review bodies since `since`, oldest first. */
  reviews: FeedbackReview[];
  excluded: FeedbackExclusions;
}

// ----------------------------------------------------------- boundaries

const userSchema = z.object({ login: z.string(), type: z.string() }).nullable();

const issueCommentSchema = z.object({ id: z.number(), user: userSchema, body: z.string().nullable().optional(), created_at: z.string() });

const reviewCommentSchema = z.object({
  id: z.number(),
  in_reply_to_id: z.number().optional(),
  user: userSchema,
  body: z.string(),
  created_at: z.string(),
  path: z.string(),
  diff_hunk: z.string(),
  position: z.number().nullable().optional(),
  line: z.number().nullable().optional(),
  original_line: z.number().nullable().optional(),
});
export type RestReviewComment = z.infer<typeof reviewCommentSchema>;

const reviewSchema = z.object({
  id: z.number(),
  node_id: z.string(),
  user: userSchema,
  body: z.string().nullable(),
  // REST spells states upper-case, webhooks lower-case.
  state: z.string().transform((s) => s.toUpperCase()),
  submitted_at: z.string().optional(),
});
export type RestReview = z.input<typeof reviewSchema>;

const commitSchema = z.object({ commit: z.object({ committer: z.object({ date: z.string() }).nullable() }) });

const graphqlActor = z.object({ __typename: z.string(), login: z.string() }).nullable();
const graphqlThreadsSchema = z.object({
  data: z
    .object({
      repository: z
        .object({
          pullRequest: z
            .object({
              reviewThreads: z.object({
                nodes: z.array(
                  z.object({
                    id: z.string(),
                    isResolved: z.boolean(),
                    isOutdated: z.boolean(),
                    path: z.string(),
                    line: z.number().nullable(),
                    comments: z.object({
                      nodes: z.array(
                        z.object({ databaseId: z.number(), body: z.string(), author: graphqlActor, createdAt: z.string(), diffHunk: z.string(), outdated: z.boolean() }),
                      ),
                      pageInfo: z.object({ hasNextPage: z.boolean() }),
                    }),
                  }),
                ),
                pageInfo: z.object({ hasNextPage: z.boolean(), endCursor: z.string().nullable() }),
              }),
            })
            .nullable(),
        })
        .nullable(),
    })
    .nullable()
    .optional(),
  errors: z.array(z.object({ message: z.string(), type: z.string().optional(), extensions: z.object({ code: z.string().optional() }).loose().optional() }).loose()).optional(),
});

/** The one GraphQL query Lilypad sends (the GitHub stand-in serves exactly this schema subset). */
const REVIEW_THREADS_QUERY = `query LilypadReviewThreads($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 50, after: $after) {
        nodes {
          id
          isResolved
          isOutdated
          path
          line
          comments(first: 100) {
            nodes { databaseId body author { __typename login } createdAt diffHunk outdated }
            pageInfo { hasNextPage }
          }
        }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
}`;

/** GraphQL reports an app's bot as `Bot` with the login without `[bot]`; REST and `allow_bots` use `name[bot]`. */
function graphqlLogin(actor: z.infer<typeof graphqlActor>): { login: string; bot: boolean } | null {
  if (!actor) return null;
  const bot = actor.__typename === 'Bot';
  return { login: bot && !actor.login.endsWith('[bot]') ? `${actor.login}[bot]` : actor.login, bot };
}

// ----------------------------------------------------------- who may speak

export type Author = { login: string; bot: boolean } | null;
/** ok: may steer Lilypad; own: Lilypad itself; bot: a bot not in allow_bots; not-writer: no write access (or a deleted account). */
export type Speaker = 'ok' | 'own' | 'bot' | 'not-writer';

function restAuthor(user: z.infer<typeof userSchema>): Author {
  return user ? { login: user.login, bot: user.type === 'Bot' } : null;
}

/** Decides every distinct author once (one permission request per person). */
async function decideSpeakers(client: GitHubClient, opts: FetchReviewFeedbackOptions, authors: Author[]): Promise<(a: Author) => Speaker> {
  const allowed = new Set(opts.allowBots.map((b) => b.toLowerCase()));
  const own = opts.botLogin.toLowerCase();
  const decided = new Map<string, Speaker>();
  for (const a of authors) {
    if (!a) continue;
    const key = a.login.toLowerCase();
    if (decided.has(key)) continue;
    if (key === own) decided.set(key, 'own');
    else if (a.bot && !allowed.has(key)) decided.set(key, 'bot');
    else decided.set(key, (await hasWriteAccess(client, opts.owner, opts.repo, a.login)) ? 'ok' : 'not-writer');
  }
  return (a) => (a ? (decided.get(a.login.toLowerCase()) ?? 'not-writer') : 'not-writer');
}

// ----------------------------------------------------------- threads

/** A thread as read from either API, before anyone is filtered out. */
export interface RawThread {
  id: string;
  rootCommentId: number;
  path: string;
  line: number | null;
  diffHunk: string;
  /** null: unknown (REST cannot tell). */
  isResolved: boolean | null;
  isOutdated: boolean;
  comments: Array<{ id: number; author: { login: string; bot: boolean } | null; body: string; createdAt: string; outdated: boolean }>;
}

/**
 * Groups REST review comments into threads: a comment without `in_reply_to_id` opens one, replies
 * join the thread of the comment they answer. `position` null means outdated.
 */
export function threadsFromRestComments(comments: readonly RestReviewComment[]): RawThread[] {
  const byId = new Map(comments.map((c) => [c.id, c]));
  const rootOf = (c: RestReviewComment): RestReviewComment => {
    let cur = c;
    const seen = new Set<number>();
    while (cur.in_reply_to_id !== undefined && !seen.has(cur.id)) {
      seen.add(cur.id);
      const parent = byId.get(cur.in_reply_to_id);
      if (!parent) break; // the parent was deleted: this reply stands for the thread
      cur = parent;
    }
    return cur;
  };
  const threads = new Map<number, RawThread>();
  const sorted = [...comments].sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id - b.id));
  for (const c of sorted) {
    const root = rootOf(c);
    let t = threads.get(root.id);
    if (!t) {
      const outdated = root.position === null || root.line === null;
      t = {
        id: `rest:${root.id}`,
        rootCommentId: root.id,
        path: root.path,
        line: outdated ? null : (root.line ?? root.original_line ?? null),
        diffHunk: root.diff_hunk,
        isResolved: null,
        isOutdated: outdated,
        comments: [],
      };
      threads.set(root.id, t);
    }
    t.comments.push({ id: c.id, author: restAuthor(c.user), body: c.body, createdAt: c.created_at, outdated: c.position === null || c.line === null });
  }
  return [...threads.values()];
}

/** Parses one REST review comment (also the `comment` of a `pull_request_review_comment` webhook). */
export function parseRestReviewComment(raw: unknown): RestReviewComment {
  return reviewCommentSchema.parse(raw);
}

class GraphqlUnavailable extends Error {}

async function graphqlThreads(client: GitHubClient, opts: FetchReviewFeedbackOptions): Promise<RawThread[]> {
  const baseUrl = graphqlBaseUrl(client);
  const threads: RawThread[] = [];
  let after: string | null = null;
  for (let page = 0; page < 100; page++) {
    let raw: unknown;
    try {
      const res = await client.request('POST /graphql', {
        baseUrl,
        query: REVIEW_THREADS_QUERY,
        variables: { owner: opts.owner, name: opts.repo, number: opts.pullNumber, after },
        ...(opts.signal ? { request: { signal: opts.signal } } : {}),
      });
      raw = res.data;
    } catch (err) {
      const status = statusOf(err);
      if (status === 404 || status === 401) throw new GraphqlUnavailable(`GraphQL answered HTTP ${status}`);
      throw err;
    }
    const reply = graphqlThreadsSchema.safeParse(raw);
    if (!reply.success) throw new Error(`unexpected GraphQL reply for the review threads of ${opts.owner}/${opts.repo}#${opts.pullNumber}: ${reply.error.message}`);
    const errors = reply.data.errors ?? [];
    const unsupported = errors.find((e) => ['undefinedField', 'argumentNotAccepted', 'selectionMismatch'].includes(e.extensions?.code ?? ''));
    if (unsupported) throw new GraphqlUnavailable(`this server's GraphQL schema lacks what Lilypad asks for: ${unsupported.message}`);
    const connection = reply.data.data?.repository?.pullRequest?.reviewThreads;
    if (!connection) {
      const why = errors.map((e) => e.message).join('; ') || 'no data';
      throw new Error(`could not read the review threads of ${opts.owner}/${opts.repo}#${opts.pullNumber} over GraphQL: ${why}`);
    }
    for (const n of connection.nodes) {
      const first = n.comments.nodes[0];
      if (!first) continue;
      if (n.comments.pageInfo.hasNextPage) opts.logger?.warn({ thread: n.id }, 'review thread has more than 100 comments; only the first 100 are read');
      threads.push({
        id: n.id,
        rootCommentId: first.databaseId,
        path: n.path,
        line: n.line,
        diffHunk: first.diffHunk,
        isResolved: n.isResolved,
        isOutdated: n.isOutdated,
        comments: n.comments.nodes.map((c) => ({ id: c.databaseId, author: graphqlLogin(c.author), body: c.body, createdAt: c.createdAt, outdated: c.outdated })),
      });
    }
    if (!connection.pageInfo.hasNextPage || !connection.pageInfo.endCursor) return threads;
    after = connection.pageInfo.endCursor;
  }
  throw new Error(`more than 5000 review threads on ${opts.owner}/${opts.repo}#${opts.pullNumber}`);
}

/** GET a list endpoint page by page (100 a page) until a short page. */
async function listAll<T>(client: GitHubClient, route: string, params: Record<string, unknown>, schema: z.ZodType<T>, signal: AbortSignal | undefined): Promise<T[]> {
  const out: T[] = [];
  for (let page = 1; page <= 100; page++) {
    const res = await client.request(route, { ...params, per_page: 100, page, ...(signal ? { request: { signal } } : {}) });
    const items = z.array(schema).safeParse(res.data);
    if (!items.success) throw new Error(`unexpected reply from ${route}: ${items.error.message}`);
    out.push(...items.data);
    if (items.data.length < 100) return out;
  }
  return out;
}

async function resolveSince(client: GitHubClient, opts: FetchReviewFeedbackOptions): Promise<string | null> {
  const since = opts.since;
  if (since?.at !== undefined) return new Date(since.at).toISOString();
  if (!since?.sha) return null;
  const res = await client.request('GET /repos/{owner}/{repo}/commits/{ref}', { owner: opts.owner, repo: opts.repo, ref: since.sha, ...(opts.signal ? { request: { signal: opts.signal } } : {}) });
  const date = commitSchema.parse(res.data).commit.committer?.date;
  if (!date) throw new Error(`commit ${since.sha} has no committer date`);
  return new Date(date).toISOString();
}

// ----------------------------------------------------------- selection

export interface RawComment {
  id: number;
  author: Author;
  body: string;
  createdAt: string;
}

export type RawReview = Omit<FeedbackReview, 'author'> & { author: Author };

/** Parses one REST issue comment (also the `comment` of an `issue_comment` webhook). */
export function parseIssueComment(raw: unknown): RawComment {
  const c = issueCommentSchema.parse(raw);
  return { id: c.id, author: restAuthor(c.user), body: c.body ?? '', createdAt: c.created_at };
}

/** Parses one REST review (also the `review` of a `pull_request_review` webhook); null for pending or dismissed reviews. */
export function parseRestReview(raw: unknown): RawReview | null {
  const r = reviewSchema.parse(raw);
  if (r.state !== 'APPROVED' && r.state !== 'CHANGES_REQUESTED' && r.state !== 'COMMENTED') return null;
  if (!r.submitted_at) return null;
  return { id: r.id, nodeId: r.node_id, author: restAuthor(r.user), state: r.state, body: r.body ?? '', submittedAt: r.submitted_at };
}

/**
 * The pure half of fetchReviewFeedback: drops resolved and outdated threads, threads Lilypad has
 * answered last, outdated comments, anything before `since` (conversation and review bodies only),
 * empty review bodies, and everything not said by an `ok` speaker; counts what it dropped.
 */
export function selectFeedback(
  raw: { threads: readonly RawThread[]; comments: readonly RawComment[]; reviews: readonly RawReview[] },
  speaker: (a: Author) => Speaker,
  since: string | null,
): Pick<ReviewFeedback, 'threads' | 'conversation' | 'reviews' | 'excluded'> {
  const excluded: FeedbackExclusions = { notWriters: 0, botsNotAllowed: 0, own: 0, resolvedThreads: 0, outdatedThreads: 0, outdatedComments: 0, answeredThreads: 0, beforeSince: 0, quotedLines: 0 };
  // A writer's own words only: quoted lines go, and a comment that was only a quote goes with them.
  const own = (body: string): string => {
    const q = dropQuotedLines(body);
    excluded.quotedLines += q.dropped;
    return q.text;
  };
  const isNew = (at: string): boolean => since === null || Date.parse(at) >= Date.parse(since);
  const admit = (a: Author): a is NonNullable<Author> => {
    const s = speaker(a);
    if (s === 'own') excluded.own++;
    else if (s === 'bot') excluded.botsNotAllowed++;
    else if (s === 'not-writer') excluded.notWriters++;
    return s === 'ok' && a !== null;
  };

  const threads: FeedbackThread[] = [];
  for (const t of raw.threads) {
    if (t.isResolved === true) {
      excluded.resolvedThreads++;
      continue;
    }
    if (t.isOutdated) {
      excluded.outdatedThreads++;
      continue;
    }
    const last = t.comments[t.comments.length - 1];
    if (last && speaker(last.author) === 'own') {
      excluded.answeredThreads++;
      continue;
    }
    const kept: FeedbackComment[] = [];
    for (const c of t.comments) {
      if (c.outdated) excluded.outdatedComments++;
      else if (admit(c.author)) {
        const body = own(c.body);
        if (body.trim()) kept.push({ id: c.id, author: c.author.login, body, createdAt: c.createdAt });
      }
    }
    if (kept.length > 0) threads.push({ id: t.id, rootCommentId: t.rootCommentId, path: t.path, line: t.line, diffHunk: t.diffHunk, comments: kept });
  }

  const conversation: FeedbackComment[] = [];
  for (const c of raw.comments) {
    if (!isNew(c.createdAt)) excluded.beforeSince++;
    else if (admit(c.author)) {
      const body = own(c.body);
      if (body.trim()) conversation.push({ id: c.id, author: c.author.login, body, createdAt: c.createdAt });
    }
  }

  const reviews: FeedbackReview[] = [];
  for (const r of raw.reviews) {
    if (r.body.trim() === '') continue; // the wrapper of line comments
    if (!isNew(r.submittedAt)) excluded.beforeSince++;
    else if (admit(r.author)) {
      const body = own(r.body);
      if (body.trim()) reviews.push({ ...r, author: r.author.login, body });
    }
  }

  conversation.sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt) || a.id - b.id);
  reviews.sort((a, b) => Date.parse(a.submittedAt) - Date.parse(b.submittedAt) || a.id - b.id);
  return { threads, conversation, reviews, excluded };
}

/**
 * Drops Markdown block quotes (lines starting with `>`, up to three spaces in) and their lazy
 * continuation lines (the non-blank lines right after, which Markdown renders inside the quote),
 * outside fenced code blocks. What is left is what the comment's author wrote themselves.
 */
export function dropQuotedLines(body: string): { text: string; dropped: number } {
  const out: string[] = [];
  let dropped = 0;
  let inQuote = false;
  let fence: string | null = null;
  for (const line of body.split('\n')) {
    const opener = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== null) {
      if (opener && opener[0] === fence[0] && opener.length >= fence.length) fence = null;
      out.push(line);
      continue;
    }
    if (/^ {0,3}>/.test(line) || (inQuote && line.trim() !== '')) {
      inQuote = true;
      dropped++;
      continue;
    }
    inQuote = false;
    if (opener) fence = opener;
    out.push(line);
  }
  return { text: out.join('\n').replace(/^\s*\n/, ''), dropped };
}

// ----------------------------------------------------------- the whole fetch

/** Reads the feedback for a follow-up run on `opts.pullNumber`. */
export async function fetchReviewFeedback(client: GitHubClient, opts: FetchReviewFeedbackOptions): Promise<ReviewFeedback> {
  const { owner, repo, pullNumber: pull_number, signal } = opts;

  // 1. The cut-off for the conversation and review bodies.
  const since = await resolveSince(client, opts);

  // 2. Threads: GraphQL (knows resolution), else REST.
  let source: ReviewFeedback['source'] = 'graphql';
  let fallbackReason: string | undefined;
  let threads: RawThread[];
  try {
    threads = await graphqlThreads(client, opts);
  } catch (err) {
    if (!(err instanceof GraphqlUnavailable)) throw err;
    source = 'rest';
    fallbackReason = err.message;
    const comments = await listAll(client, 'GET /repos/{owner}/{repo}/pulls/{pull_number}/comments', { owner, repo, pull_number }, reviewCommentSchema, signal);
    threads = threadsFromRestComments(comments);
  }
  opts.logger?.info({ owner, repo, pullNumber: pull_number, source, fallbackReason, threads: threads.length }, `review threads read over ${source === 'graphql' ? 'GraphQL' : 'REST (resolution unknown)'}`);

  // 3. The conversation (`since` filters on updated_at; created_at decides below) and the reviews.
  const comments = (
    await listAll(client, 'GET /repos/{owner}/{repo}/issues/{issue_number}/comments', { owner, repo, issue_number: pull_number, ...(since ? { since } : {}) }, z.unknown(), signal)
  ).map(parseIssueComment);
  const reviews = (await listAll(client, 'GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews', { owner, repo, pull_number }, z.unknown(), signal))
    .map(parseRestReview)
    .filter((r): r is RawReview => r !== null);

  // 4. Who may speak, then the selection.
  const authors = [...threads.filter((t) => t.isResolved !== true && !t.isOutdated).flatMap((t) => t.comments.map((c) => c.author)), ...comments.map((c) => c.author), ...reviews.map((r) => r.author)];
  const speaker = await decideSpeakers(client, opts, authors);
  return { source, ...(fallbackReason ? { fallbackReason } : {}), since, ...selectFeedback({ threads, comments, reviews }, speaker, since) };
}
