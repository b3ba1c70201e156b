import { agentFinished, toolCall } from '../observability/metrics.ts';
import { callCapSeconds } from '../sandbox/bash-timeout.ts';
import { SandboxError, SandboxLostError } from '../sandbox/errors.ts';
import { CancelledError } from '../shared/cancel.ts';
import type { ToolResult } from '../sandbox/sandbox.ts';
import { ModelError, withJsonBytes, type ChatModel, type RetryRecord } from './model-client.ts';
import { SYSTEM_PROMPT, buildUserMessage } from './prompt.ts';
import { interpretResponse, type StoredAssistantMessage, type ToolMessage } from './response.ts';
import { STUCK_OFF, StuckWatch, type StuckLimits } from './stuck.ts';
import { LEAF_TOOLS } from './tools.ts';
import type { StepRecord, ToolStepRecord, TrajectorySink } from './trajectory.ts';

/** The reference's exit reasons, and Lilypad's `stuck` (see stuck.ts), which the model never sees. */
export type ExitReason = 'agent' | 'max_turns' | 'max_context_len' | 'max_tokens_per_turn' | 'max_time' | 'llm_query_error' | 'tool_error' | 'cancelled' | 'stuck';

export interface AgentBudgets {
  maxSteps: number;
  maxContextTokens: number;
  maxTokensPerTurn: number;
  /** Wall-clock budget, checked before each model call and before each tool call. */
  maxWallSeconds: number;
  /** Longest Bash timeout the model may ask for; longer requests are cut to this. */
  bashTimeoutCapSeconds: number;
  /** When an attempt going nowhere is ended (stuck.ts); absent: never. */
  stuck?: StuckLimits | undefined;
}

export interface ToolExecutor {
  tool(name: string, rawArguments: string, bashCapSeconds: number): Promise<ToolResult>;
}

export interface AgentProgress {
  step: number;
  tokens: number;
  lastTool?: string;
}

interface AgentRunInput {
  title: string;
  body: string;
  model: string;
  client: ChatModel;
  tools: ToolExecutor;
  budgets: AgentBudgets;
  trajectory: TrajectorySink;
  signal?: AbortSignal | undefined;
  onProgress?: (p: AgentProgress) => void;
  /**
   * A sampling seed, sent only when given: best of k runs k attempts with different seeds. A single
   * run sends exactly the request settings the model was trained with.
   */
  seed?: number | undefined;
}

interface AgentUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cached_tokens: number;
}

export interface AgentRunResult {
  exitReason: ExitReason;
  steps: number;
  finalAnswer: string;
  usage: AgentUsage;
  /** Context tracked at the end: last usage.total_tokens plus an estimate of tool output since. */
  contextTokens: number;
  retries: number;
  warnings: string[];
  durationMs: number;
  error?: string;
}

export type Message = { role: 'system' | 'user'; content: string } | StoredAssistantMessage | ToolMessage;

// Tool output appended after the last response is not counted by the server yet; estimate it.
const estimateTokens = (text: string): number => Math.ceil(text.length / 4);

/**
 * The Leaf loop, exactly: one system and one user message, the five tools, fixed request settings,
 * an append-only history sent back byte for byte (so the server's prefix cache hits every turn),
 * sequential tool execution, and the reference's end conditions and exit reasons.
 */
export async function runAgent(input: AgentRunInput): Promise<AgentRunResult> {
  try {
    return await runLoop(input);
  } finally {
    // Every step is on record by the time the caller sees the outcome.
    input.trajectory.flush?.();
  }
}

