/**
 * Git smart HTTP (`/{owner}/{repo}.git/info/refs`, `git-upload-pack`, `git-receive-pack`), served by
 * `git http-backend` as a CGI, behind GitHub's rules for installation tokens:
 *
 * - credentials: HTTP Basic with the installation token as the password (GitHub ignores the user
 *   name; `x-access-token` is the documented one), either from git's credential prompt/URL or from
 *   `http.extraHeader=Authorization: Basic …`;
 * - none, bad or expired credentials where they are needed: 401 with `WWW-Authenticate: Basic realm="GitHub"`;
 * - a valid token that cannot see the (private) repository: 404 `Repository not found.`;
 * - pushing without `contents: write`: 403 `Write access to repository not granted.`; pushing to a
 *   visible (public) repository outside the token's scope: 403 `Permission to o/r.git denied to …`.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import type { IncomingMessage, ServerResponse } from 'node:http';
import path from 'node:path';
import { gitEnv } from './git-repo.ts';
import { isoNow, levelAllows } from './state.ts';
import type { StandinState, TokenRec } from './state.ts';

const GIT_PATH = /^\/([^/]+)\/([^/]+?)(?:\.git)?\/(info\/refs|git-upload-pack|git-receive-pack)$/;
const LOOKS_LIKE_GIT = /^\/[^/]+\/[^/]+\.git(\/|$)/;

export interface GitHttpResult {
  status: number;
  token: string | null;
}

export function isGitPath(pathname: string): boolean {
  return GIT_PATH.test(pathname) || LOOKS_LIKE_GIT.test(pathname);
}

function plain(res: ServerResponse, status: number, text: string, extra: Record<string, string> = {}): number {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...extra });
  res.end(text);
  return status;
}

function basicToken(header: string | undefined): { present: boolean; password: string | null } {
  if (!header) return { present: false, password: null };
  const m = /^basic\s+(\S+)\s*$/i.exec(header);
  if (!m || !m[1]) return { present: true, password: null };
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return { present: true, password: colon >= 0 ? decoded.slice(colon + 1) : null };
}

export function handleGit(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  state: StandinState,
  children: Set<ChildProcess>,
): Promise<GitHttpResult> {
  const challenge = { 'www-authenticate': 'Basic realm="GitHub"' };
  const m = GIT_PATH.exec(url.pathname);
  if (!m || !m[1] || !m[2] || !m[3]) return Promise.resolve({ status: plain(res, 404, 'Not Found\n'), token: null });
  const [, owner, name, action] = m;
  const service = action === 'info/refs' ? url.searchParams.get('service') : action;
  if (service !== 'git-upload-pack' && service !== 'git-receive-pack') {
    return Promise.resolve({ status: plain(res, 403, 'Please upgrade your git client.\nThis server does not support git over dumb-http.\n'), token: null });
  }
  const write = service === 'git-receive-pack';
  const repo = state.findRepo(owner, name);
  const cred = basicToken(req.headers.authorization);
  let token: TokenRec | null = null;
  if (cred.present) {
    const t = cred.password ? state.tokens.get(cred.password) : undefined;
    if (!t || t.expiresAt.getTime() <= Date.now()) {
      return Promise.resolve({ status: plain(res, 401, 'Invalid username or token.\n', challenge), token: cred.password });
    }
    token = t;
  }
  const tokenText = token?.token ?? null;
  if (!token) {
    if (!repo || repo.private || write) return Promise.resolve({ status: plain(res, 401, 'Authentication required.\n', challenge), token: null });
  } else {
    if (!repo) return Promise.resolve({ status: plain(res, 404, 'Repository not found.\n'), token: tokenText });
    const scoped = repo.owner === token.installation.account && (token.repositoryIds === null || token.repositoryIds.includes(repo.id));
    const contents = token.permissions.contents;
    if (!scoped || !levelAllows(contents, 'read')) {
      if (repo.private) return Promise.resolve({ status: plain(res, 404, 'Repository not found.\n'), token: tokenText });
      if (write) {
        return Promise.resolve({
          status: plain(res, 403, `Permission to ${repo.owner.login}/${repo.name}.git denied to ${state.botUser.login}.\n`),
          token: tokenText,
        });
      }
    } else if (write && !levelAllows(contents, 'write')) {
      return Promise.resolve({ status: plain(res, 403, 'Write access to repository not granted.\n'), token: tokenText });
    }
  }
  if (!repo) return Promise.resolve({ status: plain(res, 404, 'Repository not found.\n'), token: tokenText });

  const rel = path.relative(state.gitRoot, repo.gitDir).split(path.sep).join('/');
  const env = gitEnv({
    GIT_PROJECT_ROOT: state.gitRoot,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: `/${rel}/${action}`,
    QUERY_STRING: url.search.replace(/^\?/, ''),
    REQUEST_METHOD: req.method ?? 'GET',
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    REMOTE_USER: token ? state.botUser.login : '',
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
    GATEWAY_INTERFACE: 'CGI/1.1',
  });
  if (req.headers['content-length']) env.CONTENT_LENGTH = req.headers['content-length'];
  const encoding = req.headers['content-encoding'];
  if (encoding) env.HTTP_CONTENT_ENCODING = encoding;
  const proto = req.headers['git-protocol'];
  if (typeof proto === 'string') env.HTTP_GIT_PROTOCOL = proto;

  return new Promise<GitHttpResult>((resolve) => {
    const child = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(child);
    let status = 200;
    let headerBuf: Buffer | null = Buffer.alloc(0);
    let stderr = '';
    let settled = false;
    const finish = (code: number): void => {
      if (settled) return;
      settled = true;
      children.delete(child);
      if (write && code < 400) repo.pushedAt = isoNow();
      resolve({ status: code, token: tokenText });
    };
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString('utf8');
    });
    child.stdout.on('data', (chunk: Buffer) => {
      if (headerBuf === null) {
        res.write(chunk);
        return;
      }
      headerBuf = Buffer.concat([headerBuf, chunk]);
      let end = headerBuf.indexOf('\r\n\r\n');
      let sepLen = 4;
      if (end < 0) {
        end = headerBuf.indexOf('\n\n');
        sepLen = 2;
      }
      if (end < 0) return;
      const head = headerBuf.subarray(0, end).toString('latin1');
      const rest = headerBuf.subarray(end + sepLen);
      headerBuf = null;
      const headers: Record<string, string> = {};
      for (const line of head.split(/\r?\n/)) {
        const colon = line.indexOf(':');
        if (colon <= 0) continue;
        const key = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (key.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 500;
        else headers[key] = value;
      }
      res.writeHead(status, headers);
      if (rest.length) res.write(rest);
    });
    child.on('error', (err) => {
      if (!res.headersSent) plain(res, 500, `git http-backend failed: ${err.message}\n`);
      else res.destroy();
      finish(500);
    });
    child.on('close', (code) => {
      if (headerBuf !== null) {
        // No CGI header block: a failure before any output.
        status = 500;
        if (!res.headersSent) plain(res, 500, `git http-backend exited with ${String(code)}: ${stderr}\n`);
      } else {
        res.end();
      }
      finish(status);
    });
    child.stdin.on('error', () => {
      /* the backend may close stdin early (e.g. on a bad request); the close handler answers */
    });
    req.pipe(child.stdin);
    req.on('aborted', () => child.kill('SIGKILL'));
  });
}
