import { brotliCompressSync, brotliDecompressSync, constants as zlibConstants, deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { keys } from '../store/keys.ts';
import type { Logger } from './logger.ts';
import type { SecretScanner } from './secrets.ts';

/**
 * Run records in Redis, so that a web role on any machine can show any worker's run.
 *
 * Per run (all keys expire after LILYPAD_RUN_RETENTION_DAYS):
 * - `<prefix>:run:<id>:summary`  JSON: who, what, outcome, steps, tokens (the /runs list reads these)
 * - `<prefix>:run:<id>:live`     a stream of events while the run goes on (raw-deflated JSON each);
 *                                the run page folds them, and follows the stream for server-sent events
 * - `<prefix>:run:<id>:record`   the whole run once finished, brotli-compressed JSON
 * and `<prefix>:runs`, a sorted set of run ids by start time.
 *
 * Everything is redacted before it is written. Each run is held to a size cap: past it, reasoning
 * and observations are cut (with a marker that says so), never silently.
 */

// ------------------------------------------------------------------ schemas (what is read back)

const usageSchema = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
  cached_tokens: z.number().optional(),
});

const stepRecordSchema = z.object({
  step: z.number().int(),
  started_at: z.string(),
  model_ms: z.number(),
  attempts: z.number().int(),
  retries: z.array(z.object({ attempt: z.number(), error: z.string(), status: z.number().optional(), waitMs: z.number(), at: z.string() })),
  usage: usageSchema.nullable(),
  finish_reason: z.string(),
  assistant: z.object({
    role: z.literal('assistant'),
    content: z.string(),
    reasoning_content: z.string().optional(),
    tool_calls: z.array(z.object({ id: z.string(), type: z.literal('function'), function: z.object({ name: z.string(), arguments: z.string() }) })).optional(),
  }),
  rescued_tool_calls: z.boolean(),
  tools: z.array(
    z.object({ id: z.string(), name: z.string(), arguments: z.string(), observation: z.string(), duration_ms: z.number(), meta: z.record(z.string(), z.unknown()).optional() }),
  ),
  warnings: z.array(z.string()),
  error: z.string().optional(),
});
/** One agent step as the trajectory writes it (agent/trajectory.ts's StepRecord fits this shape). */
export type RecordedStep = z.input<typeof stepRecordSchema>;

const testOutcomeSchema = z.object({
  command: z.string(),
  outcome: z.enum(['passed', 'failed', 'timed_out', 'error']),
  exitCode: z.number().nullable(),
  durationMs: z.number(),
  counts: z.object({ passed: z.number().optional(), failed: z.number().optional(), skipped: z.number().optional(), errors: z.number().optional() }).nullable(),
  outputTail: z.string(),
  perTest: z.union([z.object({ parsed: z.literal(true), format: z.string(), passed: z.number(), failed: z.number(), skipped: z.number(), error: z.number() }), z.object({ parsed: z.literal(false), reason: z.string() })]).optional(),
  /** On the run after the change: what changed per test since the run before it (names capped). */
  changes: z.object({ fixed: z.array(z.string()), broken: z.array(z.string()), stillFailing: z.number(), passing: z.number(), fallback: z.string().nullable() }).optional(),
});
type StoredTestOutcome = z.infer<typeof testOutcomeSchema>;

export const RUN_OUTCOMES = ['pull_request', 'patch', 'withheld', 'no_change', 'stale', 'cancelled', 'failed'] as const;
type RunOutcome = (typeof RUN_OUTCOMES)[number];

const runSummarySchema = z.object({
  v: z.literal(1),
  runId: z.string(),
  jobId: z.string(),
  owner: z.string(),
  repo: z.string(),
  repoId: z.number().int(),
  issueNumber: z.number().int(),
  triggeredBy: z.string(),
  attempt: z.number().int(),
  workerId: z.string(),
  startedAt: z.string(),
  updatedAt: z.string(),
  finishedAt: z.string().nullable(),
  outcome: z.enum(RUN_OUTCOMES).nullable(),
  exitReason: z.string().nullable(),
  steps: z.number().int(),
  promptTokens: z.number(),
  completionTokens: z.number(),
  cachedTokens: z.number(),
  pr: z.object({ number: z.number().int(), url: z.string() }).nullable(),
});
export type RunSummary = z.infer<typeof runSummarySchema>;

