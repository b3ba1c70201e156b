import path from 'node:path';
import { parseCommandArgs, positiveInt } from './args.ts';
import { runSettingsFromEnv } from '../pipeline/run-context.ts';
import { EnvCache } from '../sandbox/env-cache/index.ts';
import { prepareExtraCa } from '../sandbox/extra-ca.ts';
import { UsageError } from '../shared/usage-error.ts';
import { loadEnv } from '../config/env.ts';
import { dockerForSandboxes } from '../sandbox/runtime.ts';
import { collectInstances } from '../eval/collect.ts';
import { CollectError } from '../eval/collect-github.ts';
import { DEFAULT_TEST_PATTERNS } from '../eval/collect-tests.ts';
import { parseEndpoint, type EndpointSpec } from '../eval/endpoint.ts';
import { loadInstances } from '../eval/instance.ts';
import { AppRepoAuth } from '../eval/repo-source.ts';
import { runEval } from '../eval/runner.ts';
import { onStopSignal } from '../shared/stop-signals.ts';

const USAGE = `Usage: lilypad eval <command> [options]

Commands:
  run      Run the agent on a set of issues with known tests, judge every patch, report resolve rate and cost
  collect  Build instances from a repository's closed issues and the merged pull requests that fixed them

Run \`lilypad eval <command> --help\` for the options of a command.`;

const RUN_HELP = `Usage: lilypad eval run --instances FILE.jsonl [options]

Runs each instance (SWE-bench format plus test_command, optional image and setup) against each
endpoint, k times, through the same sandbox and agent as \`lilypad run\`; judges every patch in a
fresh sandbox with the instance's tests; writes predictions.jsonl, per-attempt report.json (SWE-bench
fields), run-report.json, report.md and report.html. An owner/name repo is fetched as the GitHub App
when APP_ID and PRIVATE_KEY (or PRIVATE_KEY_PATH) are set (a read-only token for that repository,
GHE_HOST/GHE_PROTOCOL for GitHub Enterprise), else anonymously (public repositories only).

Options:
  --instances FILE.jsonl  one instance per line (bad lines are reported and skipped)
  --endpoint SPEC         NAME=URL[,model=M][,gpu_hour_cost=X | ,input_cost=X,output_cost=Y][,api_key_env=VAR]
                          repeat for several endpoints (default: default=$OPENAI_BASE_URL);
                          input_cost and output_cost are per million tokens
  --attempts k            attempts per instance and endpoint (default 1)
  --select                pick one attempt of k as the app does (verified, nothing broken, tests after,
                          agreement, smallest diff) and report its resolve rate
  --reproduce             before each attempt's fix, a run that writes a test reproducing the issue
                          (as \`reproduce: true\` does in the app), to measure what it costs and changes
  --no-instructions       leave the repositories' instructions for agents (AGENTS.md) out of the task, to
                          measure what they change (default: they go with the task, as in the app)
  --workers N             attempts run in parallel (default 1; each is one sandbox)
  --out DIR               output directory (default: $LILYPAD_DATA_DIR/evals/<start time>)
  --resume                continue the run in --out: finished attempts are kept, the rest run
  --validate              first check every instance with its gold patch; only valid ones are run
                          (without --endpoint: validate only)
  --max-steps N           model calls per attempt (default LILYPAD_MAX_STEPS)
  --max-time S            wall-clock budget per attempt in seconds (default LILYPAD_MAX_WALL_SECONDS)
  -h, --help              show this help`;

const COLLECT_HELP = `Usage: lilypad eval collect --repo owner/name --out FILE.jsonl [options]

Builds instances from the repository's closed issues (newest first), as the GitHub App (APP_ID,
PRIVATE_KEY or PRIVATE_KEY_PATH, GHE_HOST/GHE_PROTOCOL): for each issue the merged pull request that
fixed it; its test-file changes become test_patch, the rest patch; the tests run in the sandbox
with test_patch alone and with the patch too; FAIL_TO_PASS and PASS_TO_PASS come from the
difference. Only instances that validate (as \`lilypad eval run --validate\` checks) are written; the
others are listed with the reason on stderr and in FILE.skipped.jsonl.

Options:
  --repo owner/name       the repository (the app must be installed on it)
  --out FILE.jsonl        where the instances go (FILE.skipped.jsonl lists what was left out)
  --since DATE            only issues updated at or after DATE (ISO 8601, e.g. 2024-01-31)
  --limit N               stop after N instances were written
  --test-command CMD      how the tests run (default: \`test\` in the repository's .github/lilypad.yml)
  --test-files GLOB       a test file pattern (repeat; replaces the defaults:
                          ${DEFAULT_TEST_PATTERNS.join(' ')})
  -h, --help              show this help`;

