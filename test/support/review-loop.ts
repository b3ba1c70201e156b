/**
 * Helpers for the review-loop end-to-end tests (test/e2e/review-loop.test.ts): a model script that
 * tells the original issue run from the follow-up runs on the same title, a gate to hold a run in
 * the middle, and readers for what Lilypad leaves on a pull request (status replies, thread replies,
 * the Revisions table, the commit graph in the stand-in's bare repository).
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { GitHubStandin, RecordedApiRequest } from './github-standin/index.ts';
import type { ChatRequestBody, ScriptedReply } from './model-server.ts';
import { eventually as poll } from './poll.ts';

export const FOLLOWUP_MARKER = '<!-- lilypad:followup -->';
export const BOT = 'lilypad[bot]';

/** The text of the first user message of a chat request (title, newline, body). */
export function userText(body: ChatRequestBody): string {
  return String(body.messages.find((m) => m.role === 'user')?.content ?? '');
}

/** A promise the test opens when it likes; a model script awaits `wait` to hold a run. */
export class Gate {
  readonly wait: Promise<void>;
  private release!: () => void;
  opened = false;
  constructor() {
    this.wait = new Promise<void>((resolve) => (this.release = resolve));
  }
  open(): void {
    this.opened = true;
    this.release();
  }
}

/** One chat request a follow-up run made, as the script saw it. */
export interface FollowUpCall {
  /** 0 for the first follow-up on this title, 1 for the next, … */
  run: number;
  turn: number;
  body: ChatRequestBody;
  /** Order of arrival across every call of this script (original run included). */
  seq: number;
  at: number;
}

export type FollowUpReply = (turn: number, body: ChatRequestBody, run: number) => ScriptedReply | Promise<ScriptedReply>;

/**
 * The model's script for one issue title: the original run (its user message is exactly
 * `title\nissueBody`) plays `original`; every other conversation with that title is a follow-up,
 * numbered in order of its first request, and is answered by `followUp`.
 */
export class LoopScript {
  readonly calls: FollowUpCall[] = [];
  /** Sequence numbers of the original run's requests. */
  readonly originalSeqs: number[] = [];
  private seq = 0;
  private runs = 0;
  constructor(
    readonly title: string,
    readonly issueBody: string,
    private readonly original: ScriptedReply[],
    private readonly followUp: FollowUpReply,
  ) {}

  /** The ScriptBook entry. */
  readonly entry = (turn: number, body: ChatRequestBody): ScriptedReply | Promise<ScriptedReply> => {
    const seq = this.seq++;
    if (userText(body) === `${this.title}\n${this.issueBody}`) {
      this.originalSeqs.push(seq);
      return this.original[turn] ?? { content: 'done' };
    }
    // A follow-up: a new conversation starts at turn 0 (the harness counts assistant messages).
    const run = turn === 0 ? this.runs++ : this.runOf(body);
    this.calls.push({ run, turn, body, seq, at: Date.now() });
    return this.followUp(turn, body, run);
  };

  /** The follow-up run a later turn belongs to: the run whose first request has the same user message. */
  private runOf(body: ChatRequestBody): number {
    const text = userText(body);
    const first = [...this.calls].reverse().find((c) => c.turn === 0 && userText(c.body) === text);
    return first?.run ?? this.runs - 1;
  }

  /** How many follow-up runs have called the model. */
  get followUpRuns(): number {
    return this.runs;
  }

  /** The first request of follow-up run `run` (its one user message is the task). */
  task(run: number): ChatRequestBody | undefined {
    return this.calls.find((c) => c.run === run && c.turn === 0)?.body;
  }

  /** Every follow-up request's full body, as one string (for "never reaches the model" checks). */
  everythingSent(): string {
    return this.calls.map((c) => JSON.stringify(c.body)).join('\n');
  }
}

