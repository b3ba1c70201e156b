import { createHash } from 'node:crypto';

/**
 * Best of k: which of k attempts at one issue to deliver. Pure (no I/O), shared by `lilypad eval
 * --select` and the app's `attempts: k`.
 *
 * 1. Tests after: when some attempts' tests passed after their change, only those compete.
 * 2. Agreement: attempts whose patches are the same change after normalisation form a cluster;
 *    the largest cluster wins (independent samples that agree are more likely right).
 * 3. Smallest diff: among tied clusters, and within the winning cluster, the fewest changed lines
 *    (then the fewest bytes, then the earliest attempt).
 * Attempts without a patch never win; when no attempt has one, there is no winner.
 */
export interface Candidate {
  /** The attempt's index (0-based, as the caller numbers them). */
  index: number;
  /** The unified diff against the base commit; empty or null when the attempt changed nothing. */
  patch: string | null;
  /** Did the repository's tests pass after the change? null: not run or unknown. */
  testsPassed: boolean | null;
}

export type SelectionStep = 'only_candidate' | 'tests' | 'agreement' | 'smallest_diff';

export interface AttemptVerdict {
  index: number;
  eligible: boolean;
  /** Why it was left out, or which cluster it joined. */
  note: string;
  cluster: number | null;
  changedLines: number;
}

export interface Selection {
  /** The winning attempt's index, or null when no attempt produced a patch. */
  winner: number | null;
  /** The rule that decided (the first one that told the finalists apart). */
  decidedBy: SelectionStep | null;
  /** Clusters of eligible attempts (attempt indexes), largest first. */
  clusters: number[][];
  attempts: AttemptVerdict[];
  /** One sentence for a report or a pull request body. */
  summary: string;
}

interface FileChange {
  path: string;
  removed: string[];
  added: string[];
}

/**
 * The change a diff makes, without what does not matter to it: `index` lines, hunk positions and
 * context, trailing whitespace, blank added or removed lines, and the order of files.
 */
export function normalisePatch(patch: string): string {
  const files: FileChange[] = [];
  let current: FileChange | null = null;
  for (const raw of patch.replace(/\r\n/g, '\n').split('\n')) {
    const header = /^diff --git a\/(.*?) b\/(.*)$/.exec(raw);
    if (header) {
      current = { path: header[2]!, removed: [], added: [] };
      files.push(current);
      continue;
    }
    if (!current) continue;
    if (raw.startsWith('+++') || raw.startsWith('---') || raw.startsWith('@@') || raw.startsWith('index ')) continue;
    if (/^(new|deleted) file mode|^(old|new) mode|^similarity|^rename |^Binary files|^GIT binary patch/.test(raw)) {
      current.added.push(`#${raw.trim()}`);
      continue;
    }
    const line = raw.slice(1).replace(/\s+$/, '');
    if (raw.startsWith('+') && line !== '') current.added.push(line);
    else if (raw.startsWith('-') && line !== '') current.removed.push(line);
  }
  return files
    .filter((f) => f.added.length + f.removed.length > 0)
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    .map((f) => `${f.path}\n-${f.removed.join('\n-')}\n+${f.added.join('\n+')}`)
    .join('\n');
}

/** Added plus removed lines (headers excluded). */
export function changedLines(patch: string): number {
  let n = 0;
  for (const line of patch.split('\n')) {
    if ((line.startsWith('+') && !line.startsWith('+++')) || (line.startsWith('-') && !line.startsWith('---'))) n++;
  }
  return n;
}

const hasPatch = (c: Candidate): c is Candidate & { patch: string } => c.patch !== null && c.patch.trim() !== '';

export function selectAttempt(candidates: readonly Candidate[]): Selection {
  const verdicts = new Map<number, AttemptVerdict>();
  for (const c of candidates) {
    verdicts.set(c.index, { index: c.index, eligible: false, note: 'no patch', cluster: null, changedLines: hasPatch(c) ? changedLines(c.patch) : 0 });
  }
  const withPatch = candidates.filter(hasPatch);
  const passing = withPatch.filter((c) => c.testsPassed === true);
  const pool = passing.length > 0 ? passing : withPatch;
  for (const c of withPatch) {
    if (!pool.includes(c)) verdicts.get(c.index)!.note = c.testsPassed === false ? 'tests failed after its change, while others passed' : 'tests not known to pass, while others passed';
  }
  const size = (c: Candidate & { patch: string }) => [changedLines(c.patch), Buffer.byteLength(c.patch), c.index] as const;
  const smaller = (a: Candidate & { patch: string }, b: Candidate & { patch: string }) => {
    const [x, y] = [size(a), size(b)];
    for (let i = 0; i < 3; i++) if (x[i]! !== y[i]!) return x[i]! - y[i]!;
    return 0;
  };

  const byKey = new Map<string, Array<Candidate & { patch: string }>>();
  for (const c of pool) {
    const key = createHash('sha256').update(normalisePatch(c.patch)).digest('hex');
    const list = byKey.get(key) ?? [];
    list.push(c);
    byKey.set(key, list);
  }
  // Largest cluster first; ties by their smallest member.
  const clusters = [...byKey.values()].map((members) => members.sort(smaller)).sort((a, b) => b.length - a.length || smaller(a[0]!, b[0]!));
  clusters.forEach((members, i) => {
    for (const m of members) {
      const v = verdicts.get(m.index)!;
      v.eligible = true;
      v.cluster = i;
      v.note = members.length > 1 ? `agrees with ${members.length - 1} other attempt(s)` : 'a change no other attempt made';
    }
  });

  const clusterIndexes = clusters.map((members) => members.map((m) => m.index));
  const attempts = candidates.map((c) => verdicts.get(c.index)!);
  if (clusters.length === 0) {
    return { winner: null, decidedBy: null, clusters: [], attempts, summary: `none of the ${candidates.length} attempt(s) produced a patch` };
  }
  const best = clusters[0]!;
  const winner = best[0]!;
  let decidedBy: SelectionStep;
  if (withPatch.length === 1) decidedBy = 'only_candidate';
  else if (passing.length === 1) decidedBy = 'tests';
  else if (best.length > 1 && (clusters.length === 1 || best.length > clusters[1]!.length)) decidedBy = 'agreement';
  else decidedBy = 'smallest_diff';
  const why: Record<SelectionStep, string> = {
    only_candidate: 'the only attempt with a patch',
    tests: 'the only attempt whose tests passed after its change',
    agreement: `${best.length} of ${pool.length} ${passing.length > 0 ? 'passing ' : ''}attempts made the same change`,
    smallest_diff: `the smallest diff (${changedLines(winner.patch)} changed lines) among equally supported ${passing.length > 0 ? 'passing ' : ''}changes`,
  };
  return { winner: winner.index, decidedBy, clusters: clusterIndexes, attempts, summary: `attempt ${winner.index + 1} of ${candidates.length}: ${why[decidedBy]}` };
}