async function runLoop(input: AgentRunInput): Promise<AgentRunResult> {
  const { budgets, signal } = input;
  const started = Date.now();
  const messages: Message[] = [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: buildUserMessage(input.title, input.body) },
  ];
  const usage: AgentUsage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cached_tokens: 0 };
  const warnings = new Set<string>();
  let steps = 0;
  let tracked = 0;
  let retries = 0;
  let finalAnswer = '';

  const encoder = new RequestEncoder(input.model, budgets, input.seed);
  const watch = new StuckWatch(budgets.stuck ?? STUCK_OFF);
  const outOfTime = (): boolean => (Date.now() - started) / 1000 >= budgets.maxWallSeconds;

  const finish = (exitReason: ExitReason, error?: string): AgentRunResult => {
    agentFinished(steps);
    return {
      exitReason,
      steps,
      finalAnswer,
      usage,
      contextTokens: tracked,
      retries,
      warnings: [...warnings],
      durationMs: Date.now() - started,
      ...(error ? { error } : {}),
    };
  };

  for (;;) {
    if (signal?.aborted) return finish('cancelled');
    if (steps >= budgets.maxSteps) return finish('max_turns');
    if (tracked >= budgets.maxContextTokens) return finish('max_context_len');
    if (outOfTime()) return finish('max_time');

    steps++;
    const stepStarted = new Date();
    const stepRetries: RetryRecord[] = [];
    const record: StepRecord = {
      step: steps,
      started_at: stepStarted.toISOString(),
      model_ms: 0,
      attempts: 0,
      retries: stepRetries,
      usage: null,
      finish_reason: '',
      assistant: { role: 'assistant', content: '' },
      rescued_tool_calls: false,
      tools: [],
      warnings: [],
    };

    let outcome;
    const writeRecords = recordsWriter(input.trajectory);
    try {
      outcome = await input.client.complete(
        encoder.body(messages),
        signal,
        (r) => {
          stepRetries.push(r);
          retries++;
        },
        () => setImmediate(writeRecords),
      );
    } catch (err) {
      record.model_ms = Date.now() - stepStarted.getTime();
      if (err instanceof CancelledError) {
        record.error = 'cancelled while waiting for the model';
        input.trajectory.write(record);
        return finish('cancelled');
      }
      const message = err instanceof ModelError ? err.message : `unexpected model client error: ${(err as Error).message}`;
      record.error = message;
      input.trajectory.write(record);
      return finish('llm_query_error', message);
    }
    record.model_ms = Date.now() - stepStarted.getTime();
    record.attempts = outcome.attempts;
    // A model client that never said its request had left: the records are written now.
    writeRecords();

    if (outcome.kind === 'context_length') {
      // The server refused the prompt as too long: end gracefully, the work so far still counts.
      record.error = `context length exceeded: ${outcome.message}`;
      record.finish_reason = 'context_length';
      input.trajectory.write(record);
      return finish('max_context_len');
    }

    const turn = interpretResponse(outcome.completion, LEAF_TOOLS.map((t) => t.function) as never);
    const u = outcome.completion.usage;
    if (u) {
      const cached = (u as { prompt_tokens_details?: { cached_tokens?: number } }).prompt_tokens_details?.cached_tokens;
      record.usage = {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.total_tokens,
        ...(typeof cached === 'number' ? { cached_tokens: cached } : {}),
      };
      usage.prompt_tokens += u.prompt_tokens;
      usage.completion_tokens += u.completion_tokens;
      usage.total_tokens += u.total_tokens;
      usage.cached_tokens += cached ?? 0;
      tracked = u.total_tokens;
    } else {
      tracked += estimateTokens(JSON.stringify(turn.message));
    }
    record.finish_reason = turn.finishReason;
    record.assistant = turn.message;
    record.rescued_tool_calls = turn.rescued;
    record.warnings = turn.warnings;
    for (const w of turn.warnings) warnings.add(w);
    messages.push(turn.message);
    finalAnswer = turn.message.content;

    if (turn.finishReason === 'length') {
      input.trajectory.write(record);
      return finish('max_tokens_per_turn');
    }
    if (turn.calls.length === 0) {
      input.trajectory.write(record);
      return finish('agent');
    }

    for (const [index, call] of turn.calls.entries()) {
      if (signal?.aborted) {
        input.trajectory.write(record);
        return finish('cancelled');
      }
      // One turn may hold many calls, each up to the Bash timeout: checking the budget only before
      // model calls let a turn run far past it. The rest of the turn is not run; the assistant
      // message stays as the model sent it, and no further request is made, so the history rules hold.
      if (outOfTime()) {
        record.error = `max_time: the wall-clock budget of ${budgets.maxWallSeconds} s ran out; ${turn.calls.length - index} of this turn's ${turn.calls.length} tool call(s) were not run`;
        input.trajectory.write(record);
        return finish('max_time');
      }
      const toolStarted = Date.now();
      // A Bash call may not outlast the run's budget either: its cap is cut to what is left (the
      // model sees the ordinary "Timed out after" text). The timeout itself is decided in bash-timeout.ts.
      const cap = callCapSeconds(budgets.bashTimeoutCapSeconds, budgets.maxWallSeconds - (Date.now() - started) / 1000);
      let result: ToolResult;
      try {
        result = await input.tools.tool(call.function.name, call.function.arguments, cap);
      } catch (err) {
        input.trajectory.write(record);
        if (signal?.aborted || err instanceof CancelledError) return finish('cancelled');
        // The engine lost the container: not the run's outcome but infrastructure; the job retries.
        if (err instanceof SandboxLostError) throw err;
        const message = err instanceof SandboxError ? err.message : `tool execution failed: ${(err as Error).message}`;
        return finish('tool_error', message);
      }
      const toolRecord: ToolStepRecord = {
        id: call.id,
        name: call.function.name,
        arguments: call.function.arguments,
        observation: result.observation,
        duration_ms: Date.now() - toolStarted,
      };
      toolCall(call.function.name, toolRecord.duration_ms / 1000);
      if (Object.keys(result.meta).length > 0) toolRecord.meta = result.meta;
      if (result.meta.interrupted) {
        const w = `a ${call.function.name} call killed or wedged Lilypad's toolbox in the sandbox; it was restarted and the call reported as interrupted`;
        record.warnings.push(w);
        warnings.add(w);
      }
      if (result.meta.capped) {
        const w =
          cap < budgets.bashTimeoutCapSeconds
            ? `a Bash call asked for a timeout beyond the run's remaining wall-clock budget; it ran with ${cap}s`
            : `a Bash call asked for a timeout above the cap; it ran with ${cap}s (LILYPAD_BASH_TIMEOUT_CAP_SECONDS)`;
        record.warnings.push(w);
        warnings.add(w);
      }
      record.tools.push(toolRecord);
      messages.push({ role: 'tool', tool_call_id: call.id, content: result.observation });
      tracked += estimateTokens(result.observation);
      input.onProgress?.({ step: steps, tokens: tracked, lastTool: call.function.name });
      // Going nowhere: the rest of the turn is not run and no further request is made (as at max_time).
      const repeated = watch.call(call.function.name, call.function.arguments, result.observation);
      if (repeated) {
        record.error = `stuck: ${repeated}`;
        input.trajectory.write(record);
        return finish('stuck', repeated);
      }
    }
    input.trajectory.write(record);
    input.onProgress?.({ step: steps, tokens: tracked });
    const idle = watch.step();
    if (idle) return finish('stuck', idle);
  }
}

