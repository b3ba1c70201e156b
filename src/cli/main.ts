import { loadDotEnv } from '../config/dotenv.ts';
import { ConfigError } from '../config/env.ts';

const USAGE = `Usage: lilypad <command> [options]

Commands:
  start    Run the GitHub App: webhook server and a worker in one process
  web      Run only the webhook server (queues jobs in Redis)
  worker   Run only a worker (takes jobs from Redis; run many, on many machines)
  run      Work on one issue in a local repository and write patch, trajectory and result
  doctor   Check the Docker engine, the sandbox image, Redis and the model endpoint
  eval     Measure resolve rate and cost per resolved issue on your own issues, across endpoints
  config   Print a repository's effective configuration and where each value came from

Run \`lilypad <command> --help\` for the options of a command.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // Settings from `.env` (or LILYPAD_ENV_FILE) for every command; the environment wins over the file.
  if (command !== undefined && !command.startsWith('-') && command !== 'help') loadDotEnv();
  switch (command) {
    case 'run':
      return (await import('./run.ts')).runCommand(rest);
    case 'doctor':
      return (await import('./doctor.ts')).doctorCommand(rest);
    case 'config':
      return (await import('./config.ts')).configCommand(rest);
    case 'eval':
      return (await import('../eval/cli.ts')).evalCommand(rest);
    case 'start':
    case 'web':
    case 'worker':
      return (await import('./serve.ts')).serveCommand(command, rest);
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`lilypad: unknown command "${command}"\n\n${USAGE}\n`);
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
    process.stderr.write(`lilypad: ${(err as Error).message}\n`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`lilypad: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  }
  if (['start', 'web', 'worker'].includes(process.argv[2] ?? '')) process.exit(process.exitCode);
}