const configValue: z.ZodType<unknown> = z.lazy(() => z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(configValue), z.record(z.string(), configValue)]));

/** Everything an event can carry; a run is the fold of its events. */
const runEventSchema = z.discriminatedUnion('t', [
  z.object({ t: z.literal('task'), system: z.string(), user: z.string() }),
  z.object({ t: z.literal('config'), config: z.record(z.string(), configValue) }),
  z.object({ t: z.literal('phase'), name: z.string(), ms: z.number() }),
  z.object({ t: z.literal('step'), record: stepRecordSchema }),
  z.object({ t: z.literal('tests'), which: z.enum(['before', 'after']), outcome: testOutcomeSchema }),
  z.object({ t: z.literal('tests_not_run'), which: z.enum(['before', 'after']), why: z.string() }),
  z.object({ t: z.literal('warning'), text: z.string() }),
  z.object({ t: z.literal('note'), text: z.string() }),
  z.object({ t: z.literal('done') }),
]);
type RunEvent = z.infer<typeof runEventSchema>;

const runViewSchema = z.object({
  summary: runSummarySchema,
  task: z.object({ system: z.string(), user: z.string() }).nullable(),
  config: z.record(z.string(), configValue).nullable(),
  phases: z.array(z.object({ name: z.string(), ms: z.number() })),
  steps: z.array(stepRecordSchema),
  /** `notRun`: why a run of the tests did not happen, where that is known (the tests after an empty change). */
  tests: z.object({ before: testOutcomeSchema.nullable(), after: testOutcomeSchema.nullable(), notRun: z.object({ before: z.string().optional(), after: z.string().optional() }).optional() }),
  warnings: z.array(z.string()),
  /** Things the store itself did to the record (cuts for the size cap). */
  notes: z.array(z.string()),
  finish: z.object({ why: z.string().nullable(), error: z.string().nullable(), diff: z.string().nullable() }).nullable(),
});
/** A run as the pages show it: live (folded from events) or finished (the stored record). */
export type RunView = z.infer<typeof runViewSchema>;

export interface LoadedRun {
  view: RunView;
  live: boolean;
  /** The last live event folded into `view` (resume point for server-sent events); '0' if none. */
  lastEventId: string;
}

// ------------------------------------------------------------------ encoding

const encodeEvent = (e: RunEvent): Buffer => deflateRawSync(Buffer.from(JSON.stringify(e)));
const decodeEvent = (b: Buffer): RunEvent => runEventSchema.parse(JSON.parse(inflateRawSync(b).toString('utf8')));
const encodeRecord = (v: RunView): Buffer =>
  brotliCompressSync(Buffer.from(JSON.stringify(v)), { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 5, [zlibConstants.BROTLI_PARAM_MODE]: zlibConstants.BROTLI_MODE_TEXT } });
const decodeRecord = (b: Buffer): RunView => runViewSchema.parse(JSON.parse(brotliDecompressSync(b).toString('utf8')));

/** The fold: what the page shows after these events. */
export function applyEvent(view: RunView, e: RunEvent): void {
  switch (e.t) {
    case 'task':
      view.task = { system: e.system, user: e.user };
      return;
    case 'config':
      view.config = e.config;
      return;
    case 'phase':
      view.phases.push({ name: e.name, ms: e.ms });
      return;
    case 'step':
      view.steps.push(e.record);
      return;
    case 'tests':
      view.tests[e.which] = e.outcome;
      return;
    case 'tests_not_run':
      view.tests.notRun = { ...view.tests.notRun, [e.which]: e.why };
      return;
    case 'warning':
      if (!view.warnings.includes(e.text)) view.warnings.push(e.text);
      return;
    case 'note':
      view.notes.push(e.text);
      return;
    case 'done':
      return;
  }
}

