import { createWriteStream, type WriteStream } from 'node:fs';
import { SecretScanner } from '../observability/secrets.ts';
import type { RetryRecord } from './model-client.ts';
import type { StoredAssistantMessage } from './response.ts';

export interface ToolStepRecord {
  id: string;
  name: string;
  arguments: string;
  observation: string;
  duration_ms: number;
  meta?: Record<string, unknown>;
}

/** One line of trajectory.jsonl: one model call and the tool calls it led to. */
export interface StepRecord {
  step: number;
  started_at: string;
  model_ms: number;
  attempts: number;
  retries: RetryRecord[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number; cached_tokens?: number } | null;
  finish_reason: string;
  assistant: StoredAssistantMessage;
  rescued_tool_calls: boolean;
  tools: ToolStepRecord[];
  warnings: string[];
  error?: string;
}

export interface TrajectorySink {
  write(record: StepRecord): void;
  /** Writes out at once whatever write() has deferred (the loop calls it before it returns). */
  flush?(): void;
  close(): Promise<void>;
}

/** Appends redacted step records to a JSON-lines file. */
export class JsonlTrajectory implements TrajectorySink {
  private readonly stream: WriteStream;

  /**
   * `tee` receives every record as written (redacted), e.g. a run recorder that stores the run in
   * Redis for the run pages; if it throws, the trajectory file is still written.
   */
  constructor(
    file: string,
    private readonly scanner: SecretScanner,
    private readonly tee?: (record: StepRecord) => void,
  ) {
    this.stream = createWriteStream(file, { flags: 'w' });
    // A full disk must cost the trajectory, not crash the worker and every job on it.
    this.stream.on('error', (err) => {
      this.failed = err.message;
    });
  }

  /** Set when writing failed (e.g. ENOSPC); later records are dropped. */
  failed: string | undefined;

  private pending: StepRecord[] = [];

  /**
   * Only queues the record: redaction, the tee and the file write cost a step more than all the
   * rest of the loop's own work, so they happen when flush() is called, which the agent loop does
   * once its next request has left (and before it returns). Records keep their order; close()
   * writes whatever is still queued.
   */
  write(record: StepRecord): void {
    this.pending.push(record);
  }

  flush(): void {
    const records = this.pending;
    this.pending = [];
    for (const record of records) this.writeNow(record);
  }

  private writeNow(record: StepRecord): void {
    const redacted = this.scanner.redactDeepIfNeeded(record);
    if (this.tee) {
      try {
        this.tee(redacted);
      } catch {
        /* the recorder's trouble is its own; the file below is the record of truth */
      }
    }
    if (this.failed) return;
    this.stream.write(`${JSON.stringify(redacted)}\n`);
  }

  close(): Promise<void> {
    this.flush();
    if (this.failed || this.stream.destroyed) return Promise.resolve();
    return new Promise((resolve) => this.stream.end(resolve));
  }
}

export class MemoryTrajectory implements TrajectorySink {
  readonly records: StepRecord[] = [];
  write(record: StepRecord): void {
    this.records.push(record);
  }
  async close(): Promise<void> {}
}
