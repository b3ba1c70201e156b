import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { loadEnv } from '../config/env.ts';
import { createLogger } from '../observability/logger.ts';
import { newRunId, runLocal, type LocalRunResult } from '../pipeline/local-run.ts';
import { describeTestCache } from '../pipeline/test-cache.ts';
import { runSettingsFromEnv } from '../pipeline/run-context.ts';
import { describeEnvCache, EnvCache } from '../sandbox/env-cache/index.ts';
import { prepareExtraCa } from '../sandbox/extra-ca.ts';
import { dockerForSandboxes } from '../sandbox/runtime.ts';
import { LABEL_RUN } from '../sandbox/sandbox.ts';
import { parseCommandArgs, positiveInt } from './args.ts';
import { lazySetupProxy } from './setup-proxy.ts';
import { onStopSignal } from '../shared/stop-signals.ts';
import { UsageError } from '../shared/usage-error.ts';
import { failureLine } from '../test-results/failure-line.ts';
import type { ModelSettingNames } from '../agent/model-client.ts';

const RUN_SETTING_NAMES: ModelSettingNames = { baseURL: '--base-url (or OPENAI_BASE_URL)', model: '--model (or LILYPAD_MODEL)', apiKey: 'OPENAI_API_KEY' };

const HELP = `Usage: lilypad run --repo <path> (--issue <file.md> | --title <text> [--body <text>]) [options]

Works on one issue in a copy of a local git repository inside a sandbox and writes
patch.diff, trajectory.jsonl and result.json. Your repository on disk is never modified.

Options:
  --repo <path>        git repository to work on (its HEAD commit is used)
  --issue <file.md>    issue as Markdown: first line is the title, the rest the body
  --title <text>       issue title (instead of --issue)
  --body <text>        issue body (with --title)
  --test <command>     test command, run in the sandbox before and after the agent
  --setup <command>    setup command (repeatable, run in order before the tests), with
                       network only through the egress proxy (LILYPAD_SETUP_EGRESS);
                       a failing one stops the run
  --image <name>       sandbox image (default: LILYPAD_SANDBOX_IMAGE)
  --out <dir>          output directory (default: $LILYPAD_DATA_DIR/runs/<run id>)
  --max-steps <N>      model calls allowed (default: LILYPAD_MAX_STEPS, 150)
  --max-time <s>       wall-clock budget for the agent in seconds (default: LILYPAD_MAX_WALL_SECONDS)
  --attempts <k>       best of k: k agent attempts in parallel sandboxes, one chosen by the evidence
                       (verified, nothing broken, tests after), then agreement, then the smallest
                       diff, as the app's \`attempts: k\` (1-10)
  --reproduce          first, a run that writes a test reproducing the issue (as the app's
                       \`reproduce: true\`); kept if it fails on the base code for the issue's reason
  --base-url <url>     OpenAI-compatible endpoint (default: OPENAI_BASE_URL)
  --model <name>       model name (default: LILYPAD_MODEL, else the server's first model)
  -h, --help           show this help`;