/** The original run: fix add() (a - b → a + b), then finish. */
export const FIX_ADD: ScriptedReply[] = [
  { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
  { content: 'Fixed `add()` so it returns the sum.' },
];

/** A follow-up that makes one edit, then finishes with `summary`. */
export function editThenFinish(edit: { file_path: string; old_string: string; new_string: string } | { file_path: string; content: string }, summary: string): FollowUpReply {
  return (turn) => {
    if (turn === 0) return { toolCalls: [{ name: 'content' in edit ? 'Write' : 'Edit', arguments: { ...edit } }] };
    return { content: summary };
  };
}

/** Lilypad's status replies for follow-ups in the pull request's conversation, oldest first. */
export function followupReplies(gh: GitHubStandin, owner: string, repo: string, pr: number) {
  return gh.comments(owner, repo, pr).filter((c) => c.body.startsWith(FOLLOWUP_MARKER));
}

/** Lilypad's replies in the review thread whose first comment is `rootCommentId`. */
export function threadReplies(gh: GitHubStandin, owner: string, repo: string, pr: number, rootCommentId: number) {
  return gh.reviewComments(owner, repo, pr).filter((c) => c.in_reply_to_id === rootCommentId && c.user.login === BOT);
}

/** The data rows of the `### Revisions` table in a pull request body (header and separator dropped); null without the section. */
export function revisionRows(prBody: string | null): string[] | null {
  const text = prBody ?? '';
  const at = text.search(/^### Revisions[ \t]*$/m);
  if (at < 0) return null;
  const lines = text.slice(at).split('\n').slice(1);
  while (lines.length && lines[0]!.trim() === '') lines.shift();
  const table: string[] = [];
  for (const l of lines) {
    if (!l.trim().startsWith('|')) break;
    table.push(l.trim());
  }
  return table.slice(2);
}

/** The first parent of `sha` in the stand-in's bare repository (null for a root commit). */
export function parentOf(gh: GitHubStandin, owner: string, repo: string, sha: string): string | null {
  const gitDir = path.join(gh.gitRoot, owner.toLowerCase(), `${repo.toLowerCase()}.git`);
  const out = execFileSync('git', ['--git-dir', gitDir, 'rev-list', '--parents', '-n', '1', sha], { encoding: 'utf8' }).trim().split(' ');
  return out[1] ?? null;
}

/** The numeric `id` of `payload[key]` (a webhook payload's `comment` or `review`). */
export function idIn(payload: Record<string, unknown>, key: 'comment' | 'review'): number {
  const obj = payload[key] as { id?: unknown } | undefined;
  if (typeof obj?.id !== 'number') throw new Error(`the payload has no ${key}.id`);
  return obj.id;
}

/**
 * Requests with which the app would approve, request changes, dismiss a review, resolve a thread or
 * mark a pull request ready: Lilypad must never make any of them.
 */
export function forbiddenCalls(gh: GitHubStandin): RecordedApiRequest[] {
  return gh.requests.filter((r) => {
    if (r.kind !== 'api' || r.token === null) return false;
    const p = r.path.split('?')[0]!;
    if (r.method === 'POST' && /\/pulls\/\d+\/reviews$/.test(p)) return true; // a review (any event)
    if (r.method === 'POST' && /\/pulls\/\d+\/reviews\/\d+\/events$/.test(p)) return true; // submitting a pending one
    if (r.method === 'PUT' && /\/reviews\/\d+\/dismissals$/.test(p)) return true;
    if (r.method === 'PATCH' && /\/pulls\/\d+$/.test(p) && (r.body as { draft?: unknown } | undefined)?.draft === false) return true;
    if (/graphql$/.test(p) && /resolveReviewThread|markPullRequestReadyForReview|dismissPullRequestReview|submitPullRequestReview|addPullRequestReview\b/.test(r.rawBody)) return true;
    return false;
  });
}

/**
 * Runs `check` (which asserts) until it passes or `timeoutMs` is over, then throws its last error:
 * for what Lilypad finishes around the final status edit (thread replies, the PR body).
 */
export function eventually(check: () => void | Promise<void>, timeoutMs = 15_000): Promise<void> {
  return poll(check, { what: 'the check to pass', timeoutMs, intervalMs: 100 });
}
