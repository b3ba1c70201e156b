import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

/**
 * The output directory of `lilypad eval run`, and the schemas of the files read back from it
 * (--resume): a file that does not match is treated as missing and its work is done again.
 *
 *   predictions.jsonl, run-report.json, report.md, report.html, validation.json
 *   runs/<endpoint>/attempt-<n>/<instance_id>/   result.json, trajectory.jsonl, patch.diff (the agent, as `lilypad run` writes them),
 *                                                agent.json (after the agent), report.json (SWE-bench), test_output.txt, attempt.json (done)
 *   gold/<instance_id>/                          report.json, test_output.txt, attempt.json (--validate)
 */
export const bucketSchema = z.object({ success: z.array(z.string()), failure: z.array(z.string()) });

export const judgeReportSchema = z.object({
  patch_is_None: z.boolean(),
  patch_exists: z.boolean(),
  patch_successfully_applied: z.boolean(),
  resolved: z.boolean(),
  tests_status: z.object({ FAIL_TO_PASS: bucketSchema, PASS_TO_PASS: bucketSchema, FAIL_TO_FAIL: bucketSchema, PASS_TO_FAIL: bucketSchema }),
});

/** SWE-bench's report.json: one key, the instance id. */
export const instanceReportFileSchema = z.record(z.string(), judgeReportSchema);

export const agentRecordSchema = z.object({
  fingerprint: z.string(),
  instance_id: z.string(),
  endpoint: z.string(),
  attempt: z.number().int().nonnegative(),
  model: z.string().nullable(),
  exit_reason: z.string(),
  error: z.string().optional(),
  prompt_tokens: z.number().nonnegative(),
  completion_tokens: z.number().nonnegative(),
  model_seconds: z.number().nonnegative(),
  agent_ms: z.number().nonnegative(),
  steps: z.number().int().nonnegative(),
  tests_after_passed: z.boolean().nullable(),
  /** Lilypad's evidence for the attempt's change, as the app computes it (absent in records of older runs). */
  evidence: z.object({ verdict: z.enum(['verified', 'unverified', 'failing']), broken: z.number().int(), weakened: z.number().int() }).nullable().optional(),
  /** With --reproduce: whether the reproduction run's test was kept (null: no reproduction run). */
  reproduction_kept: z.boolean().nullable().optional(),
  patch_bytes: z.number().int().nonnegative(),
  /** Lilypad could not run the attempt (Docker, the model server, git): run again on --resume. */
  infra_error: z.boolean(),
});
export type AgentRecord = z.infer<typeof agentRecordSchema>;

export const attemptRecordSchema = agentRecordSchema.extend({
  resolved: z.boolean(),
  judge_ms: z.number().nonnegative(),
  judge_error: z.string().optional(),
  apply_error: z.string().optional(),
  test_command: z.string().nullable(),
  cost: z.number().nullable(),
});
export type AttemptRecord = z.infer<typeof attemptRecordSchema>;

export const goldRecordSchema = z.object({
  fingerprint: z.string(),
  instance_id: z.string(),
  valid: z.boolean(),
  problems: z.array(z.string()),
  gold: judgeReportSchema,
  without_patch: judgeReportSchema.nullable(),
});
export type GoldRecord = z.infer<typeof goldRecordSchema>;

export const predictionSchema = z.object({ instance_id: z.string(), model_name_or_path: z.string(), model_patch: z.string().nullable() });

export class EvalStore {
  constructor(readonly root: string) {}

  attemptDir(endpoint: string, attempt: number, instanceId: string): string {
    return path.join(this.root, 'runs', endpoint, `attempt-${attempt + 1}`, instanceId);
  }

  goldDir(instanceId: string): string {
    return path.join(this.root, 'gold', instanceId);
  }

  /** True when an earlier run left results here (used to refuse mixing runs without --resume). */
  hasResults(): boolean {
    return existsSync(path.join(this.root, 'runs')) || existsSync(path.join(this.root, 'gold'));
  }
}

export async function readJson<T>(file: string, schema: z.ZodType<T>): Promise<T | null> {
  try {
    const parsed = schema.safeParse(JSON.parse(await readFile(file, 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Written through a temporary file and a rename: a reader (or a Ctrl-C) never sees half a file. */
export async function writeJson(file: string, value: unknown): Promise<void> {
  await writeText(file, `${JSON.stringify(value, null, 2)}\n`);
}

export async function writeText(file: string, text: string | Buffer): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, file);
}
