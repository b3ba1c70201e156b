// Preloaded (node --import) by scripts/run-tests.mjs; acts only in the processes the test runner
// starts for files under test/unit/ (never in the runner itself, nor in other suites' files).
// A unit test runs inside its own process and needs nothing outside it: no Redis, no Docker engine,
// no network, no child process (git, python, node, a server) beyond a few stateless tools used as
// oracles or to make fixtures (tar, openssl, sh). Whatever needs more belongs in test/integration.
// This makes the rule hold, not just be true today: a unit file that reaches for one fails at
// once, with a message that says what it reached for and where the test should go.
//
// Plain JavaScript, so it loads before and independently of tsx.
// LILYPAD_UNIT_GUARD=log records what would have been refused (to stderr) instead of failing;
// LILYPAD_UNIT_GUARD=off turns it off.
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';
import path from 'node:path';

const mode = process.env['LILYPAD_UNIT_GUARD'] ?? 'on';

const UNIT_DIR = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'unit') + path.sep;
const file = path.resolve(process.argv[1] ?? '');
// Quick tools that keep no state and start nothing: tar and openssl check or make fixtures, sh runs
// stand-in runners. Anything else (git, docker, node, python) is integration.
const ALLOWED_PROGRAMS = new Set(['tar', 'openssl', 'sh']);

if (process.env['NODE_TEST_CONTEXT'] && file.startsWith(UNIT_DIR) && mode !== 'off') {
  // The Redis ports: the default, the one the suite was given (scripts/run-tests.mjs points REDIS_URL
  // at a closed port), and the one of the Redis the developer has, if any.
  const redisPorts = new Set([6379]);
  for (const url of [process.env['REDIS_URL'], process.env['LILYPAD_UNIT_GUARD_REDIS_URL']]) {
    try {
      if (url) redisPorts.add(Number(new URL(url).port || 6379));
    } catch {
      // not a URL: nothing to add
    }
  }
  const dockerSockets = [process.env['DOCKER_HOST'], process.env['LILYPAD_UNIT_GUARD_DOCKER_HOST']]
    .filter((h) => h?.startsWith('unix://'))
    .map((h) => h.slice('unix://'.length));

  const refuse = (what) => {
    const message =
      `${file}: a unit test reached for ${what}. Unit tests run with no Redis, no Docker engine, ` +
      'no network and no child process (see docs/development.md, "Running the tests"): move this ' +
      'test to test/integration, or test the logic without the service.';
    if (mode === 'log') {
      process.stderr.write(`[unit-guard] ${message}\n`);
      return;
    }
    const err = new Error(message);
    // Thrown where the caller cannot swallow it (ioredis, for one, retries a refused connection
    // forever): the test runner fails the test that is running, loudly, instead of a quiet timeout.
    process.nextTick(() => {
      throw err;
    });
    throw err;
  };

  const loopback = (host) => !host || host === 'localhost' || /^127\./.test(host) || host === '::1' || host === '::ffff:127.0.0.1';
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function guardedConnect(...args) {
    const first = Array.isArray(args[0]) ? args[0][0] : args[0];
    let port;
    let host;
    let socketPath;
    if (first && typeof first === 'object') {
      ({ port, host } = first);
      socketPath = first.path;
    } else if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
      port = first;
      host = typeof args[1] === 'string' ? args[1] : undefined;
    } else if (typeof first === 'string') {
      socketPath = first;
    }
    if (socketPath !== undefined) {
      if (/docker\.sock$/.test(socketPath) || dockerSockets.includes(socketPath)) refuse(`the Docker engine (${socketPath})`);
    } else if (port !== undefined) {
      if (redisPorts.has(Number(port))) refuse(`Redis (${host ?? 'localhost'}:${port})`);
      else if (!loopback(host)) refuse(`the network (${host}:${port})`);
      else if (Number(port) === 2375 || Number(port) === 2376) refuse(`the Docker engine (${host}:${port})`);
    }
    return connect.apply(this, args);
  };

  for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork']) {
    const real = childProcess[name];
    childProcess[name] = function guardedChildProcess(command, ...rest) {
      const argv = Array.isArray(rest[0]) ? rest[0] : [];
      const program = name.startsWith('exec') && !name.startsWith('execFile') ? String(command).trim().split(/\s+/)[0] : command;
      if (!ALLOWED_PROGRAMS.has(path.basename(String(program)))) refuse(`a child process (${[command, ...argv].join(' ').slice(0, 120)})`);
      return real.call(this, command, ...rest);
    };
  }
  syncBuiltinESMExports();
}
