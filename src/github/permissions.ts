import type { GitHubClient } from './client.ts';

const WRITE_ROLES = new Set(['admin', 'maintain', 'write']);

/** True when `login` may trigger or cancel work: write, maintain or admin on the repository. */
export async function hasWriteAccess(client: GitHubClient, owner: string, repo: string, login: string): Promise<boolean> {
  try {
    const res = await client.request('GET /repos/{owner}/{repo}/collaborators/{username}/permission', { owner, repo, username: login });
    const data = res.data as { permission?: string; role_name?: string };
    // `permission` folds maintain into write; `role_name` keeps it. Accept either.
    return WRITE_ROLES.has(data.permission ?? '') || WRITE_ROLES.has(data.role_name ?? '');
  } catch (err) {
    if ((err as { status?: number }).status === 404) return false;
    throw err;
  }
}
