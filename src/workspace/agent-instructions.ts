import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gitRun } from './git.ts';

/**
 * The repository's instructions for coding agents (`AGENTS.md`), read from a host git repository
 * (the mirror, bare or not) at one commit, straight from git's objects: nothing is checked out, a
 * symbolic link is never followed (an `AGENTS.md` that is a link is left out), a file that is not
 * UTF-8 text is refused, and every file and the whole are capped.
 *
 * What is read: the root `AGENTS.md`, and the `AGENTS.md` of every directory on the way to a path
 * the task names (a file or directory mentioned in the issue that exists at that commit). With the
 * repository setting `instructions: <path>`, that one file instead; `instructions: none`, nothing.
 *
 * Not read, whatever the issue names: the `AGENTS.md` of a directory that holds someone else's code
 * or data (a path with a part such as `vendor`, `third_party`, `node_modules`, `fixtures` or
 * `testdata`; see THIRD_PARTY_DIRS), or one the repository marks `linguist-vendored` in its
 * `.gitattributes` (read at the same commit, from git's objects). Such a file is written for (or
 * by) another project; the run's record lists it as skipped, with why.
 *
 * Order: root first, then deeper directories (the order a reader goes from general to specific);
 * the section says that a more specific file applies where they disagree. The caps are spent in the
 * same order, so the root file is the last to be cut.
 *
 * The caller chooses the commit: the base commit of the default branch, never a pull request's
 * head, which Lilypad itself wrote.
 */

export type InstructionsSetting = { mode: 'discover' } | { mode: 'file'; path: string } | { mode: 'off' };

