import { getPrivateKey } from '@probot/get-private-key';
import type { Env } from '../config/env.ts';
import { GitHubApp, githubEndpoints } from '../github/app-auth.ts';
import { registrationBaseUrl, SETUP_PATH, unreachableAddress } from '../github/registration.ts';
import { createLogger } from '../observability/logger.ts';
import type { CheckResult } from './doctor.ts';

const NAME = 'github app';
const TIMEOUT_MS = 15_000;

/**
 * The GitHub App as `lilypad start` would find it: not registered yet (and whether GitHub could
 * reach the address it would be registered with), or registered, with credentials GitHub accepts
 * (GET /app as the app) and at least one installation. Without this, a wrong APP_ID, key or
 * GHE_HOST showed first as a job that never started.
 */
export async function githubAppChecks(env: Env): Promise<CheckResult[]> {
  const privateKey = getPrivateKey({ env: { PRIVATE_KEY: env.PRIVATE_KEY, PRIVATE_KEY_PATH: env.PRIVATE_KEY_PATH } });
  const apiUrl = githubEndpoints(env).apiUrl;
  if (!env.APP_ID || !privateKey) {
    const out: CheckResult[] = [
      { name: NAME, status: 'WARN', detail: 'not registered yet (APP_ID and PRIVATE_KEY are not set); `lilypad run` does not need it', fix: `run \`npm start\` and open ${registrationBaseUrl(env)}${SETUP_PATH}?token=… as its log prints it (the one-time link is new on every start)` },
    ];
    const unreachable = unreachableAddress(env);
    if (unreachable) out.push({ name: 'public address', status: 'WARN', detail: unreachable.problem, fix: unreachable.fix });
    return out;
  }
  if (!env.WEBHOOK_SECRET) {
    return [{ name: NAME, status: 'FAIL', detail: `APP_ID ${env.APP_ID} is set but WEBHOOK_SECRET is not`, fix: "set WEBHOOK_SECRET to the webhook secret in the app's settings" }];
  }
  const app = new GitHubApp({ appId: Number(env.APP_ID), privateKey, endpoints: { apiUrl }, log: createLogger({ level: 'silent' }) });
  try {
    const client = await app.probot.auth();
    const request = { signal: AbortSignal.timeout(TIMEOUT_MS) };
    const me = (await client.request('GET /app', { request })).data;
    const installations = (await client.request('GET /app/installations', { per_page: 100, request })).data;
    const detail = `${me?.slug ?? '?'} (id ${me?.id ?? env.APP_ID}) at ${apiUrl}`;
    if (installations.length === 0) {
      return [{ name: NAME, status: 'WARN', detail: `${detail} is installed nowhere`, fix: `install it on your organisation: ${me?.html_url ?? 'the app\'s page on GitHub'}/installations/new` }];
    }
    return [{ name: NAME, status: 'OK', detail: `${detail}, installed on ${installations.map((i) => (i.account && 'login' in i.account ? i.account.login : i.id)).join(', ')}` }];
  } catch (err) {
    const status = (err as { status?: number }).status;
    return [
      {
        name: NAME,
        status: 'FAIL',
        detail: `GET ${apiUrl}/app as app ${env.APP_ID} failed: ${status ? `HTTP ${status}: ` : ''}${(err as Error).message}`,
        fix:
          status === 401
            ? "APP_ID and PRIVATE_KEY do not belong together: copy both from the app's settings page (or register again)"
            : /DECODER|PEM|private key/i.test((err as Error).message)
              ? "PRIVATE_KEY (or the file PRIVATE_KEY_PATH names) is not a PEM private key: generate one in the app's settings"
              : 'check that GitHub answers at that address (GHE_HOST and GHE_PROTOCOL for GitHub Enterprise Server)',
      },
    ];
  }
}
