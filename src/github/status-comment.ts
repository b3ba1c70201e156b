import type { Redis } from 'ioredis';
import { SecretScanner } from '../observability/secrets.ts';
import { readStatusCommentId, withStatusCommentLock, writeStatusCommentId } from '../store/status-comment-ids.ts';
import { statusOf, type GitHubClient, type IssueRef } from './client.ts';

/** The states of the one status comment Lilypad keeps on an issue, edited in place. */
export type StatusState =
  | { state: 'queued'; position: number | null; note?: string }
  | { state: 'running'; step: number; phase?: string }
  | { state: 'testing'; which: 'before' | 'after' }
  | { state: 'done'; prUrl: string; prNumber: number; incomplete: boolean; updated: boolean; exitReason: string; draft?: boolean; note?: string }
  /** A follow-up run pushed a new commit onto the pull request. */
  | { state: 'revised'; sha: string; commitUrl: string; incomplete: boolean; exitReason: string; threads: number; note?: string }
  | { state: 'no_change'; why: string }
  /** `publish: verified` and the change is not: nothing published; what was tried, and how to publish it anyway. */
  | { state: 'withheld'; verdict: string; tried: string; evidence: string }
  | { state: 'failed'; what: string; todo: string }
  | { state: 'cancelled'; by?: string | undefined; why?: string | undefined };

export const STATUS_MARKER = '<!-- lilypad:status -->';
/** Each follow-up run on a pull request has its own status reply, in the pull request's conversation. */
export const FOLLOWUP_MARKER = '<!-- lilypad:followup -->';

/** Why a run stopped before the agent said it was done, in words. */
export function whyUnfinished(exitReason: string): string {
  if (exitReason === 'stuck') return 'the agent was going nowhere (`stuck`: repeating itself, or many steps without a change)';
  if (exitReason === 'llm_query_error') return 'the model server failed (`llm_query_error`)';
  if (exitReason === 'tool_error') return 'the sandbox failed (`tool_error`)';
  return `the budget ran out (\`${exitReason}\`)`;
}

export function renderStatus(s: StatusState, triggeredBy?: string, slot?: string, runUrl?: string): string {
  const who = triggeredBy ? ` (requested by @${triggeredBy})` : '';
  let text: string;
  switch (s.state) {
    case 'queued':
      text = `⏳ **Queued**${who}${s.position !== null ? `: position ${s.position} in the queue` : ''}.${s.note ? ` ${s.note}` : ''}`;
      break;
    case 'running':
      text = `🏃 **Running**${who}: ${s.phase ?? `agent step ${s.step}`}.`;
      break;
    case 'testing':
      text = `🧪 **Testing**${who}: running the test command ${s.which === 'before' ? 'on the untouched code' : 'on the change'}.`;
      break;
    case 'done': {
      const kind = s.draft === false ? 'pull request' : 'draft pull request';
      text = s.incomplete
        ? `⚠️ **Done, incomplete**${who}: ${whyUnfinished(s.exitReason)} before the agent finished; the partial change is in ${kind} #${s.prNumber} (${s.prUrl}). It needs more work.`
        : `✅ **Done**${who}: ${s.updated ? 'updated' : 'opened'} ${kind} #${s.prNumber} (${s.prUrl}) for human review.`;
      if (s.note) text += ` ${s.note}`;
      break;
    }
    case 'revised':
      text = s.incomplete
        ? `⚠️ **Done, incomplete**${who}: ${whyUnfinished(s.exitReason)} before the agent finished; pushed the partial change as [\`${s.sha.slice(0, 7)}\`](${s.commitUrl}). It needs more work.`
        : `✅ **Done**${who}: pushed [\`${s.sha.slice(0, 7)}\`](${s.commitUrl}) to this pull request${s.threads > 0 ? `, and replied in ${s.threads} review thread(s)` : ''}.`;
      if (s.note) text += ` ${s.note}`;
      break;
    case 'no_change':
      text = `➖ **No change**${who}: ${s.why}`;
      break;
    case 'withheld':
      text =
        `🔒 **Not published**${who}: this repository publishes only verified changes (\`publish: verified\`), and the change Lilypad made is **${s.verdict}**. ${s.tried}\n\n${s.evidence}\n\n` +
        'The change is kept with the run. Someone with write access can comment `/lilypad publish` to open it as a draft pull request anyway, or label the issue again for a new run.';
      break;
    case 'failed':
      text = `❌ **Failed**${who}: ${s.what}\n\nWhat to do: ${s.todo}`;
      break;
    case 'cancelled':
      text = `🚫 **Cancelled**${s.by ? ` by @${s.by}` : ''}${s.why ? `: ${s.why}` : '.'}`;
      break;
  }
  if (runUrl && s.state !== 'queued') text += ` [See the run](${runUrl}).`;
  if (slot) return `${FOLLOWUP_MARKER}\n**Lilypad** · ${text}\n\n<sub>Comment \`/lilypad <instructions>\` or request changes to revise again; \`/lilypad cancel\` stops a run.</sub>`;
  return `${STATUS_MARKER}\n**Lilypad** · ${text}\n\n<sub>Label the issue or comment \`/lilypad\` to run again; remove the label or comment \`/lilypad cancel\` to stop.</sub>`;
}

