/** Glob patterns as used in .github/lilypad.yml `exclude_paths`: `**` spans directories, `*` does not. */
export function globToRegExp(pattern: string): RegExp {
  let p = pattern.trim().replace(/^\.?\//, '');
  if (p.endsWith('/')) p += '**';
  let re = '';
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    if (c === '*') {
      if (p[i + 1] === '*') {
        i++;
        if (p[i + 1] === '/') {
          i++;
          re += '(?:.*/)?';
        } else re += '.*';
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  // A pattern naming a directory also covers everything below it.
  return new RegExp(`^${re}(?:/.*)?$`);
}

export const WORKFLOWS_DIR = '.github/workflows/';

export interface DroppedPath {
  path: string;
  reason: string;
}

/** Decides which changed paths may not be published, and why. */
export function partitionPaths(paths: string[], excludePatterns: string[]): { kept: string[]; dropped: DroppedPath[] } {
  const excludes = excludePatterns.map((p) => ({ p, re: globToRegExp(p) }));
  const kept: string[] = [];
  const dropped: DroppedPath[] = [];
  for (const file of paths) {
    if (file.startsWith(WORKFLOWS_DIR)) {
      dropped.push({ path: file, reason: 'changes to GitHub Actions workflows are never published (Lilypad does not hold the `workflows` permission)' });
      continue;
    }
    const hit = excludes.find((e) => e.re.test(file));
    if (hit) dropped.push({ path: file, reason: `excluded by \`exclude_paths: ${hit.p}\` in .github/lilypad.yml` });
    else kept.push(file);
  }
  return { kept, dropped };
}
