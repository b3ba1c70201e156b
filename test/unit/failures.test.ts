import { test } from 'node:test';
import assert from 'node:assert/strict';
import { classifyFailure } from '../../src/pipeline/failures.ts';
import { SandboxDeadlineError } from '../../src/sandbox/deadline.ts';
import { SandboxBoundaryError, SandboxError, SandboxImageError, SandboxLimitError } from '../../src/sandbox/errors.ts';

test('sandbox failures: the engine losing a container is retried; what the repository or image causes is told, not retried', () => {
  assert.equal(classifyFailure(new SandboxError('the sandbox container stopped while running the test command')).kind, 'transient');
  const image = classifyFailure(new SandboxImageError('the sandbox image x would run the agent as root'));
  assert.equal(image.kind, 'final');
  assert.match(image.todo, /unprivileged USER/);
  assert.equal(classifyFailure(new SandboxLimitError('the sandbox wrote more than 64 MiB')).kind, 'final');
  const boundary = classifyFailure(new SandboxBoundaryError("Lilypad's toolbox in the sandbox died while running the test command"));
  assert.equal(boundary.kind, 'final');
  assert.match(boundary.what, /^the run was stopped: /);
  assert.equal(classifyFailure(new SandboxDeadlineError('the test command did not finish within 35 s')).kind, 'final');
});
