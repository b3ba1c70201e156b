import path from 'node:path';
import { parseArgs } from 'node:util';
import { localRunSettings } from '../cli/run.ts';
import { UsageError } from '../cli/usage-error.ts';
import { loadEnv } from '../config/env.ts';
import { createDockerClient } from '../sandbox/sandbox.ts';
import { parseEndpoint, type EndpointSpec } from './endpoint.ts';
import { loadInstances } from './instance.ts';
import { runEval } from './runner.ts';

const USAGE = `Usage: lilypad eval <command> [options]

Commands:
  run      Run the agent on a set of issues with known tests, judge every patch, report resolve rate and cost

Run \`lilypad eval <command> --help\` for the options of a command.`;

const RUN_HELP = `Usage: lilypad eval run --instances FILE.jsonl [options]

Runs each instance (SWE-bench format plus test_command, optional image and setup) against each
endpoint, k times, through the same sandbox and agent as \`lilypad run\`; judges every patch in a
fresh sandbox with the instance's tests; writes predictions.jsonl, per-attempt report.json (SWE-bench
fields), run-report.json, report.md and report.html.

Options:
  --instances FILE.jsonl  one instance per line (bad lines are reported and skipped)
  --endpoint SPEC         NAME=URL[,model=M][,gpu_hour_cost=X | ,input_cost=X,output_cost=Y][,api_key_env=VAR]
                          repeat for several endpoints (default: default=$OPENAI_BASE_URL);
                          input_cost and output_cost are per million tokens
  --attempts k            attempts per instance and endpoint (default 1)
  --select                pick one attempt of k (tests after, agreement, smallest diff) and report its resolve rate
  --workers N             attempts run in parallel (default 1; each is one sandbox)
  --out DIR               output directory (default: $LILYPAD_DATA_DIR/evals/<run id>)
  --resume                continue the run in --out: finished attempts are kept, the rest run
  --validate              first check every instance with its gold patch; only valid ones are run
                          (without --endpoint: validate only)
  --max-steps N           model calls per attempt (default LILYPAD_MAX_STEPS)
  --max-time S            wall-clock budget per attempt in seconds (default LILYPAD_MAX_WALL_SECONDS)
  -h, --help              show this help`;

export async function evalCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'run':
      return evalRun(rest);
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(`${USAGE}\n`);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown eval command "${sub}"\n\n${USAGE}`);
  }
}

const positive = (name: string, raw: string | undefined, fallback: number): number => {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${name} must be a positive whole number, got "${raw}"`);
  return n;
};

async function evalRun(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      instances: { type: 'string' },
      endpoint: { type: 'string', multiple: true },
      attempts: { type: 'string' },
      select: { type: 'boolean' },
      workers: { type: 'string' },
      out: { type: 'string' },
      resume: { type: 'boolean' },
      validate: { type: 'boolean' },
      'max-steps': { type: 'string' },
      'max-time': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    process.stdout.write(`${RUN_HELP}\n`);
    return 0;
  }
  const env = loadEnv();
  if (!values.instances) throw new UsageError(`--instances FILE.jsonl is required\n\n${RUN_HELP}`);
  const attempts = positive('--attempts', values.attempts, 1);
  const workers = positive('--workers', values.workers, 1);
  if (values.select && attempts < 2) throw new UsageError('--select chooses among attempts: give --attempts 2 or more');
  const endpoints: EndpointSpec[] = (values.endpoint ?? []).map(parseEndpoint);
  const names = new Set<string>();
  for (const e of endpoints) {
    if (names.has(e.name)) throw new UsageError(`--endpoint name "${e.name}" is used twice; give each endpoint its own name`);
    names.add(e.name);
  }
  if (endpoints.length === 0 && !values.validate) {
    endpoints.push({ name: 'default', baseURL: env.OPENAI_BASE_URL, ...(env.LILYPAD_MODEL ? { model: env.LILYPAD_MODEL } : {}), cost: { kind: 'none' } });
  }

  const loaded = await loadInstances(values.instances).catch((err: Error) => {
    throw new UsageError(err.message);
  });
  for (const p of loaded.problems) {
    process.stderr.write(`lilypad eval: ${values.instances} line ${p.line}${p.instance_id ? ` (${p.instance_id})` : ''}: ${p.message}; this instance is skipped\n`);
  }
  if (loaded.instances.length === 0) {
    process.stderr.write(`lilypad eval: no valid instance in ${values.instances}; nothing to run\n`);
    return 1;
  }

  const base = localRunSettings(env);
  const settings = {
    ...base,
    budgets: {
      ...base.budgets,
      maxSteps: positive('--max-steps', values['max-steps'], env.LILYPAD_MAX_STEPS),
      maxWallSeconds: positive('--max-time', values['max-time'], env.LILYPAD_MAX_WALL_SECONDS),
    },
  };
  const controller = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    process.stderr.write(`\n${sig}: stopping; removing the running sandboxes and writing the partial report…\n`);
    controller.abort(new Error(`received ${sig}`));
    if (signals > 1) process.exit(130);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const outDir = path.resolve(values.out ?? path.join(env.LILYPAD_DATA_DIR, 'evals', new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')));
  try {
    const { summary, exitCode } = await runEval({
      instancesFile: path.resolve(values.instances),
      instances: loaded.instances,
      problems: loaded.problems,
      endpoints,
      attempts,
      select: values.select ?? false,
      workers,
      outDir,
      resume: values.resume ?? false,
      validate: values.validate ?? false,
      settings,
      gh: { host: env.GHE_HOST, protocol: env.GHE_PROTOCOL },
      docker: createDockerClient(),
      env: process.env,
      signal: controller.signal,
      stderr: process.stderr,
    });
    const lines = summary.endpoints.map((m) => {
      const rate = m.avg_at_k === null ? '–' : `${(m.avg_at_k * 100).toFixed(1)}%`;
      const sel = summary.select && m.selected_resolve_rate !== null ? `, selected ${(m.selected_resolve_rate * 100).toFixed(1)}%` : '';
      const cost = m.cost_per_resolved === null ? '' : `, cost per resolved issue ${m.cost_per_resolved.toPrecision(3)}`;
      return `${m.endpoint}: resolve rate ${rate} (${m.resolved_attempts}/${m.attempts_done} attempts${attempts > 1 ? `, pass@${attempts} ${((m.pass_at_k ?? 0) * 100).toFixed(1)}%` : ''}${sel})${cost}`;
    });
    if (summary.validation) {
      const bad = summary.validation.filter((v) => !v.valid);
      lines.unshift(`validation: ${summary.validation.length - bad.length} of ${summary.validation.length} instance(s) valid${bad.length ? ` (invalid: ${bad.map((b) => b.instance_id).join(', ')})` : ''}`);
    }
    if (summary.interrupted) lines.push('interrupted: the report holds the finished attempts; rerun with --resume to complete it');
    lines.push(`report: ${path.join(outDir, 'report.md')}`);
    process.stdout.write(`${lines.join('\n')}\n`);
    return exitCode;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
