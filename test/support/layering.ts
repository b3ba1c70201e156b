import path from 'node:path';

/**
 * The data flow of src/, top to bottom. A folder may import from its own level only without a
 * cycle, and from any level below it; never from a level above. A new folder must be placed here.
 */
export const FLOW: readonly (readonly string[])[] = [
  ['cli'],
  ['eval', 'web'],
  ['pipeline'],
  ['workspace', 'sandbox', 'agent', 'github', 'evidence'],
  ['store', 'config', 'observability', 'test-results', 'inference'],
  ['shared'],
];

const FLOW_TEXT = FLOW.map((level) => (level.length > 1 ? `{${level.join(', ')}}` : level[0])).join(' → ');
const levelOf = new Map(FLOW.flatMap((level, i) => level.map((folder) => [folder, i] as const)));

export interface FolderImport {
  /** The importing file, relative to the repository (src/github/webhooks.ts). */
  file: string;
  line: number;
  specifier: string;
  from: string;
  to: string;
}

// `import … from '…'`, `export … from '…'`, `import '…'` and `import('…')`, over several lines too.
const IMPORT = /(?:\b(?:import|export)\b[^'"`;]*?\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])([^'"]+)\1/g;

/** The imports of one file under src/ that leave its top folder. */
export function crossFolderImports(file: string, text: string): FolderImport[] {
  const from = topFolder(file);
  const found: FolderImport[] = [];
  const code = stripComments(text);
  for (const m of code.matchAll(IMPORT)) {
    const specifier = m[2]!;
    if (!specifier.startsWith('.')) continue;
    const to = topFolder(path.posix.join(path.posix.dirname(file), specifier));
    if (to !== from) found.push({ file, line: code.slice(0, m.index).split('\n').length, specifier, from, to });
  }
  return found;
}

/** Every import against the flow, every folder the flow does not place, and every cycle of folders; in words. */
export function layeringProblems(files: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  const edges = new Map<string, FolderImport>();
  for (const [file, text] of files) {
    const folder = topFolder(file);
    if (!levelOf.has(folder)) {
      problems.push(`${file} is in ${folder === '' ? 'src/ itself' : `src/${folder}/`}, which the data flow does not place: move it into a folder of the flow, or add the folder to FLOW in test/support/layering.ts`);
      continue;
    }
    for (const imp of crossFolderImports(file, text)) {
      const target = levelOf.get(imp.to);
      if (target === undefined) continue; // reported for the target's own files
      if (target < levelOf.get(imp.from)!) {
        problems.push(`${imp.file}:${imp.line} imports '${imp.specifier}': ${imp.from}/ may not import from ${imp.to}/, which is above it in the data flow (${FLOW_TEXT}); move what both need down to a lower folder`);
      }
      const edge = `${imp.from} ${imp.to}`;
      if (!edges.has(edge)) edges.set(edge, imp);
    }
  }
  for (const cycle of folderCycles(edges)) {
    const where = cycle.map((imp) => `${imp.file}:${imp.line}`).join(', ');
    problems.push(`folders import each other in a cycle: ${[...cycle.map((imp) => imp.from), cycle[0]!.from].join(' → ')} (${where}); one direction has to go`);
  }
  return problems;
}

function topFolder(file: string): string {
  const parts = path.posix.normalize(file).split('/');
  return parts[0] === 'src' && parts.length > 2 ? parts[1]! : '';
}

/** Comments may name paths (`see ../pipeline/x.ts`); only code counts. Lines stay where they were. */
function stripComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' ')).replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

/** One cycle per strongly connected group of folders, as the imports that close it. */
function folderCycles(edges: ReadonlyMap<string, FolderImport>): FolderImport[][] {
  const next = new Map<string, string[]>();
  for (const key of edges.keys()) {
    const [a, b] = key.split(' ') as [string, string];
    next.set(a, [...(next.get(a) ?? []), b]);
  }
  const cycles: FolderImport[][] = [];
  const done = new Set<string>();
  for (const start of [...next.keys()].sort()) {
    if (done.has(start)) continue;
    const pathTo = findPath(next, start, start);
    if (pathTo) {
      cycles.push(pathTo.map((folder, i) => edges.get(`${folder} ${pathTo[(i + 1) % pathTo.length]}`)!));
      for (const f of pathTo) done.add(f);
    }
  }
  return cycles;
}

/** A path of folders from `from` back to `to` (breadth first), without repeating `to` at the end. */
function findPath(next: ReadonlyMap<string, string[]>, from: string, to: string): string[] | null {
  const seen = new Map<string, string>();
  const queue = [from];
  while (queue.length > 0) {
    const at = queue.shift()!;
    for (const n of next.get(at) ?? []) {
      if (n === to) {
        const route = [at];
        while (route[0] !== from) route.unshift(seen.get(route[0]!)!);
        return route;
      }
      if (!seen.has(n) && n !== from) {
        seen.set(n, at);
        queue.push(n);
      }
    }
  }
  return null;
}