function emptyView(summary: RunSummary): RunView {
  return { summary, task: null, config: null, phases: [], steps: [], tests: { before: null, after: null }, warnings: [], notes: [], finish: null };
}

// ------------------------------------------------------------------ size cap

const CUT_MARK = (kept: number, total: number) =>
  `\n[… cut by Lilypad's run store: ${total - kept} of ${total} characters dropped to keep this run under LILYPAD_RUN_MAX_MB; the worker's trajectory.jsonl has them all]`;

function cut(text: string, max: number): string {
  return text.length <= max ? text : text.slice(0, max) + CUT_MARK(max, text.length);
}

/** A copy of the step with its long texts cut to `max` characters each. */
function slimStep(r: RecordedStep, max: number): z.infer<typeof stepRecordSchema> {
  const parsed = stepRecordSchema.parse(r);
  return {
    ...parsed,
    assistant: {
      ...parsed.assistant,
      content: cut(parsed.assistant.content, max),
      ...(parsed.assistant.reasoning_content !== undefined ? { reasoning_content: cut(parsed.assistant.reasoning_content, max) } : {}),
    },
    tools: parsed.tools.map((t) => ({ ...t, arguments: cut(t.arguments, max), observation: cut(t.observation, max) })),
  };
}

// ------------------------------------------------------------------ the store

interface RunStoreOptions {
  prefix: string;
  retentionDays: number;
  /** Compressed bytes one run may take in Redis. */
  maxBytes: number;
}

export interface RunInit {
  runId: string;
  jobId: string;
  owner: string;
  repo: string;
  repoId: number;
  issueNumber: number;
  triggeredBy: string;
  attempt: number;
  workerId: string;
}

export interface RunFinish {
  outcome: RunOutcome;
  exitReason?: string | null | undefined;
  /** Why, in words (no change, stale trigger, failure and what to do). */
  why?: string | null | undefined;
  error?: string | null | undefined;
  diff?: Buffer | string | null | undefined;
  pr?: { number: number; url: string } | null | undefined;
}

/** Test outcome as the pipeline has it (src/test-results/test-outcome.ts). */
type TestOutcomeInput = StoredTestOutcome;

/** A live run stops following after this much quiet (the page then offers a reload). */
const FOLLOW_IDLE_MS = 15_000;

export class RunStore {
  constructor(
    readonly redis: Redis,
    readonly opts: RunStoreOptions,
  ) {}

  key(runId: string, part: 'summary' | 'live' | 'record'): string {
    return keys.run(this.opts.prefix, runId, part);
  }

  get indexKey(): string {
    return keys.runIndex(this.opts.prefix);
  }

  get ttlSeconds(): number {
    return Math.round(this.opts.retentionDays * 86_400);
  }

  /** Starts recording a run (call once per attempt, when its run id is known). */
  recorder(init: RunInit, scanner: SecretScanner, log?: Logger): RunRecorder {
    return new RunRecorder(this, init, scanner, log);
  }

  async summary(runId: string): Promise<RunSummary | null> {
    const raw = await this.redis.get(this.key(runId, 'summary'));
    return raw === null ? null : parseSummary(raw, runId);
  }

  /** The run as the page shows it; null when unknown or expired. Throws when what Redis holds is not a run. */
  async load(runId: string): Promise<LoadedRun | null> {
    const summary = await this.summary(runId);
    if (!summary) return null;
    if (summary.finishedAt !== null) {
      const packed = await this.redis.getBuffer(this.key(runId, 'record'));
      if (packed) return { view: decodeRecord(packed), live: false, lastEventId: '0' };
    }
    const view = emptyView(summary);
    let lastEventId = '0';
    for (const [id, fields] of await this.redis.xrangeBuffer(this.key(runId, 'live'), '-', '+')) {
      const data = fieldValue(fields, 'z');
      if (data) applyEvent(view, decodeEvent(data));
      lastEventId = id.toString();
    }
    return { view, live: summary.finishedAt === null, lastEventId };
  }

