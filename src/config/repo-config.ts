import { z } from 'zod';

/**
 * `.github/lilypad.yml` in a repository (or in the organisation's `.github` repository as the
 * fallback). Unknown keys are errors, so a typo is reported instead of silently ignored.
 */
const command = z.string().trim().min(1, 'must be a non-empty command');

/** What is wrong with a path meant to stay inside the repository, or null. */
function repoPathProblem(p: string): string | null {
  if (p === '') return 'it is empty';
  if (p.length > 1024) return 'it is longer than 1024 characters';
  if (p.startsWith('/')) return 'it must be relative to the repository root (no leading /)';
  if (/[\x00-\x1f\\]/.test(p)) return 'it must not contain backslashes or control characters';
  if (p.replace(/^\.\//, '').split('/').some((s) => s === '' || s === '.' || s === '..')) return 'it must not contain `..`, `.` or empty parts';
  return null;
}

// `none`, or a file in the repository, relative to its root, that cannot point outside it.
const instructions = z
  .string()
  .trim()
  .superRefine((v, ctx) => {
    const problem = v === 'none' ? null : repoPathProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: `must be \`none\` or a path in the repository such as docs/AGENTS.md; ${problem}` });
  });

const repoConfigSchema = z
  .object({
    trigger_label: z.string().trim().min(1).max(50).default('lilypad'),
    image: z.string().trim().min(1).optional(),
    setup: z.union([command, z.array(command)]).optional().transform((v) => (v === undefined ? [] : Array.isArray(v) ? v : [v])),
    setup_timeout_minutes: z.number().int().positive().max(120).default(20),
    test: command.optional(),
    test_timeout_minutes: z.number().int().positive().max(240).default(30),
    max_steps: z.number().int().positive().max(1000).default(150),
    max_minutes: z.number().int().positive().max(600).default(60),
    draft: z.boolean().default(true),
    // hold: Lilypad's commits carry [skip ci] until a writer releases them (`/lilypad ci`), so CI never
    // runs unreviewed agent code with the repository's secrets. run: CI runs at once (unsafe for
    // repositories that take issues from outsiders).
    ci: z.enum(['hold', 'run']).default('hold'),
    labels: z.array(z.string().trim().min(1).max(50)).max(20).default(['lilypad', 'needs-human-review']),
    reviewers: z.array(z.string().trim().min(1).max(39)).max(15).optional(),
    exclude_paths: z.array(z.string().trim().min(1)).max(100).default([]),
    allow_bots: z.array(z.string().trim().min(1)).max(50).default([]),
    // What starts a follow-up run on Lilypad's pull request besides `/lilypad <instructions>`:
    // changes_requested: also a submitted "changes requested" review; command: only the command.
    review_trigger: z.enum(['changes_requested', 'command']).default('changes_requested'),
    // Follow-up runs on one pull request since its last full run from the issue; then Lilypad says
    // so and stops (a review bot that requests changes on every push would loop for ever).
    max_followups: z.number().int().min(0).max(1000).default(10),
    // Best of k: k agent runs in parallel sandboxes, the tests (then agreement, then size) choose.
    // Capped by the administrator's LILYPAD_MAX_ATTEMPTS.
    attempts: z.number().int().min(1).max(10).default(1),
    // always: every change is published as a draft with its evidence. verified: only a change whose
    // evidence is verified (a test fails without it and passes with it, nothing broken or weakened);
    // otherwise the status comment says what was tried and a writer can still `/lilypad publish` it.
    publish: z.enum(['always', 'verified']).default('always'),
    // Before the fix attempts, one run writes a test that fails because of the issue (and does not
    // fix it); kept only if it fails on the base code for the issue's reason. It costs one more
    // agent run; the fix attempts are judged by it and it goes with the pull request.
    reproduce: z.boolean().default(false),
    // An attempt going nowhere ends early as `stuck`, its work kept (0 turns a rule off): the same
    // tool call with the same observation this many times, or this many steps in a row that change
    // no file and run no new command. Nothing is ever said to the model about it.
    stuck_repeats: z.number().int().min(0).max(100).default(4),
    stuck_idle_steps: z.number().int().min(0).max(1000).default(40),
    // Instructions for coding agents added to the task, read at the base commit (never the pull
    // request's head): unset, the root AGENTS.md and those of the directories the issue names;
    // a path, that file instead; none, nothing.
    instructions: instructions.optional(),
    // A failing CI check on Lilypad's pull request (after CI was released): command: only
    // `/lilypad fix-ci` by a writer starts a fix; auto: Lilypad starts one by itself; off: neither.
    ci_fix: z.enum(['auto', 'command', 'off']).default('command'),
    // Automatic CI fixes per pull request (ci_fix: auto); none after a person pushed to its branch,
    // and none for a check that fails the same way as before the last fix.
    ci_fix_attempts: z.number().int().min(1).max(10).default(2),
    // The commit status contexts whose failures count as this repository's CI (a status names no
    // branch, so any app or person allowed to post one on the commit could speak for CI): none by
    // default; check runs of CI apps on the pull request's own branch always count.
    ci_status_contexts: z
      .array(z.string().trim().min(1).max(255), { error: 'must be a list of commit status contexts, such as [ci/jenkins]' })
      .max(50)
      .default([]),
  })
  .strict();

export type RepoConfig = z.infer<typeof repoConfigSchema>;

/** `keys`: the settings the file set itself (the rest are defaults, or for setup and test, inferred). */
export type RepoConfigResult = { ok: true; config: RepoConfig; source: string | null; keys: string[] } | { ok: false; problems: string[]; source: string | null };

/** Validates a parsed config file; `raw` null means no file (all defaults). */
export function parseRepoConfig(raw: unknown, source: string | null): RepoConfigResult {
  if (raw === null || raw === undefined) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    return { ok: false, problems: ['the file must be a YAML mapping of settings (key: value)'], source };
  }
  const result = repoConfigSchema.safeParse(raw);
  if (result.success) return { ok: true, config: result.data, source, keys: Object.keys(raw ?? {}) };
  const problems = result.error.issues.map((issue) => {
    const where = issue.path.length > 0 ? issue.path.join('.') : '(top level)';
    if (issue.code === 'unrecognized_keys') {
      return `unknown setting${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `\`${k}\``).join(', ')}; the known settings are ${Object.keys(repoConfigSchema.shape).join(', ')}`;
    }
    return `\`${where}\`: ${issue.message}`;
  });
  return { ok: false, problems, source };
}
