import { statusOf, type GitHubClient, type IssueRef } from '../github/client.ts';
import type { StatusState, StatusWriter } from '../github/status-comment.ts';
import type { Logger } from '../observability/logger.ts';

/**
 * The one writer of a run's status comment. Edits are applied strictly in order; once the final
 * state (done, no change, failed, cancelled, stale) is set, no later progress edit can land after
 * it and no second final state is written. A failed edit is logged, never fails the job.
 */
export class RunStatus {
  private chain: Promise<void> = Promise.resolve();
  private finalState: StatusState | undefined;
  private progressInFlight = false;

  constructor(
    private readonly deps: {
      comments: StatusWriter;
      /** The client for edits, asked for on every edit. */
      client: () => Promise<GitHubClient>;
      /** Used once when an edit is refused as unauthorised (a token that expired during the job). */
      freshClient: () => Promise<GitHubClient>;
      /** Called once, before the final state is written (the job is over for its users from here). */
      onFinal?: () => Promise<void>;
      /** The issue, or for a follow-up the pull request. */
      ref: IssueRef;
      triggeredBy: string;
      /** A follow-up run's status reply (see StatusComments.set); absent: the issue's status comment. */
      slot?: string;
      /** The run's page, linked from the status once the run has started. */
      runUrl?: string;
      log: Logger;
    },
  ) {}

  get finished(): boolean {
    return this.finalState !== undefined;
  }

  /** A frequent progress edit (agent steps): dropped while another is in flight or once final. */
  progress(state: StatusState): void {
    if (this.finalState || this.progressInFlight) return;
    this.progressInFlight = true;
    void this.enqueue(state, false).finally(() => (this.progressInFlight = false));
  }

  /** A phase change (testing, running, queued for a retry): always written, in order, unless final. */
  phase(state: StatusState): Promise<void> {
    if (this.finalState) return this.chain;
    return this.enqueue(state, false);
  }

  /** The final state; only the first one counts. Resolves when it (and every edit before it) is written. */
  finish(state: StatusState): Promise<void> {
    if (this.finalState) return this.chain;
    this.finalState = state;
    const marked = this.deps.onFinal?.().catch(() => undefined) ?? Promise.resolve();
    return marked.then(() => this.enqueue(state, true));
  }

  private enqueue(state: StatusState, isFinal: boolean): Promise<void> {
    this.chain = this.chain
      .then(async () => {
        if (!isFinal && this.finalState) return;
        try {
          await this.deps.comments.set(await this.deps.client(), this.deps.ref, state, this.deps.triggeredBy, this.deps.slot, this.deps.runUrl);
        } catch (err) {
          if (statusOf(err) !== 401) throw err;
          await this.deps.comments.set(await this.deps.freshClient(), this.deps.ref, state, this.deps.triggeredBy, this.deps.slot, this.deps.runUrl);
        }
      })
      .catch((err: unknown) => this.deps.log.warn({ err: (err as Error).message, state: state.state }, 'status update failed'));
    return this.chain;
  }
}
