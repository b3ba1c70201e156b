/**
 * A command line the user can fix; printed without a stack trace, exit code 2. `command` (e.g.
 * "lilypad run") prefixes the message instead of the bare "lilypad", so the line says where it came from.
 */
export class UsageError extends Error {
  override name = 'UsageError';
  readonly command: string | undefined;
  constructor(message: string, opts: { command?: string } = {}) {
    super(message);
    this.command = opts.command;
  }
}