/**
 * The previous step's record (redaction, the run recorder, the file) costs more than the rest of
 * the loop's own work in a step, so it is written while the model works on the next answer: once
 * the model client says the request has been written (in an immediate, after the I/O that is
 * waiting), else when the answer is in. Returns a function that writes at most once.
 */
function recordsWriter(trajectory: TrajectorySink): () => void {
  let written = false;
  return () => {
    if (written) return;
    written = true;
    trajectory.flush?.();
  };
}

/**
 * Builds each turn's request and its JSON text. The history only grows, so each message is
 * serialised once, when it is added, and the text of a turn is the cached prefix plus the new
 * messages: the same bytes as `JSON.stringify(requestBody(...))` (test/unit/request-encoder.test.ts
 * holds it to that) without re-encoding the whole conversation every turn.
 */
export class RequestEncoder {
  private readonly tail: Buffer;
  /** UTF-8 of the head and the messages so far; only the first `end` bytes are meaningful. */
  private bytes: Buffer;
  private end: number;
  private readonly headBytes: number;
  private encoded = 0;
  private readonly seen: Message[] = [];

  constructor(
    private readonly model: string,
    private readonly budgets: AgentBudgets,
    private readonly seed: number | undefined,
  ) {
    const probe = JSON.stringify(requestBody(model, [], budgets, seed));
    const marker = '"messages":[]';
    const at = probe.indexOf(marker) + marker.length - 1;
    const head = Buffer.from(probe.slice(0, at));
    this.tail = Buffer.from(probe.slice(at));
    this.bytes = Buffer.alloc(Math.max(64 * 1024, head.length * 2));
    head.copy(this.bytes);
    this.headBytes = this.end = head.length;
  }

  body(messages: Message[]): Record<string, unknown> {
    // Append-only is the contract; anything else (a test reusing the array) is encoded afresh.
    const n = this.encoded;
    const same = messages.length >= n && (n === 0 || (this.seen[0] === messages[0] && this.seen[n - 1] === messages[n - 1]));
    if (!same) {
      this.end = this.headBytes;
      this.encoded = 0;
      this.seen.length = 0;
    }
    for (; this.encoded < messages.length; this.encoded++) {
      const m = messages[this.encoded]!;
      // JSON.stringify escapes lone surrogates, so the pieces' UTF-8 joins into the whole's.
      const piece = (this.encoded === 0 ? '' : ',') + JSON.stringify(m);
      this.reserve(Buffer.byteLength(piece));
      this.end += this.bytes.write(piece, this.end, 'utf8');
      this.seen.push(m);
    }
    // A fresh buffer per request: the one in flight (or kept by a caller) is never written over.
    const out = Buffer.allocUnsafe(this.end + this.tail.length);
    this.bytes.copy(out, 0, 0, this.end);
    this.tail.copy(out, this.end);
    return withJsonBytes(requestBody(this.model, messages, this.budgets, this.seed), out);
  }

  private reserve(more: number): void {
    if (this.end + more <= this.bytes.length) return;
    const grown = Buffer.alloc(Math.max(this.bytes.length * 2, this.end + more));
    this.bytes.copy(grown, 0, 0, this.end);
    this.bytes = grown;
  }
}

/** The request exactly as Leaf sends it; the extra sampling fields go as top-level keys. */
export function requestBody(model: string, messages: Message[], budgets: AgentBudgets, seed: number | undefined): Record<string, unknown> {
  return {
    ...(seed !== undefined ? { seed } : {}),
    model,
    messages,
    tools: LEAF_TOOLS,
    tool_choice: 'auto',
    parallel_tool_calls: true,
    temperature: 0.6,
    max_completion_tokens: budgets.maxTokensPerTurn,
    top_p: 0.95,
    top_k: 20,
    min_p: 0,
    presence_penalty: 0,
    repetition_penalty: 1,
    chat_template_kwargs: { enable_thinking: true },
  };
}
