import type { Env } from './env.ts';

/** The run page's address under LILYPAD_PUBLIC_URL (for the pull request body and the status comment). */
export function runPageUrl(publicUrl: string, runId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/runs/${encodeURIComponent(runId)}`;
}

/** Where the web role is reached: LILYPAD_PUBLIC_URL, or this process's own address. */
export function publicUrlOf(env: Pick<Env, 'LILYPAD_PUBLIC_URL' | 'HOST' | 'PORT'>): string {
  return env.LILYPAD_PUBLIC_URL ?? `http://${env.HOST ?? 'localhost'}:${env.PORT}`;
}

/** The run page's link for comments and pull request bodies, when run pages are on (sign-in configured). */
export function runLinkFor(env: Pick<Env, 'LILYPAD_PUBLIC_URL' | 'HOST' | 'PORT' | 'GITHUB_CLIENT_ID' | 'GITHUB_CLIENT_SECRET'>, runId: string): string | undefined {
  if (!env.GITHUB_CLIENT_ID || !env.GITHUB_CLIENT_SECRET) return undefined;
  return runPageUrl(publicUrlOf(env), runId);
}
