import { ModelError } from '../agent/model-client.ts';
import { statusOf } from '../github/client.ts';
import { GlobError } from '../config/globs.ts';
import { LockTimeoutError } from '../store/redis-lock.ts';
import { SandboxDeadlineError } from '../sandbox/deadline.ts';
import { SandboxBoundaryError, SandboxError, SandboxImageError, SandboxLimitError } from '../sandbox/errors.ts';
import { CancelledError } from '../shared/cancel.ts';
import { GitError } from '../workspace/git.ts';
import type { RunOutcome } from './outcome.ts';
import { SetupError } from './sandbox-session.ts';

/** A problem the repository's maintainers must fix (configuration, setup): never retried. */
export class UserError extends Error {
  override name = 'UserError';
  constructor(
    message: string,
    readonly todo: string,
  ) {
    super(message);
  }
}

export interface FailureVerdict {
  /** transient: retry with backoff; final: tell the issue and stop; cancelled: say so. */
  kind: 'transient' | 'final' | 'cancelled';
  what: string;
  todo: string;
}

/** The one place that decides what a failure means for the user. */
export function classifyFailure(err: unknown): FailureVerdict {
  if (err instanceof CancelledError) return { kind: 'cancelled', what: err.message, todo: '' };
  if (err instanceof UserError) return { kind: 'final', what: err.message, todo: err.todo };
  if (err instanceof SetupError) {
    const tail = err.outcome.outputTail.split('\n').slice(-15).join('\n').trim();
    const output = tail ? `. Its output ended with:\n\n\`\`\`text\n${tail.replace(/```/g, "'''")}\n\`\`\`` : ' (it printed nothing).';
    return {
      kind: 'final',
      what: `${err.message}, so the run stopped before the tests and the agent${output}`,
      todo: 'fix the `setup` commands in `.github/lilypad.yml` (they run in the sandbox image with network, before the agent), then run Lilypad again.',
    };
  }
  if (err instanceof ModelError) {
    return {
      kind: 'final',
      what: `the model server failed: ${err.message}`,
      todo: 'ask the Lilypad administrator to check the model server (`lilypad doctor`), then run Lilypad again.',
    };
  }
  if (err instanceof GlobError) {
    return {
      kind: 'final',
      what: `a path or image pattern could not be used: ${err.message}`,
      todo: 'fix or simplify `exclude_paths` in `.github/lilypad.yml` (fewer `*` in one pattern), or ask the administrator to simplify LILYPAD_ALLOWED_IMAGES; then run Lilypad again.',
    };
  }
  if (err instanceof LockTimeoutError) {
    return { kind: 'transient', what: err.message, todo: 'Lilypad retries this by itself.' };
  }
  if (err instanceof SandboxImageError) {
    return {
      kind: 'final',
      what: `the sandbox could not start: ${err.message}`,
      todo: 'set `image` in `.github/lilypad.yml` to an image with bash and python3, an unprivileged USER, that the workers have, or ask the administrator to build it.',
    };
  }
  if (err instanceof SandboxLimitError) {
    return { kind: 'final', what: err.message, todo: 'make the task fit the sandbox limits (or ask the Lilypad administrator to raise them), then run Lilypad again.' };
  }
  if (err instanceof SandboxBoundaryError || err instanceof SandboxDeadlineError) {
    return {
      kind: 'final',
      what: `the run was stopped: ${err.message}`,
      todo: 'check what the repository\'s setup or test commands (or the agent) do to processes they did not start; the trajectory on the worker shows the agent\'s commands. Then run Lilypad again.',
    };
  }
  if (err instanceof SandboxError) {
    return { kind: 'transient', what: `the sandbox failed: ${err.message}`, todo: 'Lilypad retries this by itself; if it keeps failing, ask the administrator to check the Docker engine.' };
  }
  const status = statusOf(err);
  if (status !== undefined) {
    if (status >= 500 || status === 429 || status === 408) {
      return { kind: 'transient', what: `GitHub answered HTTP ${status}`, todo: 'Lilypad retries this by itself.' };
    }
    if (status === 403 && /rate limit/i.test((err as Error).message)) {
      return { kind: 'transient', what: 'GitHub rate limit reached', todo: 'Lilypad retries this by itself.' };
    }
    return {
      kind: 'final',
      what: `GitHub refused a request (HTTP ${status}): ${(err as Error).message}`,
      todo: 'check that the Lilypad app is installed on this repository with contents, issues and pull requests write access.',
    };
  }
  if (err instanceof GitError) {
    if (/Could not resolve host|Connection refused|timed out|early EOF|RPC failed|unable to access|cannot lock ref|Unable to create .*\.lock/i.test(err.message)) {
      return { kind: 'transient', what: `git could not reach GitHub: ${err.message}`, todo: 'Lilypad retries this by itself.' };
    }
    return { kind: 'final', what: `a git operation failed: ${err.message}`, todo: 'run Lilypad again; if it fails the same way, tell the Lilypad administrator.' };
  }
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN)$/.test(code)) {
    return { kind: 'transient', what: `a connection failed (${code})`, todo: 'Lilypad retries this by itself.' };
  }
  return { kind: 'final', what: `an unexpected error: ${(err as Error).message ?? String(err)}`, todo: 'tell the Lilypad administrator; the worker log has the details.' };
}

/** Whose a failure is to fix: the repository's (configuration, setup commands, what the change holds) or Lilypad's. */
export function faultOf(err: unknown): 'user' | 'infrastructure' {
  return err instanceof UserError || err instanceof SetupError || err instanceof GlobError ? 'user' : 'infrastructure';
}

/** A run that failed, in the judge's words: the same for a queued job and for `lilypad run` and eval. */
export function failedOutcome(err: unknown, verdict: FailureVerdict, retry: boolean): Extract<RunOutcome, { result: 'failed' }> {
  return { result: 'failed', what: verdict.what, todo: verdict.todo, error: (err as Error).message ?? String(err), retry, fault: faultOf(err) };
}
