import { SandboxError } from '../sandbox/errors.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';

/** Base64 text per command line: well under the kernel's limit for one argument. */
const CHUNK_BYTES = 96 * 1024;

/**
 * Writes bytes to a new file in the sandbox's /tmp, as data (base64 through the command line, in
 * chunks): a patch Lilypad applies in the sandbox never passes through a shell as text. Returns the
 * file's name; the caller removes it.
 */
export async function writeSandboxFile(sandbox: Sandbox, bytes: Buffer, what: string): Promise<string> {
  const run = (args: string[]) => sandbox.exec(args, { timeoutSeconds: 120 });
  const made = await run(['mktemp', '/tmp/lilypad-data.XXXXXX']);
  const file = made.stdout.toString().trim();
  if (made.exitCode !== 0 || !file) throw new SandboxError(`could not create a file in the sandbox's /tmp for ${what}: ${made.stderr.toString().trim()}`);
  const text = bytes.toString('base64');
  for (let i = 0; i < text.length; i += CHUNK_BYTES) {
    const res = await run(['/bin/sh', '-c', 'printf %s "$2" | base64 -d >> "$1"', 'write', file, text.slice(i, i + CHUNK_BYTES)]);
    if (res.exitCode !== 0) throw new SandboxError(`writing ${what} in the sandbox failed: ${res.stderr.toString().trim()}`);
  }
  return file;
}
