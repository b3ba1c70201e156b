/**
 * The secrets in a URL (a Redis URL's password, above all) and the URL as Lilypad prints it. Here,
 * below every folder, so that the configuration's own messages can use it too; the scanner of
 * observability/secrets.ts is given urlSecretValues' values to redact and refuse.
 */
const URL_PARTS = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)/i;

function decodeSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * The secrets a URL carries, for a SecretScanner to hold: the password of its userinfo
 * (`redis://:password@host`, `redis://user:password@host`) and of a `password` query parameter
 * (ioredis takes both), each as written and as decoded. A user name alone is not one.
 */
export function urlSecretValues(url: string | undefined): string[] {
  const found: string[] = [];
  const authority = url ? URL_PARTS.exec(url)?.[2] : undefined;
  if (!url || authority === undefined) return found;
  const at = authority.lastIndexOf('@');
  const colon = authority.indexOf(':');
  if (at >= 0 && colon >= 0 && colon < at) found.push(authority.slice(colon + 1, at));
  for (const m of url.matchAll(/[?&]password=([^&#]*)/g)) found.push(m[1] ?? '');
  return [...new Set(found.flatMap((v) => [v, decodeSafe(v)]).filter((v) => v !== ''))];
}

/**
 * A URL as Lilypad prints it (doctor, error messages): without its userinfo, and with a
 * `password` query parameter shown as ***. Also for a value that is not quite a URL.
 */
export function urlForDisplay(url: string): string {
  return url.replace(/^((?:[a-z][a-z0-9+.-]*:)?\/*)[^@/?#\s]*@/i, '$1').replace(/([?&]password=)[^&#]*/g, '$1***');
}
