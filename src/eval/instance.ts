import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';

/**
 * One evaluation instance: SWE-bench's fields plus how to run the repository's tests.
 * SWE-bench's published datasets carry FAIL_TO_PASS and PASS_TO_PASS as JSON-encoded strings;
 * both that and a plain array are accepted.
 */
const TEST_IDS = 'must be a list of test ids (an array, or a JSON string holding one)';
const testIdList = z.union(
  [
  z.array(z.string().min(1)),
  z.string().transform((text, ctx) => {
    try {
      const parsed = z.array(z.string().min(1)).safeParse(JSON.parse(text));
      if (parsed.success) return parsed.data;
    } catch {
      /* reported below */
    }
    ctx.addIssue({ code: 'custom', message: TEST_IDS });
    return z.NEVER;
  }),
  ],
  { error: TEST_IDS },
);

export const instanceSchema = z
  .object({
    instance_id: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'letters, digits, ".", "_" and "-" only (it names a directory)'),
    repo: z.string().min(1, 'a local path, a git URL, or owner/name on the configured GitHub host'),
    base_commit: z.string().regex(/^[0-9a-f]{7,40}$/, 'must be a commit hash (7 to 40 hex digits)'),
    problem_statement: z.string().min(1, 'the issue text the model sees; it must not be empty'),
    patch: z.string().default(''),
    test_patch: z.string().default(''),
    FAIL_TO_PASS: testIdList,
    PASS_TO_PASS: testIdList.default([]),
    test_command: z.string().min(1, 'the command that runs the tests, e.g. "python3 -m pytest" (test ids are appended)'),
    image: z.string().min(1).optional(),
    setup: z.union([z.string().min(1).transform((s) => [s]), z.array(z.string().min(1))]).default([]),
    /** Which output to parse; guessed from test_command when absent. */
    test_framework: z.enum(['pytest', 'unittest', 'node']).optional(),
  })
  // SWE-bench's other fields (hints_text, created_at, version, …) are kept but not used.
  .loose()
  .superRefine((inst, ctx) => {
    if (inst.FAIL_TO_PASS.length === 0) ctx.addIssue({ code: 'custom', path: ['FAIL_TO_PASS'], message: 'must name at least one test that the fix makes pass' });
  });

export type EvalInstance = z.infer<typeof instanceSchema>;

export interface InstanceProblem {
  line: number;
  instance_id?: string;
  message: string;
}

export interface LoadedInstances {
  instances: EvalInstance[];
  problems: InstanceProblem[];
}

/** Reads a JSONL instance file: every valid line is kept, every bad one reported with its line number and what to fix. */
export async function loadInstances(file: string): Promise<LoadedInstances> {
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new Error(`cannot read --instances ${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`);
  });
  return parseInstances(text);
}

export function parseInstances(text: string): LoadedInstances {
  const instances: EvalInstance[] = [];
  const problems: InstanceProblem[] = [];
  const seen = new Map<string, number>();
  for (const [i, raw] of text.split('\n').entries()) {
    const line = i + 1;
    if (raw.trim() === '') continue;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (err) {
      problems.push({ line, message: `not valid JSON (${(err as Error).message})` });
      continue;
    }
    const id = typeof (json as { instance_id?: unknown })?.instance_id === 'string' ? (json as { instance_id: string }).instance_id : undefined;
    const parsed = instanceSchema.safeParse(json);
    if (!parsed.success) {
      const what = parsed.error.issues
        .map((issue) => `${issue.path.join('.') || '(line)'}: ${/received undefined/.test(issue.message) ? 'missing' : issue.message}`)
        .join('; ');
      problems.push({ line, ...(id ? { instance_id: id } : {}), message: what });
      continue;
    }
    const first = seen.get(parsed.data.instance_id);
    if (first !== undefined) {
      problems.push({ line, instance_id: parsed.data.instance_id, message: `instance_id repeats line ${first}; each instance needs its own id` });
      continue;
    }
    seen.set(parsed.data.instance_id, line);
    instances.push(parsed.data);
  }
  return { instances, problems };
}

/** Identifies an instance's content: --resume reuses work only for an unchanged instance. */
export function instanceFingerprint(inst: EvalInstance): string {
  const keys = ['instance_id', 'repo', 'base_commit', 'problem_statement', 'test_patch', 'FAIL_TO_PASS', 'PASS_TO_PASS', 'test_command', 'image', 'setup', 'test_framework'] as const;
  const picked = keys.map((k) => [k, inst[k] ?? null]);
  return createHash('sha256').update(JSON.stringify(picked)).digest('hex').slice(0, 16);
}