/**
 * Finds or creates the issue's status comment and edits it. The comment id is remembered in
 * Redis; a lock per issue keeps two processes from both creating one.
 */
/** What writes a status: StatusComments, or a test's recorder of states. */
export type StatusWriter = Pick<StatusComments, 'set'>;

export class StatusComments {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    /** Error texts end up in these comments: nothing secret-shaped may be published with them. */
    private readonly scanner: SecretScanner = new SecretScanner(),
    /** This app's bot login (`<slug>[bot]`): only its own marker comments are adopted. */
    private readonly botLogin: () => Promise<string> = async () => '',
  ) {}

  /**
   * Writes the status. Without `slot`: the issue's one status comment. With one: that follow-up
   * run's status reply on the pull request (`ref` is the pull request), created on first use.
   */
  async set(client: GitHubClient, ref: IssueRef, state: StatusState, triggeredBy?: string, slot?: string, runUrl?: string): Promise<void> {
    const body = this.scanner.redact(renderStatus(state, triggeredBy, slot, runUrl));
    await withStatusCommentLock(this.redis, this.prefix, ref, slot, async () => {
      let id = (await readStatusCommentId(this.redis, this.prefix, ref, slot)) ?? (slot ? 0 : await this.find(client, ref));
      if (id) {
        try {
          await client.request('PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}', { owner: ref.owner, repo: ref.repo, comment_id: id, body });
          await writeStatusCommentId(this.redis, this.prefix, ref, slot, id);
          return;
        } catch (err) {
          if (statusOf(err) !== 404) throw err; // deleted by a human: make a new one
          id = 0;
        }
      }
      const res = await client.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
        owner: ref.owner,
        repo: ref.repo,
        issue_number: ref.issueNumber,
        body,
      });
      await writeStatusCommentId(this.redis, this.prefix, ref, slot, Number(res.data.id));
    });
  }

  private async find(client: GitHubClient, ref: IssueRef): Promise<number> {
    const bot = (await this.botLogin()).toLowerCase();
    for (let page = 1; page <= 10; page++) {
      const res = await client.request('GET /repos/{owner}/{repo}/issues/{issue_number}/comments', {
        owner: ref.owner,
        repo: ref.repo,
        issue_number: ref.issueNumber,
        per_page: 100,
        page,
      });
      // Anyone can paste the marker into a comment; only the one this app's bot wrote is the status.
      const hit = res.data.find((c) => c.body?.startsWith(STATUS_MARKER) && c.user?.type === 'Bot' && (!bot || c.user.login.toLowerCase() === bot));
      if (hit) return Number(hit.id);
      if (res.data.length < 100) return 0;
    }
    return 0;
  }
}
