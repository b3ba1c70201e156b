/**
 * App credentials, JWT verification and installation-token handling, with GitHub's rules and messages.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomInt, sign as cryptoSign, verify as cryptoVerify } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import type { StandinState, TokenRec } from './state.ts';

export interface AppKeys {
  /** PKCS#1 PEM, like the keys GitHub lets you download. */
  privateKeyPem: string;
  publicKey: KeyObject;
}

export function generateAppKeys(): AppKeys {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { privateKeyPem: privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(), publicKey };
}

function b64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/** Signs an RS256 JWT (for tests that need hand-made, e.g. expired or foreign, app JWTs). */
export function signAppJwt(privateKeyPem: string, payload: Record<string, unknown>): string {
  const head = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
  const body = b64url(JSON.stringify(payload));
  const sig = cryptoSign('RSA-SHA256', Buffer.from(`${head}.${body}`), createPrivateKey(privateKeyPem));
  return `${head}.${body}.${b64url(sig)}`;
}

export type JwtCheck = { ok: true } | { ok: false; status: 401 | 404; message: string };

export const MSG_JWT_UNDECODABLE = 'A JSON web token could not be decoded';
export const MSG_EXP_INVALID =
  "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires";
export const MSG_EXP_TOO_FAR = "'Expiration time' claim ('exp') is too far in the future";
export const MSG_IAT_INVALID = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued";
export const MSG_ISS_INVALID = "'Issuer' claim ('iss') must be an Integer";

export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

/**
 * Verifies an app JWT the way GitHub does: RS256 signature by the app's key, `iss` = the app id,
 * `iat` not in the future, `exp` in the future and at most 10 minutes ahead.
 */
export function verifyAppJwt(jwt: string, publicKey: KeyObject, appId: number, nowSeconds: number, clientId: string): JwtCheck {
  const parts = jwt.split('.');
  const [h, p, s] = parts;
  if (parts.length !== 3 || h === undefined || p === undefined || s === undefined) {
    return { ok: false, status: 401, message: MSG_JWT_UNDECODABLE };
  }
  let header: unknown;
  let payload: unknown;
  try {
    header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'));
    payload = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, status: 401, message: MSG_JWT_UNDECODABLE };
  }
  if (!isRecord(header) || header.alg !== 'RS256' || !isRecord(payload)) {
    return { ok: false, status: 401, message: MSG_JWT_UNDECODABLE };
  }
  const iss = payload.iss;
  const issNumber = typeof iss === 'number' ? iss : typeof iss === 'string' && /^\d+$/.test(iss) ? Number(iss) : null;
  if (issNumber === null && iss !== clientId) return { ok: false, status: 401, message: MSG_ISS_INVALID };
  if (issNumber !== null && issNumber !== appId) return { ok: false, status: 404, message: 'Integration not found' };
  let valid = false;
  try {
    valid = cryptoVerify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, 'base64url'));
  } catch {
    valid = false;
  }
  if (!valid) return { ok: false, status: 401, message: MSG_JWT_UNDECODABLE };
  const { iat, exp } = payload;
  if (typeof iat !== 'number' || !Number.isInteger(iat) || iat > nowSeconds) return { ok: false, status: 401, message: MSG_IAT_INVALID };
  if (typeof exp !== 'number' || exp <= nowSeconds) return { ok: false, status: 401, message: MSG_EXP_INVALID };
  if (exp > nowSeconds + 600 || exp - iat > 600) return { ok: false, status: 401, message: MSG_EXP_TOO_FAR };
  return { ok: true };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** `ghs_` + 36 random alphanumerics, the format of GitHub installation access tokens. */
export function newInstallationToken(): string {
  let out = 'ghs_';
  for (let i = 0; i < 36; i++) out += ALNUM[randomInt(ALNUM.length)];
  return out;
}

export type AuthInfo =
  | { kind: 'none' }
  | { kind: 'app' }
  | { kind: 'installation'; token: TokenRec }
  | { kind: 'invalid'; status: 401 | 404; message: string };

/**
 * Reads `Authorization` (`token X`, `Bearer X`, or Basic with the token as the password) and
 * resolves it to the app (valid JWT), an installation token, or an error.
 */
export function resolveAuth(header: string | undefined, state: StandinState, publicKey: KeyObject, clientId: string): AuthInfo {
  if (!header) return { kind: 'none' };
  const m = /^(token|bearer|basic)\s+(\S+)\s*$/i.exec(header);
  if (!m || !m[1] || !m[2]) return { kind: 'invalid', status: 401, message: 'Bad credentials' };
  let credential = m[2];
  if (m[1].toLowerCase() === 'basic') {
    const decoded = Buffer.from(credential, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    credential = colon >= 0 ? decoded.slice(colon + 1) : decoded;
  }
  if (looksLikeJwt(credential)) {
    const check = verifyAppJwt(credential, publicKey, state.appId, Math.floor(Date.now() / 1000), clientId);
    return check.ok ? { kind: 'app' } : { kind: 'invalid', status: check.status, message: check.message };
  }
  const token = state.tokens.get(credential);
  if (!token || token.expiresAt.getTime() <= Date.now()) return { kind: 'invalid', status: 401, message: 'Bad credentials' };
  return { kind: 'installation', token };
}

/** Validates a key pair quickly (used at start-up so a broken key fails loudly). */
export function publicKeyFromPem(privateKeyPem: string): KeyObject {
  return createPublicKey(createPrivateKey(privateKeyPem));
}