/** The repository config's `instructions` value (undefined: the default, AGENTS.md discovery). */
export function instructionsSetting(value: string | undefined): InstructionsSetting {
  if (value === undefined) return { mode: 'discover' };
  if (value === 'none') return { mode: 'off' };
  return { mode: 'file', path: value.replace(/^\.\//, '') };
}

export interface InstructionsLimits {
  /** Bytes kept of one file. */
  fileBytes: number;
  /** Bytes kept of all files together. */
  totalBytes: number;
  /** A file larger than this is not read at all. */
  maxFileBytes: number;
  /** Paths taken from the task text. */
  maxNamedPaths: number;
  /** Directories (besides the root) whose AGENTS.md is looked for. */
  maxDirectories: number;
}

export const DEFAULT_INSTRUCTIONS_LIMITS: InstructionsLimits = {
  fileBytes: 8 * 1024,
  totalBytes: 16 * 1024,
  maxFileBytes: 1024 * 1024,
  maxNamedPaths: 50,
  maxDirectories: 20,
};

export interface InstructionFile {
  path: string;
  reason: 'root' | 'directory' | 'configured';
  /** For a directory's file: the paths named in the task under that directory. */
  namedBy: string[];
  /** The text given to the model (cut when over a cap). */
  text: string;
  /** The file's size. */
  bytes: number;
  /** Bytes of it left out to fit the caps. */
  cutBytes: number;
}

export interface AgentInstructions {
  commit: string;
  setting: InstructionsSetting;
  /** Root first, then by depth. */
  files: InstructionFile[];
  /** Files found but not used, and why (a symbolic link, not UTF-8 text, too large, no room left, missing). */
  skipped: Array<{ path: string; reason: string }>;
}

export class InstructionsError extends Error {
  override name = 'InstructionsError';
}

const FILE_NAME = 'AGENTS.md';
const ATTRIBUTES_FILE = '.gitattributes';

/**
 * Directory names that hold other projects' code or data, or files made for tests: an AGENTS.md
 * anywhere under one was written for (or by) someone else. Compared without regard to case.
 */
const THIRD_PARTY_DIRS: ReadonlySet<string> = new Set([
  'vendor',
  'vendors',
  'vendored',
  'third_party',
  'third-party',
  'thirdparty',
  '3rdparty',
  'node_modules',
  'bower_components',
  'fixtures',
  'fixture',
  '__fixtures__',
  'testdata',
  'test_data',
  'test-data',
]);

/** The leading part of directory `dir` that ends at a third-party directory (`src/vendor`), or null. */
export function thirdPartyDirectory(dir: string): string | null {
  const parts = dir.split('/');
  const at = parts.findIndex((part) => THIRD_PARTY_DIRS.has(part.toLowerCase()));
  return at < 0 ? null : parts.slice(0, at + 1).join('/');
}
/** Below this many bytes of room, a file is left out rather than shown as a stub. */
const MIN_USEFUL_BYTES = 256;

const URL_PATTERN = /\b[a-z][a-z0-9+.-]*:\/\/\S+/gi;
/** A link to a file or directory on a GitHub-like host: the path after /blob/<ref>/ or /tree/<ref>/. */
const LINK_PATH = /\/(?:blob|tree)\/[^/\s]+\/([^\s?#)\]>"'`]+)/;
const PATH_TOKEN = /[A-Za-z0-9_.@+~-]*(?:\/[A-Za-z0-9_.@+~-]+)+\/?|`[^`\s]+`/g;

/** Cleans one candidate: no quotes, leading ./ or /, trailing punctuation, :line or #L anchors; null if not a repository path. */
function normalisePath(raw: string): string | null {
  const p = raw
    .replace(/^`|`$/g, '')
    .replace(/[.,;:!?)\]}>'"]+$/, '')
    .replace(/(?::\d+)+$|#L\d+(?:-L?\d+)?$/, '')
    .replace(/^\.\//, '')
    .replace(/^\/+|\/+$/g, '');
  if (p === '' || p.length > 1024 || /[\x00-\x1f\\]/.test(p)) return null;
  const parts = p.split('/');
  if (parts.some((s) => s === '' || s === '.' || s === '..')) return null;
  return p;
}

/** The repository paths a task text names: path-like words (with a slash), `code spans`, and links into a repository. */
export function pathsNamedIn(text: string, max = DEFAULT_INSTRUCTIONS_LIMITS.maxNamedPaths): string[] {
  const found: string[] = [];
  for (const url of text.match(URL_PATTERN) ?? []) {
    const m = LINK_PATH.exec(url);
    if (m?.[1]) found.push(decodeURIComponentSafe(m[1]));
  }
  for (const token of text.replace(URL_PATTERN, ' ').match(PATH_TOKEN) ?? []) found.push(token);
  const out: string[] = [];
  for (const raw of found) {
    const p = normalisePath(raw);
    if (p && !out.includes(p)) out.push(p);
    if (out.length >= max) break;
  }
  return out;
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

interface Entry {
  mode: string;
  type: string;
  sha: string;
  size: number;
}

type Git = (args: string[], input?: string) => Promise<string>;

/** `git cat-file --batch-check` on `<commit>:<path>`: the type of each path that exists (no symlink is followed). */
async function objectTypes(git: Git, commit: string, paths: readonly string[]): Promise<Map<string, string>> {
  const types = new Map<string, string>();
  if (paths.length === 0) return types;
  const out = await git(['cat-file', '--batch-check=%(objecttype)'], paths.map((p) => `${commit}:${p}\n`).join(''));
  out.split('\n').slice(0, paths.length).forEach((line, i) => {
    const p = paths[i];
    if (p !== undefined && /^(blob|tree|commit)$/.test(line.trim())) types.set(p, line.trim());
  });
  return types;
}

/** The tree entry at `path` (one path per call: ls-tree with several paths also lists the contents of prefixes). */
async function treeEntry(git: Git, commit: string, p: string): Promise<Entry | null> {
  const out = await git(['--literal-pathspecs', 'ls-tree', '-z', '-l', '--full-tree', commit, '--', p]);
  for (const rec of out.split('\0')) {
    const tab = rec.indexOf('\t');
    if (tab < 0 || rec.slice(tab + 1) !== p) continue;
    const [mode, type, sha, size] = rec.slice(0, tab).split(/\s+/);
    if (mode && type && sha) return { mode, type, sha, size: size && size !== '-' ? Number(size) : 0 };
  }
  return null;
}

/** Every directory from the root down to `p` (a directory) or to `p`'s directory (a file), without the root. */
function directoryChain(p: string, isDir: boolean): string[] {
  const parts = p.split('/');
  const dirs = isDir ? parts : parts.slice(0, -1);
  return dirs.map((_, i) => dirs.slice(0, i + 1).join('/'));
}

/** The text's first `max` bytes, cut at a line end when one is near, else at a character boundary. */
function cutText(text: string, max: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= max) return text;
  let end = max;
  while (end > 0 && ((buf[end] ?? 0) & 0xc0) === 0x80) end--;
  const head = buf.subarray(0, end).toString('utf8');
  const nl = head.lastIndexOf('\n');
  return nl >= max / 2 ? head.slice(0, nl + 1) : head;
}

interface Candidate {
  path: string;
  reason: InstructionFile['reason'];
  namedBy: string[];
  /** Why this file is never read (a third-party directory), when it is not. */
  excluded?: string;
}

async function candidatesFor(git: Git, commit: string, setting: InstructionsSetting, taskText: string, limits: InstructionsLimits): Promise<Candidate[]> {
  if (setting.mode === 'off') return [];
  if (setting.mode === 'file') return [{ path: setting.path, reason: 'configured', namedBy: [] }];
  const named = pathsNamedIn(taskText, limits.maxNamedPaths);
  const types = await objectTypes(git, commit, named);
  const dirs = new Map<string, string[]>();
  for (const [p, type] of types) {
    for (const d of directoryChain(p, type === 'tree')) dirs.set(d, [...(dirs.get(d) ?? []), p]);
  }
  const sorted = [...dirs.keys()].sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b));
  // Third-party directories take none of the room for the repository's own.
  const own = sorted.filter((d) => thirdPartyDirectory(d) === null).slice(0, limits.maxDirectories);
  const foreign = sorted.filter((d) => thirdPartyDirectory(d) !== null).slice(0, limits.maxDirectories);
  const candidate = (d: string, excluded?: string): Candidate => ({ path: `${d}/${FILE_NAME}`, reason: 'directory', namedBy: dirs.get(d) ?? [], ...(excluded ? { excluded } : {}) });
  return [
    { path: FILE_NAME, reason: 'root', namedBy: [] },
    ...own.map((d) => candidate(d)),
    ...foreign.map((d) => candidate(d, `under \`${thirdPartyDirectory(d)}/\`, a vendored, third-party or fixture directory: not the repository's own instructions`)),
  ];
}

