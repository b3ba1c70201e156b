/** The sandbox could not be created, talked to, or is gone. Infrastructure, not a model mistake. */
export class SandboxError extends Error {
  override name = 'SandboxError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * The engine stopped or removed the container under the run (a restart of the Docker engine, an
 * operator's `docker rm`): infrastructure, not the agent's doing; the job is retried.
 */
export class SandboxLostError extends SandboxError {
  override name = 'SandboxLostError';
}

/** The sandbox image cannot be used as it is (missing, no python3, runs as root): the user's to fix. */
export class SandboxImageError extends SandboxError {
  override name = 'SandboxImageError';
}

/** The sandbox outgrew a limit Lilypad enforces from outside (disk); the run ends, not retried. */
export class SandboxLimitError extends SandboxError {
  override name = 'SandboxLimitError';
}

/**
 * Something inside the sandbox attacked Lilypad's side of the boundary (killed or stopped the
 * toolbox during a host step, survived SIGKILL): the sandbox is removed and the run is not retried.
 */
export class SandboxBoundaryError extends SandboxError {
  override name = 'SandboxBoundaryError';
}
