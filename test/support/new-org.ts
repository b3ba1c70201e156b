/**
 * A new organisation for the first-hour tests: the GitHub stand-in with `acme/calc` (add()
 * subtracts) and its maintainer @alice, a scripted model that fixes it, and the browser's part
 * of GitHub's manifest flow (open the setup link Lilypad printed, post the manifest to the stand-in,
 * follow the redirect back to Lilypad's callback with the page's cookie).
 */
import assert from 'node:assert/strict';
import { CALC_REPO } from './fixture-repo.ts';
import { titleOf } from './app-harness.ts';
import { startGitHubStandin, type GitHubStandin } from './github-standin/index.ts';
import { startModelServer, type ModelServer } from './model-server.ts';

export const OWNER = 'acme';

const fix = (title: string) => [
  { toolCalls: [{ name: 'Read', arguments: { file_path: 'calc.py' } }] },
  { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
  { content: `Fixed ${title}.` },
];

export async function startNewOrg(): Promise<{ gh: GitHubStandin; model: ModelServer }> {
  const gh = await startGitHubStandin({ appSlug: 'lilypad' });
  const model = await startModelServer({
    script: ({ body }) => {
      const turn = body.messages.filter((m) => m.role === 'assistant').length;
      return fix(titleOf(body))[turn] ?? { content: 'done' };
    },
  });
  gh.createInstallation({ login: OWNER, type: 'Organization' });
  gh.createUser('alice');
  gh.createRepo(OWNER, 'calc', { files: CALC_REPO });
  gh.addCollaborator(OWNER, 'calc', 'alice', 'maintain');
  return { gh, model };
}

export function unescapeHtml(s: string): string {
  return s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

export interface Registered {
  /** The setup page's HTML. */
  page: string;
  manifest: Record<string, unknown> & { hook_attributes: { url: string } };
  /** The page Lilypad shows after GitHub's conversion. */
  donePage: string;
}

/**
 * The setup link Lilypad prints to its log when it starts without credentials
 * (`<public url>/setup?token=...`), or undefined while it has not printed it yet.
 */
export function setupLinkIn(output: string): string | undefined {
  return /(https?:\/\/[^\s"\\]+\/setup\?token=[0-9a-f]{64})/.exec(output)?.[1];
}

/**
 * What a person does in the browser: open the setup link Lilypad printed (the page sets a cookie),
 * press Register, confirm on GitHub, come back to the callback with that cookie.
 */
export async function registerThroughBrowser(gh: GitHubStandin, link: string): Promise<Registered> {
  const base = new URL(link).origin;
  const opened = await fetch(link);
  const page = await opened.text();
  assert.equal(opened.status, 200, page);
  const cookie = (opened.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const action = unescapeHtml(/<form action="([^"]+)"/.exec(page)?.[1] ?? '');
  const manifestJson = unescapeHtml(/name="manifest" value="([^"]+)"/.exec(page)?.[1] ?? '');
  assert.match(action, new RegExp(`^${gh.origin}/settings/apps/new\\?state=[0-9a-f]+$`));
  const manifest = JSON.parse(manifestJson) as Registered['manifest'];
  const created = await fetch(action, { method: 'POST', body: new URLSearchParams({ manifest: manifestJson }), redirect: 'manual' });
  assert.equal(created.status, 302);
  const callback = created.headers.get('location')!;
  assert.ok(callback.startsWith(`${base}/setup/callback?code=`), callback);
  const done = await fetch(callback, { headers: { cookie } });
  const donePage = await done.text();
  assert.equal(done.status, 200, donePage);
  return { page, manifest, donePage };
}
