import type { InstallationClient } from './client.ts';
import { parseRepoConfig, type RepoConfigResult } from '../config/repo-config.ts';

export const CONFIG_PATH = '.github/lilypad.yml';

/**
 * Reads `.github/lilypad.yml` from the repository, falling back to the organisation's `.github`
 * repository (and following `_extends`), as Probot's `context.config` does; then validates it.
 */
export async function loadRepoConfig(octokit: InstallationClient, owner: string, repo: string): Promise<RepoConfigResult> {
  let files: Array<{ owner: string; repo: string; path: string; config: unknown }>;
  try {
    ({ files } = (await octokit.config.get({ owner, repo, path: CONFIG_PATH })) as unknown as { files: typeof files });
  } catch (err) {
    const message = (err as Error).message.replace(/^\[@probot\/octokit-plugin-config\]\s*/, '');
    if ((err as { status?: number }).status !== undefined) throw err;
    return { ok: false, problems: [`the file could not be read as YAML: ${message}`], source: CONFIG_PATH };
  }
  const found = files.find((f) => f.config !== null && f.config !== undefined);
  const source = found ? (found.owner === owner && found.repo === repo ? found.path : `${found.owner}/${found.repo}:${found.path}`) : null;
  // Later files in the list are the ones extended; the first found wins over them.
  const merged = Object.assign({}, ...files.map((f) => f.config).reverse().filter(Boolean)) as Record<string, unknown>;
  return parseRepoConfig(found ? merged : null, source);
}