/** The tree entries at exactly these paths (one ls-tree; other entries it lists are dropped). */
async function treeEntries(git: Git, commit: string, paths: readonly string[]): Promise<Map<string, Entry>> {
  const found = new Map<string, Entry>();
  if (paths.length === 0) return found;
  const wanted = new Set(paths);
  const out = await git(['--literal-pathspecs', 'ls-tree', '-z', '-l', '--full-tree', commit, '--', ...paths]);
  for (const rec of out.split('\0')) {
    const tab = rec.indexOf('\t');
    const p = rec.slice(tab + 1);
    if (tab < 0 || !wanted.has(p)) continue;
    const [mode, type, sha, size] = rec.slice(0, tab).split(/\s+/);
    if (mode && type && sha) found.set(p, { mode, type, sha, size: size && size !== '-' ? Number(size) : 0 });
  }
  return found;
}

/**
 * Which of `paths` the repository marks `linguist-vendored` at `commit`, as git itself matches
 * .gitattributes: the root's and those of the directories on the way to each path are taken from
 * the commit (regular files only, none over the size cap) into an index of their own, outside the
 * repository, and asked with `check-attr --cached`. Nothing is checked out.
 */
async function linguistVendored(
  git: Git,
  gitWithIndex: (index: string, args: string[], input: string) => Promise<string>,
  commit: string,
  paths: readonly string[],
  maxFileBytes: number,
): Promise<Set<string>> {
  const vendored = new Set<string>();
  if (paths.length === 0) return vendored;
  const attributeFiles = new Set([ATTRIBUTES_FILE]);
  for (const p of paths) for (const d of directoryChain(p, false)) attributeFiles.add(`${d}/${ATTRIBUTES_FILE}`);
  const entries = await treeEntries(git, commit, [...attributeFiles]);
  const lines = [...entries]
    .filter(([p, e]) => e.type === 'blob' && e.mode !== '120000' && e.size <= maxFileBytes && !p.startsWith('"'))
    .map(([p, e]) => `${e.mode} ${e.sha}\t${p}\n`);
  if (lines.length === 0) return vendored;
  const index = path.join(os.tmpdir(), `lilypad-attributes-${process.pid}-${randomBytes(6).toString('hex')}`);
  try {
    await gitWithIndex(index, ['update-index', '--add', '--index-info'], lines.join(''));
    const out = await gitWithIndex(index, ['check-attr', '--cached', '-z', '--stdin', 'linguist-vendored'], paths.map((p) => `${p}\0`).join(''));
    const fields = out.split('\0');
    for (let i = 0; i + 2 < fields.length; i += 3) {
      const [p, , value] = fields.slice(i, i + 3);
      if (p !== undefined && (value === 'set' || value === 'true')) vendored.add(p);
    }
  } finally {
    await rm(index, { force: true });
    await rm(`${index}.lock`, { force: true });
  }
  return vendored;
}