  /** The most recent runs first (at most `limit`), skipping expired ones. */
  async list(limit = 500): Promise<RunSummary[]> {
    await this.redis.zremrangebyscore(this.indexKey, '-inf', Date.now() - this.ttlSeconds * 1000);
    const ids = await this.redis.zrevrange(this.indexKey, 0, limit - 1);
    if (ids.length === 0) return [];
    const raws = await this.redis.mget(ids.map((id) => this.key(id, 'summary')));
    const out: RunSummary[] = [];
    raws.forEach((raw, i) => {
      if (raw !== null) out.push(parseSummary(raw, ids[i]!));
    });
    return out;
  }

  /**
   * The run's events after `afterId`, as they are written (one Redis connection of its own, blocked
   * in XREAD). Yields `null` after FOLLOW_IDLE_MS of quiet (a heartbeat for the caller); ends after
   * the `done` event or when `signal` aborts.
   */
  async *follow(runId: string, afterId: string, signal: AbortSignal): AsyncGenerator<{ id: string; event: RunEvent } | null> {
    const conn = this.redis.duplicate();
    const stop = () => conn.disconnect();
    signal.addEventListener('abort', stop, { once: true });
    let last = afterId;
    try {
      while (!signal.aborted) {
        const res = await conn.xreadBuffer('COUNT', 100, 'BLOCK', FOLLOW_IDLE_MS, 'STREAMS', this.key(runId, 'live'), last).catch((err: Error) => {
          if (signal.aborted) return null;
          throw err;
        });
        if (signal.aborted) return;
        if (!res) {
          yield null;
          continue;
        }
        for (const [, entries] of res) {
          for (const [id, fields] of entries) {
            last = id.toString();
            const data = fieldValue(fields, 'z');
            if (!data) continue;
            const event = decodeEvent(data);
            yield { id: last, event };
            if (event.t === 'done') return;
          }
        }
      }
    } finally {
      signal.removeEventListener('abort', stop);
      conn.disconnect();
    }
  }
}

function parseSummary(raw: string, runId: string): RunSummary {
  const parsed = runSummarySchema.safeParse(JSON.parse(raw));
  if (!parsed.success) throw new Error(`the stored summary of run ${runId} is not in the expected shape (${parsed.error.issues[0]?.message ?? 'invalid'}); was it written by another Lilypad version?`);
  return parsed.data;
}

function fieldValue(fields: Buffer[], name: string): Buffer | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i]!.toString() === name) return fields[i + 1];
  return undefined;
}

// ------------------------------------------------------------------ the recorder

/** Long texts are cut to this once a run has used its size cap for live events. */
const SLIM_CHARS = 2000;

/**
 * Live events go to Redis together, at most this long after the first of them. One transaction
 * per event cost an agent step a Redis round trip (and the CPU of two processes) between a model
 * answer and the next request; a run page still sees each step within this delay.
 */
const LIVE_BATCH_MS = 100;

/**
 * Writes one run. Every method returns at once and never throws: writes go to Redis in order, in
 * the background, and a failing Redis costs the run page, not the job (the first failure is
 * logged). `finish()` waits for everything to be written.
 */
