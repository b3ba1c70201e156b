/** A command line the user can fix; printed without a stack trace, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}