export async function runCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandArgs('lilypad run', {
    args: argv,
    options: {
      repo: { type: 'string' },
      issue: { type: 'string' },
      title: { type: 'string' },
      body: { type: 'string' },
      test: { type: 'string' },
      setup: { type: 'string', multiple: true },
      image: { type: 'string' },
      out: { type: 'string' },
      'max-steps': { type: 'string' },
      'max-time': { type: 'string' },
      attempts: { type: 'string' },
      reproduce: { type: 'boolean' },
      'base-url': { type: 'string' },
      model: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  const maxSteps = positiveInt('lilypad run', '--max-steps', values['max-steps']);
  const maxTime = positiveInt('lilypad run', '--max-time', values['max-time']);
  const attempts = positiveInt('lilypad run', '--attempts', values.attempts);
  if (attempts !== undefined && attempts > 10) throw new UsageError(`--attempts must be between 1 and 10, got ${attempts}`);
  const setup = values.setup ?? [];
  for (const [i, command] of setup.entries()) {
    if (!command.trim()) throw new UsageError(`--setup number ${i + 1} is empty; give the command to run, e.g. --setup "pip install -e ."`);
  }
  const env = loadEnv();
  if (!values.repo) throw new UsageError(`--repo is required\n\n${HELP}`);
  if (values.issue && values.title) throw new UsageError('give either --issue <file.md> or --title, not both');
  let title: string;
  let body: string;
  if (values.issue) {
    const text = await readFile(values.issue, 'utf8').catch((err: Error) => {
      throw new UsageError(`cannot read --issue ${values.issue}: ${err.message}`);
    });
    const nl = text.indexOf('\n');
    title = (nl < 0 ? text : text.slice(0, nl)).replace(/^#+\s*/, '').trim();
    body = nl < 0 ? '' : text.slice(nl + 1);
  } else if (values.title) {
    title = values.title;
    body = values.body ?? '';
  } else {
    throw new UsageError('an issue is required: --issue <file.md> or --title <text> [--body <text>]');
  }
  if (!title.trim()) throw new UsageError('the issue title is empty (the first line of --issue, or --title)');
  const baseURL = values['base-url'] ?? env.OPENAI_BASE_URL;
  if (!/^https?:\/\/[^/]+/.test(baseURL)) throw new UsageError(`--base-url must be an http(s) URL such as http://127.0.0.1:30000/v1, got "${baseURL}"`);
  // LILYPAD_SANDBOX_RUNTIME is checked against the engine before any model request or container.
  const docker = await dockerForSandboxes(env);
  const image = values.image ?? env.LILYPAD_SANDBOX_IMAGE;

  const controller = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    process.stderr.write(`\n${sig}: stopping the run and removing its sandbox…\n`);
    controller.abort(new Error(`received ${sig}`));
    if (signals > 1) process.exit(130);
  };
  const offStopSignal = onStopSignal(onSignal);

  const runId = newRunId();
  const outDir = path.resolve(values.out ?? path.join(env.LILYPAD_DATA_DIR, 'runs', runId));
  const tty = process.stderr.isTTY;
  const say = (line: string) => process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`);
  say(`lilypad run ${runId}: ${title}\n`);
  // Structured logs go to a file beside the results; the terminal gets the human summary.
  const logger = createLogger({ level: env.LOG_LEVEL, secrets: [env.OPENAI_API_KEY], destination: path.join(outDir, 'lilypad.log') });
  let result: LocalRunResult;
  let lastToolStep = 0;
  const proxy = lazySetupProxy(env, docker, image, { [LABEL_RUN]: runId }, () => say('  egress proxy for the setup commands…'));
  try {
    const settings = runSettingsFromEnv(env);
    result = await runLocal({
      runId,
      repo: values.repo,
      title,
      body,
      overrides: { setup, test: values.test, attempts, maxSteps, maxSeconds: maxTime, ...(values.reproduce ? { reproduce: true } : {}) },
      settings: {
        ...settings,
        sandbox: { ...settings.sandbox, defaultImage: image },
        model: { ...settings.model, baseURL, name: values.model ?? env.LILYPAD_MODEL, settingNames: RUN_SETTING_NAMES },
        limits: { ...settings.limits, statusIntervalMs: 0, ...(maxSteps ? { maxSteps } : {}), ...(maxTime ? { maxWallSeconds: maxTime } : {}), ...(attempts ? { maxAttempts: attempts } : {}) },
      },
      setupNetwork: proxy,
      extraCaPem: prepareExtraCa(env)?.pem ?? null,
      envCache: new EnvCache({ docker, owner: 'local', dataDir: env.LILYPAD_DATA_DIR, maxBytes: env.LILYPAD_ENV_CACHE_GB * 1024 ** 3, maxAgeHours: env.LILYPAD_ENV_MAX_AGE_HOURS }),
      outDir,
      signal: controller.signal,
      docker,
      logger,
      onPhase: (p) => say(`  ${p}…`),
      onProgress: (p) => {
        // The loop reports each tool call and then the end of the step; after a tool line, the end repeats it.
        if (!p.lastTool && p.step === lastToolStep) return;
        if (p.lastTool) lastToolStep = p.step;
        say(`  agent: step ${p.step}, ~${p.tokens} context tokens${p.lastTool ? `, ran ${p.lastTool}` : ''}`);
      },
    });
  } finally {
    await proxy?.stop();
    offStopSignal();
  }
  if (tty) process.stderr.write('\n');
  process.stdout.write(summary(result));
  if (result.exit_reason === 'cancelled') return 130;
  if (result.exit_reason === 'error' || result.exit_reason === 'llm_query_error' || result.exit_reason === 'tool_error') return 1;
  return 0;
}

function summary(r: LocalRunResult): string {
  const lines = [
    `exit reason: ${r.exit_reason}${r.error ? ` (${r.error})` : ''}`,
    ...(r.todo ? [`what to do: ${r.todo}`] : []),
    `model: ${r.model ?? '-'}  steps: ${r.steps}  tokens: ${r.tokens ? `${r.tokens.prompt_tokens} prompt / ${r.tokens.completion_tokens} completion` : '-'}  time: ${((r.durations_ms['total'] ?? 0) / 1000).toFixed(1)}s`,
    `patch: ${r.patch.empty ? 'empty' : `${r.patch.files.length} file(s), ${r.patch.bytes} bytes: ${r.patch.files.join(', ')}`}`,
  ];
  if (r.attempts) {
    for (const a of r.attempts.rows) lines.push(`attempt ${a.attempt}${a.chosen ? ' (chosen)' : ''}: ${a.exitReason}, tests after ${a.testsAfter}, ${a.changedFiles} file(s), ${a.steps} steps${a.note ? `; ${a.note}` : ''}`);
    lines.push(`best of ${r.attempts.rows.length}: ${r.attempts.summary}`);
  }
  if (r.patch.dropped.length > 0) {
    lines.push(`not in the patch, as the app would not publish them: ${r.patch.dropped.map((d) => `${d.path} (${d.reason})`).join('; ')}`);
  }
  if (r.patch.left_out.length > 0) {
    const what = (g: LocalRunResult['patch']['left_out'][number]) => (g.rule === 'setup' ? `${g.count} file(s) of the setup commands' output` : `${g.count} build leftover(s) (\`${g.rule}\`)`);
    lines.push(`left out of the patch: ${r.patch.left_out.map(what).join(', ')}; why: see result.json`);
  }
  if (r.setup) {
    if (r.setup.source === 'inferred') lines.push(`setup inferred from ${r.setup.inferred_from.join(', ') || 'the repository'}: ${r.setup.planned.join(' && ')}`);
    for (const s of r.setup.commands) {
      lines.push(`setup (${s.command}): ${s.outcome}${s.exitCode !== null ? ` (exit ${s.exitCode})` : ''}, ${(s.durationMs / 1000).toFixed(1)}s`);
      const why = s.outcome === 'failed' || s.outcome === 'error' ? failureLine(s.outputTail) : null;
      if (why) lines.push(`  ${why}   (the output's tail is in result.json)`);
    }
    if (r.setup.failed) lines.push(`setup: the inferred \`${r.setup.failed}\` failed; the run went on without the rest of setup`);
    if (r.setup.env_cache) lines.push(`environment: ${describeEnvCache(r.setup.env_cache)}`);
  }
  if (r.tests) {
    const t = (o: typeof r.tests.before) => (o ? `${o.outcome}${o.exitCode !== null ? ` (exit ${o.exitCode})` : ''}` : 'not run');
    const from = r.tests.source === 'inferred' ? `, inferred from ${r.tests.inferred_from.join(', ') || 'the repository'}` : '';
    const after = !r.tests.after && r.tests.after_not_run ? `not run (${r.tests.after_not_run})` : t(r.tests.after);
    lines.push(`tests (${r.tests.command}${from}): before ${t(r.tests.before)}, after ${after}`);
    if (r.tests.cache) lines.push(`tests after: ${describeTestCache(r.tests.cache)}`);
    if (r.tests.per_test_fallback) lines.push(`tests per test: ${r.tests.per_test_fallback}`);
    else if (r.tests.after) lines.push(`tests per test: ${r.tests.counts.fixed} fixed${r.tests.fixed.length ? ` (${r.tests.fixed.slice(0, 5).join(', ')}${r.tests.fixed.length > 5 ? ', …' : ''})` : ''}, ${r.tests.counts.broken} broken${r.tests.broken.length ? ` (${r.tests.broken.slice(0, 5).join(', ')}${r.tests.broken.length > 5 ? ', …' : ''})` : ''}, ${r.tests.counts.still_failing} still failing, ${r.tests.counts.passed_both} passing`);
  } else if (r.outcome !== 'failed') {
    lines.push('tests: none configured, and none could be inferred from the repository; give --test');
  }
  for (const w of r.warnings) lines.push(`warning: ${w}`);
  lines.push(`output: ${r.out_dir}`);
  return `${lines.join('\n')}\n`;
}
