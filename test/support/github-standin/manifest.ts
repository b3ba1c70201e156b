/**
 * GitHub's app manifest flow as GitHub Enterprise Server serves it:
 * - `POST /settings/apps/new?state=S` and `POST /organizations/{org}/settings/apps/new?state=S`
 *   (a form field `manifest` holding JSON; a person would confirm the name on GitHub's page first)
 *   redirect to the manifest's `redirect_url` with `?code=C&state=S`;
 * - `POST /api/v3/app-manifests/{code}/conversions` (no authentication; the code is single-use and
 *   valid for an hour) answers 201 with the app, its `pem`, `webhook_secret`, `client_id` and
 *   `client_secret`.
 * The stand-in has one app; "creating" it from a manifest records the manifest and hands out that
 * app's real credentials, so the registered app then works against the stand-in like any other.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DOCS_ROOT, type StandinState } from './state.ts';

export interface RegisteredManifest {
  /** The manifest as posted (parsed JSON). */
  manifest: Record<string, unknown>;
  /** The organisation whose settings page received it, or null for a user-owned app. */
  org: string | null;
  code: string;
  converted: boolean;
}

interface Secrets {
  privateKeyPem: string;
  webhookSecret: string;
  clientSecret: string;
}

const CODE_TTL_MS = 3600_000;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 1024 * 1024) {
        reject(new Error('manifest body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(data.length) }).end(data);
}

export function createManifestFlow(state: StandinState, secrets: Secrets) {
  const registered: RegisteredManifest[] = [];
  const issued = new Map<string, { entry: RegisteredManifest; expiresAt: number }>();

  async function handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
    const form = /^(?:\/organizations\/([^/]+))?\/settings\/apps\/new$/.exec(url.pathname);
    if (form && req.method === 'POST') {
      const params = new URLSearchParams(await readBody(req));
      let manifest: Record<string, unknown>;
      try {
        manifest = JSON.parse(params.get('manifest') ?? '') as Record<string, unknown>;
      } catch {
        res.writeHead(422, { 'content-type': 'text/html; charset=utf-8' }).end('<h1>Invalid GitHub App configuration</h1><p>The manifest is not valid JSON.</p>');
        return true;
      }
      const redirect = typeof manifest['redirect_url'] === 'string' ? manifest['redirect_url'] : '';
      const hook = manifest['hook_attributes'] as { url?: unknown } | undefined;
      if (!/^https?:\/\//.test(redirect) || typeof hook?.url !== 'string' || typeof manifest['url'] !== 'string') {
        res.writeHead(422, { 'content-type': 'text/html; charset=utf-8' }).end('<h1>Invalid GitHub App configuration</h1><p>url, hook_attributes.url and redirect_url are required.</p>');
        return true;
      }
      const code = randomBytes(10).toString('hex');
      const entry: RegisteredManifest = { manifest, org: form[1] ? decodeURIComponent(form[1]) : null, code, converted: false };
      registered.push(entry);
      issued.set(code, { entry, expiresAt: Date.now() + CODE_TTL_MS });
      const target = new URL(redirect);
      target.searchParams.set('code', code);
      if (url.searchParams.get('state') !== null) target.searchParams.set('state', url.searchParams.get('state')!);
      res.writeHead(302, { location: target.toString() }).end();
      return true;
    }
    const conv = /^\/api\/v3\/app-manifests\/([^/]+)\/conversions$/.exec(url.pathname);
    if (conv && req.method === 'POST') {
      await readBody(req);
      const code = decodeURIComponent(conv[1]!);
      const hit = issued.get(code);
      issued.delete(code);
      if (!hit || hit.expiresAt < Date.now()) {
        json(res, 404, { message: 'Not Found', documentation_url: `${DOCS_ROOT}/rest/apps/apps#create-a-github-app-from-a-manifest`, status: '404' });
        return true;
      }
      hit.entry.converted = true;
      const app = state.app();
      // GitHub makes the organisation whose settings page received the manifest the app's owner.
      const owner = hit.entry.org ? state.user(state.ensureUser(hit.entry.org, 'Organization')) : app.owner;
      json(res, 201, {
        ...app,
        owner,
        name: typeof hit.entry.manifest['name'] === 'string' ? hit.entry.manifest['name'] : app.name,
        client_secret: secrets.clientSecret,
        webhook_secret: secrets.webhookSecret,
        pem: secrets.privateKeyPem,
      });
      return true;
    }
    return false;
  }

  return { handle, registered };
}
