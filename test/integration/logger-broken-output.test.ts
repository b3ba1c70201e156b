import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const LOGGER = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../src/observability/logger.ts');

// A process whose standard output fails (its terminal closed: EIO; a full disk: ENOSPC) must go on
// stopping: the log lines are lost, the process is not. /dev/full fails every write with ENOSPC, as
// a closed terminal fails it with EIO (pino itself only forgives EPIPE).
for (const format of ['json', 'pretty'] as const) {
  test(`a log line to an output that fails is dropped, and the process goes on (${format})`, async () => {
    const script = `
      import { createLogger } from ${JSON.stringify(LOGGER)};
      const logger = createLogger({ level: 'info', destination: 1, format: ${JSON.stringify(format)} });
      await new Promise((r) => setTimeout(r, 500));
      for (let i = 0; i < 200; i++) logger.info({ i }, 'stopping the worker');
      process.stderr.write('still running\\n');
    `;
    const full = openSync('/dev/full', 'w');
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', full, 'pipe'] });
    closeSync(full);
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    assert.equal(code, 0, err);
    assert.match(err, /^still running$/m);
  });
}
