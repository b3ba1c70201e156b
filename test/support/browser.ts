import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

/** Debian's Chromium (apt-get install chromium), or CHROMIUM_PATH. */
export function chromiumPath(): string {
  const candidates = [process.env['CHROMIUM_PATH'], '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => Boolean(p));
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`no Chromium found (looked at ${candidates.join(', ')}): install it with \`apt-get install -y chromium\` (.ci/run does) or set CHROMIUM_PATH`);
  return found;
}

/** Headless Chromium through playwright-core. Only 127.0.0.1 is ever opened by the tests. */
export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    // Running as root (CI) needs --no-sandbox; the pages come from this machine's test servers only.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Where tests put screenshots: LILYPAD_TEST_OUTPUT, else test-output/ in the project. */
export function testOutputDir(sub: string): string {
  const dir = path.join(process.env['LILYPAD_TEST_OUTPUT'] ?? path.join(ROOT, 'test-output'), sub);
  mkdirSync(dir, { recursive: true });
  return dir;
}