export async function evalCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'run':
      return evalRun(rest);
    case 'collect':
      return evalCollect(rest);
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

const RUN = 'lilypad eval run';
const COLLECT = 'lilypad eval collect';

async function evalRun(argv: string[]): Promise<number> {
  const { values } = parseCommandArgs(RUN, {
    args: argv,
    options: {
      instances: { type: 'string' },
      endpoint: { type: 'string', multiple: true },
      attempts: { type: 'string' },
      select: { type: 'boolean' },
      'no-instructions': { type: 'boolean' },
      reproduce: { type: 'boolean' },
      workers: { type: 'string' },
      out: { type: 'string' },
      resume: { type: 'boolean' },
      validate: { type: 'boolean' },
      'max-steps': { type: 'string' },
      'max-time': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${RUN_HELP}\n`);
    return 0;
  }
  // Every number is checked before the instances are read or anything starts.
  const attempts = positiveInt(RUN, '--attempts', values.attempts) ?? 1;
  const workers = positiveInt(RUN, '--workers', values.workers) ?? 1;
  const maxSteps = positiveInt(RUN, '--max-steps', values['max-steps']);
  const maxTime = positiveInt(RUN, '--max-time', values['max-time']);
  const env = loadEnv();
  if (!values.instances) throw new UsageError(`--instances FILE.jsonl is required\n\n${RUN_HELP}`);
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

  const base = runSettingsFromEnv(env);
  const settings = { ...base, limits: { ...base.limits, statusIntervalMs: 0, ...(maxSteps ? { maxSteps } : {}), ...(maxTime ? { maxWallSeconds: maxTime } : {}) } };
  const controller = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    process.stderr.write(`\n${sig}: stopping; removing the running sandboxes and writing the partial report…\n`);
    controller.abort(new Error(`received ${sig}`));
    if (signals > 1) process.exit(130);
  };
  const offStopSignal = onStopSignal(onSignal);
  const outDir = path.resolve(values.out ?? path.join(env.LILYPAD_DATA_DIR, 'evals', new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')));
  const docker = await dockerForSandboxes(env);
  try {
    const { summary, exitCode } = await runEval({
      instancesFile: path.resolve(values.instances),
      instances: loaded.instances,
      problems: loaded.problems,
      endpoints,
      attempts,
      select: values.select ?? false,
      instructions: !values['no-instructions'],
      ...(values.reproduce ? { reproduce: true } : {}),
      workers,
      outDir,
      resume: values.resume ?? false,
      validate: values.validate ?? false,
      settings,
      gh: { host: env.GHE_HOST, protocol: env.GHE_PROTOCOL },
      appAuth: AppRepoAuth.fromEnv(env),
      docker,
      extraCaPem: prepareExtraCa(env)?.pem ?? null,
      envCache: new EnvCache({ docker, owner: 'local', dataDir: env.LILYPAD_DATA_DIR, maxBytes: env.LILYPAD_ENV_CACHE_GB * 1024 ** 3, maxAgeHours: env.LILYPAD_ENV_MAX_AGE_HOURS }),
      env: process.env,
      signal: controller.signal,
      stderr: process.stderr,
    });
    const lines = summary.endpoints.map((m) => {
      const rate = m.avg_at_k === null ? '–' : `${(m.avg_at_k * 100).toFixed(1)}%`;
      const sel = summary.select && m.selected_resolve_rate !== null ? `, selected ${(m.selected_resolve_rate * 100).toFixed(1)}%` : '';
      const cost = m.cost_per_resolved === null ? '' : `, cost per resolved issue ${m.cost_per_resolved.toPrecision(3)}`;
      // Attempts that could not run or be judged are not in the rate: say so, or "0/1 attempts" reads as a failed fix.
      const errors = m.errors > 0 ? `, ${m.errors} not run or not judged: see the lines above and report.md` : '';
      return `${m.endpoint}: resolve rate ${rate} (${m.resolved_attempts}/${m.attempts_done} attempts${attempts > 1 ? `, pass@${attempts} ${((m.pass_at_k ?? 0) * 100).toFixed(1)}%` : ''}${sel}${errors})${cost}`;
    });
    if (summary.validation) {
      const bad = summary.validation.filter((v) => !v.valid);
      const unvalidated = summary.interrupted ? 0 : loaded.instances.length - summary.validation.length;
      lines.unshift(
        `validation: ${summary.validation.length - bad.length} of ${summary.validation.length} instance(s) valid${bad.length ? ` (invalid: ${bad.map((b) => b.instance_id).join(', ')})` : ''}` +
          (unvalidated > 0 ? `; ${unvalidated} could not be validated (see above)` : ''),
      );
    }
    if (summary.interrupted) lines.push('interrupted: the report holds the finished attempts; rerun with --resume to complete it');
    lines.push(`report: ${path.join(outDir, 'report.md')}`);
    process.stdout.write(`${lines.join('\n')}\n`);
    return exitCode;
  } finally {
    offStopSignal();
  }
}

async function evalCollect(argv: string[]): Promise<number> {
  const { values } = parseCommandArgs(COLLECT, {
    args: argv,
    options: {
      repo: { type: 'string' },
      out: { type: 'string' },
      since: { type: 'string' },
      limit: { type: 'string' },
      'test-command': { type: 'string' },
      'test-files': { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${COLLECT_HELP}\n`);
    return 0;
  }
  if (!values.repo || !/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(values.repo)) {
    throw new UsageError(`--repo owner/name is required${values.repo ? ` (got "${values.repo}")` : ''}\n\n${COLLECT_HELP}`);
  }
  if (!values.out) throw new UsageError(`--out FILE.jsonl is required\n\n${COLLECT_HELP}`);
  let since: string | undefined;
  if (values.since !== undefined) {
    const t = Date.parse(values.since);
    if (Number.isNaN(t)) throw new UsageError(`--since must be a date such as 2024-01-31 or 2024-01-31T12:00:00Z, got "${values.since}"`);
    since = new Date(t).toISOString().replace(/\.\d{3}Z$/, 'Z');
  }
  const limit = positiveInt(COLLECT, '--limit', values.limit);
  if (values['test-command'] !== undefined && values['test-command'].trim() === '') throw new UsageError('--test-command must not be empty');
  const env = loadEnv();
  const base = runSettingsFromEnv(env);
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    process.stderr.write(`\n${sig}: stopping; removing the running sandbox…\n`);
    controller.abort(new Error(`received ${sig}`));
  };
  const offStopSignal = onStopSignal(onSignal);
  const outFile = path.resolve(values.out);
  try {
    const summary = await collectInstances({
      env,
      repo: values.repo,
      since,
      limit,
      outFile,
      testCommand: values['test-command']?.trim(),
      testPatterns: values['test-files'],
      sandbox: {
        image: base.sandbox.defaultImage,
        workdir: base.sandbox.workdir,
        user: base.sandbox.user,
        allowRootImage: base.sandbox.allowRootImage,
        memoryMb: base.sandbox.memoryMb,
        cpus: base.sandbox.cpus,
        pids: base.sandbox.pids,
        diskMb: base.sandbox.diskMb,
        maxLineBytes: base.sandbox.maxLineBytes,
        testTimeoutSeconds: base.limits.testTimeoutSeconds,
      },
      docker: await dockerForSandboxes(env),
      signal: controller.signal,
      stderr: process.stderr,
    });
    const reasons = new Map<string, number>();
    for (const s of summary.skipped) reasons.set(s.reason, (reasons.get(s.reason) ?? 0) + 1);
    const why = [...reasons].map(([r, n]) => `${n} ${r.replace(/_/g, ' ')}`).join(', ');
    process.stdout.write(
      `${summary.written} instance(s) written to ${outFile} from ${summary.examined} closed issue(s)\n` +
        `${summary.skipped.length} skipped${why ? ` (${why})` : ''}: ${summary.skippedFile}\n` +
        (summary.interrupted ? 'interrupted: the files hold the issues finished so far\n' : ''),
    );
    if (summary.interrupted) return 130;
    return summary.skipped.some((s) => s.reason === 'error') ? 1 : 0;
  } catch (err) {
    if (err instanceof CollectError) {
      process.stderr.write(`lilypad eval collect: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    offStopSignal();
  }
}
