import { z } from 'zod';

/**
 * The replies of Lilypad's toolbox (src/sandbox/toolbox.py), reaper (reaper.py) and identity probe
 * (identity-probe.py), as schemas: bytes from inside the sandbox are parsed here and nowhere else.
 */
const id = z.number().int().min(0);

/** The toolbox about itself: `uid`, `gid` and `groups` are what it acts as (effective). */
export const helloSchema = z.object({
  identity_error: z.string().nullable(),
  uid: id,
  gid: id,
  groups: z.array(id),
  real_uid: id,
  saved_uid: id,
  /** Every capability it still holds (permitted, effective, inheritable, ambient); -1: unreadable. */
  capabilities: z.number().int().min(-1),
  pid: z.number().int().positive(),
  python: z.string(),
  repo: z.string(),
  nondumpable: z.boolean(),
});

/** Who the agent is to the engine, and which python3 may be run as uid 0 (read as the agent). */
export const identityProbeSchema = z.object({
  uid: id,
  gid: id,
  groups: z.array(id),
  home: z.string().nullable(),
  python: z.string().startsWith('/'),
  version: z.tuple([z.number().int(), z.number().int()]),
  writable: z.array(z.string()),
});

const toolReplyMetaSchema = z
  .object({
    timed_out: z.boolean().optional(),
    error: z.boolean().optional(),
    unknown: z.boolean().optional(),
  })
  .strict();

/**
 * What the host knows about a tool call: the toolbox's own flags, and the ones only the host can
 * set (the Bash timeout it decided, whether the cap cut it, whether the toolbox had to be replaced).
 */
export type ToolMeta = z.infer<typeof toolReplyMetaSchema> & { capped?: boolean; timeout?: number; interrupted?: boolean };

export const toolReplySchema = z.object({
  observation: z.string(),
  meta: toolReplyMetaSchema,
  elapsed: z.number().min(0),
});

export const execReplySchema = z.object({
  exit_code: z.number().int().nullable(),
  timed_out: z.boolean(),
  elapsed: z.number().min(0),
  stdout: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'base64'),
  stdout_bytes: z.number().int().min(0),
  stderr: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'base64'),
  stderr_bytes: z.number().int().min(0),
});

export const reaperReplySchema = z.object({
  killed: z.number().int().min(0),
  left: z.number().int().min(0),
  uid: z.number().int().min(0),
});
