import { compilePathGlobs } from '../config/globs.ts';

/**
 * Nothing under `.github/` is published. Files there steer GitHub rather than the code: Actions
 * workflows and composite actions run with the repository's secrets (and pushing them needs the
 * `workflows` permission, which Lilypad never holds), CODEOWNERS decides who must review, Dependabot
 * and the issue and pull request templates change how the project is run, and `lilypad.yml`
 * configures Lilypad itself. A machine-written change to any of them is out of scope for a fix.
 */
const GITHUB_DIR = '.github/';

const GITHUB_DIR_REASON =
  'files under `.github/` (workflows, actions, CODEOWNERS, Dependabot, templates, Lilypad’s own configuration) are never published by Lilypad: ' +
  'they steer GitHub itself, and Lilypad does not hold the `workflows` permission';

export interface DroppedPath {
  path: string;
  reason: string;
}

/**
 * Decides which changed paths may not be published, and why. `exclude_paths` patterns follow
 * compilePathGlobs (gitignore-like: `*.lock` matches at any depth, a directory covers what is below
 * it, `**` spans directories). Throws a GlobError when the patterns cannot be matched in time.
 */
export function partitionPaths(paths: string[], excludePatterns: string[]): { kept: string[]; dropped: DroppedPath[] } {
  const hits = compilePathGlobs(excludePatterns).firstMatches(paths);
  const kept: string[] = [];
  const dropped: DroppedPath[] = [];
  paths.forEach((file, i) => {
    const hit = hits[i] ?? -1;
    if (file.startsWith(GITHUB_DIR)) dropped.push({ path: file, reason: GITHUB_DIR_REASON });
    else if (hit >= 0) dropped.push({ path: file, reason: `excluded by \`exclude_paths: ${excludePatterns[hit]}\` in .github/lilypad.yml` });
    else kept.push(file);
  });
  return { kept, dropped };
}