/** Reads the instructions at `commit` of the repository at `gitDir` (see the top of this file). */
export async function readAgentInstructions(opts: {
  gitDir: string;
  commit: string;
  taskText: string;
  setting: InstructionsSetting;
  limits?: Partial<InstructionsLimits>;
  signal?: AbortSignal;
}): Promise<AgentInstructions> {
  const limits = { ...DEFAULT_INSTRUCTIONS_LIMITS, ...opts.limits };
  const result: AgentInstructions = { commit: opts.commit, setting: opts.setting, files: [], skipped: [] };
  if (!/^[0-9a-f]{7,64}$/i.test(opts.commit)) throw new InstructionsError(`instructions are read at a commit sha, not ${JSON.stringify(opts.commit)}`);
  const run = async (args: string[], input: string | undefined, env: NodeJS.ProcessEnv = {}): Promise<string> => {
    const res = await gitRun(['-C', opts.gitDir, ...args], { ...(input === undefined ? {} : { input }), env, timeoutMs: 60_000, signal: opts.signal });
    if (res.code !== 0) throw new InstructionsError(`git ${args[0] === '--literal-pathspecs' ? args[1] : args[0]} in ${opts.gitDir} failed: ${res.stderr.trim() || `exit code ${res.code}`}`);
    return res.stdout;
  };
  const git: Git = (args, input) => run(args, input);
  const commit = (await git(['rev-parse', '--verify', '--quiet', `${opts.commit}^{commit}`]).catch(() => '')).trim();
  if (!commit) throw new InstructionsError(`commit ${opts.commit} is not in ${opts.gitDir}; fetch it before reading the repository's instructions`);
  result.commit = commit;

  const candidates = await candidatesFor(git, commit, opts.setting, opts.taskText, limits);
  const present = await objectTypes(git, commit, candidates.map((c) => c.path));
  const directories = candidates.filter((c) => c.reason === 'directory' && !c.excluded && present.has(c.path)).map((c) => c.path);
  const vendored = await linguistVendored(git, (index, args, input) => run(args, input, { GIT_INDEX_FILE: index }), commit, directories, limits.maxFileBytes);
  let room = limits.totalBytes;
  for (const c of candidates) {
    if (!present.has(c.path)) {
      if (c.reason === 'configured') result.skipped.push({ path: c.path, reason: 'not found at this commit (the `instructions` setting names it)' });
      continue;
    }
    if (c.excluded || vendored.has(c.path)) {
      result.skipped.push({ path: c.path, reason: c.excluded ?? "marked linguist-vendored in .gitattributes: not the repository's own instructions" });
      continue;
    }
    const entry = await treeEntry(git, commit, c.path);
    const skip = (reason: string): void => void result.skipped.push({ path: c.path, reason });
    if (!entry) skip('not found at this commit');
    else if (entry.mode === '120000') skip('a symbolic link; links are not followed');
    else if (entry.type !== 'blob') skip(entry.type === 'tree' ? 'a directory, not a file' : 'a submodule, not a file');
    else if (entry.size > limits.maxFileBytes) skip(`too large to read (${entry.size} bytes; at most ${limits.maxFileBytes})`);
    else if (room < MIN_USEFUL_BYTES) skip(`left out: the ${limits.totalBytes} bytes for instructions were used up`);
    else {
      const raw = await git(['cat-file', 'blob', entry.sha]);
      // The runner decodes as UTF-8: invalid bytes came out as U+FFFD, and NUL means binary.
      if (raw.includes('\uFFFD') || raw.includes('\0')) {
        skip('not UTF-8 text');
        continue;
      }
      const text = raw.replace(/^\uFEFF/, '');
      const kept = cutText(text, Math.min(limits.fileBytes, room));
      const bytes = Buffer.byteLength(text);
      const keptBytes = Buffer.byteLength(kept);
      room -= keptBytes;
      result.files.push({ path: c.path, reason: c.reason, namedBy: c.namedBy, text: kept, bytes, cutBytes: bytes - keptBytes });
    }
  }
  return result;
}

/**
 * The section appended to the task message: a rule and a heading naming the source and the commit,
 * so the model can tell the instructions found in the repository from the issue; each file under
 * its path, root first; what was cut. Empty when there is nothing to show. It says where the text
 * was found, not who wrote it: a file in the repository may come from anyone who got a change in.
 */
export function renderInstructionsSection(instructions: AgentInstructions): string {
  const files = instructions.files.filter((f) => f.text.trim() !== '');
  if (files.length === 0) return '';
  const sha7 = instructions.commit.slice(0, 7);
  const source = files.length === 1 ? files[0]?.path ?? FILE_NAME : `${FILE_NAME} files`;
  const intro =
    files.length === 1
      ? `These instructions for coding agents were found in the repository, in \`${source}\` (read at commit ${sha7}, before any change of yours).`
      : `These instructions for coding agents were found in the repository, in ${FILE_NAME} files (read at commit ${sha7}, before any change of yours). They go from the repository root down; where they disagree, the more specific, later file applies.`;
  const parts = [`---\n\n## Repository instructions (from ${source} at ${sha7})\n\n${intro}`];
  for (const f of files) {
    const about = f.reason === 'directory' && f.namedBy.length > 0 ? ` (applies to ${f.namedBy.slice(0, 3).map((p) => `\`${p}\``).join(', ')}${f.namedBy.length > 3 ? ', …' : ''})` : '';
    const cut = f.cutBytes > 0 ? `\n\n[… ${f.cutBytes} more bytes of \`${f.path}\` left out to fit the size limit]` : '';
    parts.push(`### \`${f.path}\`${about}\n\n${f.text.replace(/\s+$/, '')}${cut}`);
  }
  return parts.join('\n\n');
}
