import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger, logFormat } from '../../src/observability/logger.ts';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const GH = 'ghs_16C7e42F292c6912E7710c838347Ae178B4a';
const API_KEY = 'my-model-server-key-123456';
const DIR = mkdtempSync(path.join(os.tmpdir(), 'lilypad-logfmt-'));

// A process that logs to its stdout (fd 1) the way `lilypad start` does.
const CHILD = path.join(DIR, 'child.mts');
writeFileSync(
  CHILD,
  `import { createLogger } from ${JSON.stringify(path.join(ROOT, 'src/observability/logger.ts'))};
const log = createLogger({ level: 'info', secrets: [${JSON.stringify(API_KEY)}], destination: 1 });
log.info({ token: 'plain-token-value', headers: { authorization: 'Bearer abc' }, note: 'key is ${API_KEY}' }, 'pushing with ${GH}');
log.warn('second line');
`,
);

const hasScript = spawnSync('script', ['--version']).status === 0;
const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');

/** Runs CHILD with its stdout on a real pseudo-terminal (util-linux `script`), or on a pipe. */
function runChild(onTty: boolean, env: Record<string, string> = {}): string {
  const childEnv = { PATH: process.env['PATH'] ?? '', HOME: DIR, ...env };
  const node = `${JSON.stringify(process.execPath)} --import tsx ${JSON.stringify(CHILD)}`;
  if (onTty) return stripAnsi(execFileSync('script', ['-qec', node, '/dev/null'], { cwd: ROOT, env: childEnv, encoding: 'utf8' })).replace(/\r\n/g, '\n');
  return execFileSync(process.execPath, ['--import', 'tsx', CHILD], { cwd: ROOT, env: childEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function assertRedacted(text: string) {
  assert.ok(!text.includes(API_KEY), text);
  assert.ok(!text.includes(GH), text);
  assert.ok(!text.includes('plain-token-value'), text);
  assert.ok(!text.includes('Bearer abc'), text);
  assert.match(text, /pushing with \[REDACTED\]/);
  assert.match(text, /key is \[REDACTED\]/);
}

function assertPretty(text: string) {
  assert.match(text, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: pushing with \[REDACTED\]/m, text);
  assert.match(text, /WARN: second line/, text);
  assert.doesNotMatch(text, /"level":/, text);
}

function assertJson(text: string) {
  const lines = text.trim().split('\n').map((l) => JSON.parse(l) as { level: number; msg: string; app: string });
  assert.deepEqual(
    lines.map((l) => [l.level, l.app]),
    [
      [30, 'lilypad'],
      [40, 'lilypad'],
    ],
  );
}

describe('log format', () => {
  test('on a terminal the logs are pretty-printed, with secrets redacted', { skip: !hasScript && 'util-linux script is not installed' }, () => {
    const out = runChild(true);
    assertPretty(out);
    assertRedacted(out);
  });

  test('on a pipe the logs are JSON lines, with secrets redacted', () => {
    const out = runChild(false);
    assertJson(out);
    assertRedacted(out);
  });

  test('LILYPAD_LOG_FORMAT overrides the choice both ways; CI means JSON on a terminal', { skip: !hasScript && 'util-linux script is not installed' }, () => {
    const prettyPipe = runChild(false, { LILYPAD_LOG_FORMAT: 'pretty' });
    assertPretty(prettyPipe);
    assertRedacted(prettyPipe);
    assertJson(runChild(true, { LILYPAD_LOG_FORMAT: 'json' }));
    assertJson(runChild(true, { CI: 'true' }));
  });

  test('a file destination is JSON whatever the setting; a bad setting is a configuration error', () => {
    assert.equal(logFormat(path.join(DIR, 'x.log'), { LILYPAD_LOG_FORMAT: 'pretty' }), 'json');
    const pipeFd = 99_999; // not open, so not a terminal
    assert.equal(logFormat(pipeFd, {}), 'json');
    assert.equal(logFormat(pipeFd, { LILYPAD_LOG_FORMAT: ' Pretty ' }), 'pretty');
    assert.throws(() => logFormat(1, { LILYPAD_LOG_FORMAT: 'xml' }), (err: Error) => err.name === 'ConfigError' && /LILYPAD_LOG_FORMAT="xml".*json or pretty/.test(err.message));
  });

  test('pretty output written to a file is redacted by key and by value', () => {
    const file = path.join(DIR, 'pretty.log');
    const log = createLogger({ level: 'info', secrets: [API_KEY], destination: file, format: 'pretty' });
    log.info({ token: 'plain-token-value', headers: { authorization: 'Bearer abc' }, note: `key is ${API_KEY}` }, `pushing with ${GH}`);
    log.info({ nested: { list: [`x ${GH} y`] } }, 'nested');
    log.warn('second line');
    const text = readFileSync(file, 'utf8');
    assertPretty(text);
    assertRedacted(text);
    assert.match(text, /INFO: nested .*x \[REDACTED\] y/);
    assert.doesNotMatch(text, /\x1b\[/, 'no colours in a file');
  });
});