export class RunRecorder {
  private readonly view: RunView;
  private chain: Promise<void> = Promise.resolve();
  private liveBytes = 0;
  private slim = false;
  private failed = false;
  private finished = false;
  /** Encoded live events not yet handed to the write chain (see LIVE_BATCH_MS). */
  private live: Buffer[] = [];
  private liveTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: RunStore,
    init: RunInit,
    private readonly scanner: SecretScanner,
    private readonly log?: Logger,
  ) {
    const now = new Date().toISOString();
    this.view = emptyView({
      v: 1,
      ...init,
      startedAt: now,
      updatedAt: now,
      finishedAt: null,
      outcome: null,
      exitReason: null,
      steps: 0,
      promptTokens: 0,
      completionTokens: 0,
      cachedTokens: 0,
      pr: null,
    });
    const s = this.view.summary;
    this.enqueue(async (r) => {
      await r
        .multi()
        .set(this.store.key(s.runId, 'summary'), JSON.stringify(s), 'EX', this.store.ttlSeconds)
        .zadd(this.store.indexKey, Date.parse(s.startedAt), s.runId)
        .exec();
    });
  }

  get runId(): string {
    return this.view.summary.runId;
  }

  /** The two messages the model starts from, exactly as the agent loop sends them (the caller builds them). */
  task(messages: { system: string; user: string }): void {
    this.event({ t: 'task', system: messages.system, user: messages.user });
  }

  /** The settings the run used (repository config, budgets, model, image): JSON values only. */
  config(config: Record<string, unknown>): void {
    this.event({ t: 'config', config: JSON.parse(JSON.stringify(config)) as Record<string, unknown> });
  }

  phase(name: string, ms: number): void {
    this.event({ t: 'phase', name, ms });
  }

  /** One step of the agent (pass this as the trajectory's tee). */
  step(record: RecordedStep): void {
    const s = this.view.summary;
    s.steps = Math.max(s.steps, record.step);
    s.promptTokens += record.usage?.prompt_tokens ?? 0;
    s.completionTokens += record.usage?.completion_tokens ?? 0;
    s.cachedTokens += record.usage?.cached_tokens ?? 0;
    // The loop built the record (typed); parsing it again cost a step more than writing it.
    this.event({ t: 'step', record: this.slim ? slimStep(record, SLIM_CHARS) : (record as z.output<typeof stepRecordSchema>) }, true);
  }

  /** A run of the tests, or why it did not happen (`notRun`, when the outcome is null). */
  tests(which: 'before' | 'after', outcome: TestOutcomeInput | null, notRun?: string | null): void {
    if (outcome) this.event({ t: 'tests', which, outcome: testOutcomeSchema.parse(outcome) });
    else if (notRun) this.event({ t: 'tests_not_run', which, why: notRun });
  }

  warning(text: string): void {
    this.event({ t: 'warning', text });
  }

  /** Writes the whole run (compressed, within the cap), marks it finished and ends live followers. */
  async finish(result: RunFinish): Promise<void> {
    if (this.finished) return this.chain;
    this.finished = true;
    const s = this.view.summary;
    const now = new Date().toISOString();
    s.finishedAt = now;
    s.updatedAt = now;
    s.outcome = result.outcome;
    s.exitReason = result.exitReason ?? null;
    s.pr = result.pr ?? null;
    const diff = result.diff == null ? null : typeof result.diff === 'string' ? result.diff : result.diff.toString('utf8');
    this.drainLive();
    this.view.finish = {
      why: result.why ? this.scanner.redact(result.why) : null,
      error: result.error ? this.scanner.redact(result.error) : null,
      diff: diff === null ? null : this.scanner.redact(diff),
    };
    const packed = this.packWithinCap();
    this.enqueue(async (r) => {
      const live = this.store.key(s.runId, 'live');
      await r
        .multi()
        .set(this.store.key(s.runId, 'record'), packed, 'EX', this.store.ttlSeconds)
        .set(this.store.key(s.runId, 'summary'), JSON.stringify(s), 'EX', this.store.ttlSeconds)
        .xadd(live, '*', 'z', encodeEvent({ t: 'done' }))
        // Followers read `done` within moments; the events are in the record now.
        .expire(live, 600)
        .exec();
    });
    await this.chain;
  }

  /** Resolves when everything recorded so far is in Redis. */
  flush(): Promise<void> {
    this.drainLive();
    return this.chain;
  }

  private event(e: RunEvent, isStep = false): void {
    if (this.finished) return;
    const clean = this.scanner.redactDeepIfNeeded(e);
    applyEvent(this.view, clean);
    const s = this.view.summary;
    s.updatedAt = new Date().toISOString();
    const data = encodeEvent(clean);
    this.liveBytes += data.length;
    if (!this.slim && this.liveBytes > this.store.opts.maxBytes / 2) {
      // Half the cap goes to live events; after that, steps keep their shape but not their bulk.
      this.slim = true;
      this.enqueueEvent({ t: 'note', text: `from step ${s.steps + (isStep ? 0 : 1)} on, reasoning and observations are cut to ${SLIM_CHARS} characters each while the run is live (size cap)` });
    }
    this.sendLive(data);
  }

  private enqueueEvent(e: RunEvent): void {
    applyEvent(this.view, e);
    this.sendLive(encodeEvent(e));
  }

  private sendLive(data: Buffer): void {
    this.live.push(data);
    this.liveTimer ??= setTimeout(() => this.drainLive(), LIVE_BATCH_MS);
  }

  /** Hands the waiting live events, in order, and the summary to the write chain as one transaction. */
  private drainLive(): void {
    if (this.liveTimer) clearTimeout(this.liveTimer);
    this.liveTimer = undefined;
    if (this.live.length === 0) return;
    const batch = this.live;
    this.live = [];
    const s = this.view.summary;
    this.enqueue(async (r) => {
      const live = this.store.key(s.runId, 'live');
      const tx = r.multi();
      for (const data of batch) tx.xadd(live, '*', 'z', data);
      await tx.expire(live, this.store.ttlSeconds).set(this.store.key(s.runId, 'summary'), JSON.stringify(s), 'EX', this.store.ttlSeconds).exec();
    });
  }

  /** The final record, compressed; long texts are cut step by step until it fits the cap. */
  private packWithinCap(): Buffer {
    const max = this.store.opts.maxBytes;
    let packed = encodeRecord(this.view);
    for (const chars of [16_000, 4000, 1000, 200]) {
      if (packed.length <= max) return packed;
      const view: RunView = { ...this.view, steps: this.view.steps.map((st) => slimStep(st, chars)), notes: [...this.view.notes, `reasoning, arguments and observations are cut to ${chars} characters each to keep this run under LILYPAD_RUN_MAX_MB`] };
      packed = encodeRecord(view);
    }
    if (packed.length <= max) return packed;
    const finish = this.view.finish;
    const bare: RunView = {
      ...this.view,
      steps: this.view.steps.map((st) => slimStep(st, 200)),
      finish: finish ? { ...finish, diff: finish.diff === null ? null : cut(finish.diff, Math.floor(max / 2)) } : null,
      notes: [...this.view.notes, 'the diff and every long text are cut to keep this run under LILYPAD_RUN_MAX_MB'],
    };
    return encodeRecord(bare);
  }

  private enqueue(write: (redis: Redis) => Promise<unknown>): void {
    this.chain = this.chain.then(async () => {
      try {
        await write(this.store.redis);
      } catch (err) {
        if (!this.failed) this.log?.warn({ err: (err as Error).message, runId: this.runId }, 'could not record the run in Redis; its run page will be incomplete');
        this.failed = true;
      }
    });
  }
}

/** The store with LILYPAD_QUEUE_PREFIX, LILYPAD_RUN_RETENTION_DAYS and LILYPAD_RUN_MAX_MB. */
export function runStoreFromEnv(redis: Redis, env: { LILYPAD_QUEUE_PREFIX: string; LILYPAD_RUN_RETENTION_DAYS: number; LILYPAD_RUN_MAX_MB: number }): RunStore {
  return new RunStore(redis, { prefix: env.LILYPAD_QUEUE_PREFIX, retentionDays: env.LILYPAD_RUN_RETENTION_DAYS, maxBytes: Math.round(env.LILYPAD_RUN_MAX_MB * 1024 * 1024) });
}
