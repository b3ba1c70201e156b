import { readFileSync } from 'node:fs';
import { loadDotEnv } from '../config/dotenv.ts';
import { ConfigError } from '../config/env.ts';
import { parseCommandArgs } from './args.ts';

const USAGE = `Usage: lilypad <command> [options]

Commands:
  start    Run the GitHub App: webhook server and a worker in one process
  web      Run only the webhook server (queues jobs in Redis)
  worker   Run only a worker (takes jobs from Redis; run many, on many machines)
  run      Work on one issue in a local repository and write patch, trajectory and result
  doctor   Check the Docker engine, the sandbox image, Redis, the model endpoint and the GitHub App
  eval     Measure resolve rate and cost per resolved issue on your own issues, across endpoints
  config   Print a repository's effective configuration and where each value came from
  env      List or purge kept environments (the images setup is reused from)
  version  Print the version (also --version, -V)

Run \`lilypad <command> --help\` for the options of a command.`;

/** The version in the package.json next to src/, which is what `npm install`, the image and a checkout all ship. */
function version(): string {
  const pkg: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  const v = (pkg as { version?: unknown }).version;
  return typeof v === 'string' ? v : 'unknown';
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // Settings from `.env` (or LILYPAD_ENV_FILE) for every command; the environment wins over the file.
  if (command !== undefined && !command.startsWith('-') && command !== 'help' && command !== 'version') loadDotEnv();
  switch (command) {
    case 'version':
    case '--version':
    case '-V':
      process.stdout.write(`${version()}\n`);
      return 0;
    case 'run':
      return (await import('./run.ts')).runCommand(rest);
    case 'doctor':
      return (await import('./doctor.ts')).doctorCommand(rest);
    case 'config':
      return (await import('./config.ts')).configCommand(rest);
    case 'env':
      return (await import('./env.ts')).envCommand(rest);
    case 'eval':
      return (await import('./eval.ts')).evalCommand(rest);
    case 'start':
    case 'web':
    case 'worker':
      // The roles take their configuration from the environment; a stray option is named here.
      parseCommandArgs(`lilypad ${command}`, { args: rest, options: { help: { type: 'boolean', short: 'h' } } });
      return (await import('./serve.ts')).serveCommand(command, rest);
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`lilypad: ${command.startsWith('-') ? `unknown option ${command}` : `unknown command "${command}"`}\n\n${USAGE}\n`);
      return 2;
  }
}

try {
  const code = await main(process.argv.slice(2));
  process.exitCode = code;
  // Long-running roles have stopped cleanly by now; do not wait on idle sockets to close.
  if (['start', 'web', 'worker'].includes(process.argv[2] ?? '')) process.exit(code);
} catch (err) {
  if (err instanceof ConfigError || (err as Error).name === 'UsageError') {
    const command = (err as { command?: unknown }).command;
    process.stderr.write(`${typeof command === 'string' ? command : 'lilypad'}: ${(err as Error).message}\n`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`lilypad: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  }
  if (['start', 'web', 'worker'].includes(process.argv[2] ?? '')) process.exit(process.exitCode);
}
