import { readFileSync } from 'node:fs';
import os from 'node:os';
import { Redis } from 'ioredis';
import { httpUrl, parseCommandArgs } from './args.ts';
import { describePrivateRedis } from './private-redis.ts';
import { gvisorPidsCheck, isGvisor, RUNTIME_VAR, sandboxRuntimeCheck, sandboxRuntimeOf } from '../sandbox/runtime.ts';
import { UsageError } from '../shared/usage-error.ts';
import { loadEnv, type Env } from '../config/env.ts';
import { urlForDisplay } from '../shared/url-secrets.ts';
import { ModelClient } from '../agent/model-client.ts';
import { interpretResponse } from '../agent/response.ts';
import { LEAF_TOOLS } from '../agent/tools.ts';
import { Sandbox, createDockerClient } from '../sandbox/sandbox.ts';
import { extraCaCheck, readImageCaStore } from './doctor-ca.ts';
import { githubAppChecks } from './doctor-github.ts';

export type CheckStatus = 'OK' | 'WARN' | 'FAIL';
export interface CheckResult {
  name: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

const ok = (name: string, detail: string): CheckResult => ({ name, status: 'OK', detail });
const warn = (name: string, detail: string, fix: string): CheckResult => ({ name, status: 'WARN', detail, fix });
const fail = (name: string, detail: string, fix: string): CheckResult => ({ name, status: 'FAIL', detail, fix });

const HELP = `Usage: lilypad doctor [--base-url <url>] [--model <name>] [--json]

Checks the Docker engine, the sandbox image, whether setup needs LILYPAD_EXTRA_CA_CERTS (this
machine trusts a CA of its own that the sandbox does not), Redis (REDIS_URL, or the private Redis
that \`lilypad start\` would run without it), the model endpoint, and the GitHub App (registered or
not; its credentials against GitHub and its installations).

Options:
  --base-url <url>  OpenAI-compatible endpoint to check (default: OPENAI_BASE_URL)
  --model <name>    model to check (default: LILYPAD_MODEL, else the server's first model)
  --json            print the results as JSON
  -h, --help        show this help`;

export async function doctorCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandArgs('lilypad doctor', {
    args: argv,
    options: {
      'base-url': { type: 'string' },
      model: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  // The flags stand in for the variables, as for `lilypad run`, so the checks see one endpoint and one model.
  const overrides: Record<string, string> = {};
  if (values['base-url'] !== undefined) overrides['OPENAI_BASE_URL'] = httpUrl('lilypad doctor', '--base-url', values['base-url']);
  if (values.model !== undefined) {
    if (!values.model.trim()) throw new UsageError('--model needs a model name; see `lilypad doctor --help`', { command: 'lilypad doctor' });
    overrides['LILYPAD_MODEL'] = values.model;
  }
  const env = loadEnv({ ...process.env, ...overrides });
  const results: CheckResult[] = [];
  const report = (r: CheckResult) => {
    results.push(r);
    if (!values.json) {
      process.stdout.write(`${r.status.padEnd(4)} ${r.name}: ${r.detail}\n`);
      if (r.fix) process.stdout.write(`     fix: ${r.fix}\n`);
    }
  };
  const docker = await dockerChecks(env);
  for (const check of docker) report(check);
  // The sandbox image's own store tells a public CA from one of this organisation's.
  const imageStarts = docker.some((c) => c.name === 'sandbox image' && c.status !== 'FAIL');
  const imageStore = imageStarts ? await readImageCaStore(createDockerClient(), env) : undefined;
  report(extraCaCheck(env, { env: process.env, imageStore }));
  report(env.REDIS_URL ? await redisCheck(env.REDIS_URL) : await privateRedisCheck(env));
  for (const check of await modelChecks(env)) report(check);
  for (const check of await githubAppChecks(env)) report(check);
  if (values.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  return results.some((r) => r.status === 'FAIL') ? 1 : 0;
}

export async function dockerChecks(env: Env): Promise<CheckResult[]> {
  const docker = createDockerClient();
  const out: CheckResult[] = [];
  try {
    const version = await docker.version();
    out.push(ok('docker engine', `Docker ${version.Version} (API ${version.ApiVersion})${env.DOCKER_HOST ? ` at ${env.DOCKER_HOST}` : ''}`));
  } catch (err) {
    out.push(
      fail('docker engine', `not reachable: ${(err as Error).message}`, 'start the Docker engine (`dockerd &` or `systemctl start docker`), or set DOCKER_HOST'),
    );
    return out;
  }
  // The runtime sandboxes run under (LILYPAD_SANDBOX_RUNTIME); bound to the client, so the sandbox
  // check below starts its container under it.
  const runtime = await sandboxRuntimeCheck(docker, env);
  out.push(runtime);
  if (runtime.status === 'FAIL') return out;
  const pidsCheck = gvisorPidsCheck({
    gvisor: isGvisor(docker, sandboxRuntimeOf(docker)),
    pids: env.LILYPAD_SANDBOX_PIDS,
    concurrency: env.LILYPAD_WORKER_CONCURRENCY,
    pidMax: readPidMax(),
  });
  if (pidsCheck) out.push(pidsCheck);
  const image = env.LILYPAD_SANDBOX_IMAGE;
  try {
    await docker.getImage(image).inspect();
  } catch {
    out.push(fail('sandbox image', `${image} is not present`, 'build it with `npm run images`, or set LILYPAD_SANDBOX_IMAGE to an image you have'));
    return out;
  }
  let sandbox: Sandbox | undefined;
  try {
    sandbox = await Sandbox.create(docker, {
      image,
      workdir: env.LILYPAD_SANDBOX_WORKDIR,
      user: env.LILYPAD_SANDBOX_USER,
      memoryMb: 512,
      cpus: 1,
      pids: 128,
      network: 'none',
      runId: `doctor-${process.pid}-${Date.now()}`,
      workerId: os.hostname(),
    });
    const probe = await sandbox.exec(['/bin/bash', '-lc', 'id -u; python3 --version 2>&1; git --version']);
    const [uid, python, gitVersion] = probe.stdout.toString().trim().split('\n');
    const detail = `${image}: uid ${uid}, ${python}, ${gitVersion}, hardened (no network, no capabilities)`;
    out.push(uid === '0' ? warn('sandbox image', detail, 'run the agent as a non-root user: add a USER to the image or set LILYPAD_SANDBOX_USER') : ok('sandbox image', detail));
    out.push(await fileListingCheck(sandbox));
  } catch (err) {
    out.push(fail('sandbox image', `${image} does not start as a sandbox: ${(err as Error).message}`, 'rebuild it with `npm run images`'));
  } finally {
    await sandbox?.destroy();
  }
  return out;
}

/**
 * Whether `ls -l` and `stat` work in a sandbox: the model uses them all the time, and some gVisor
 * releases (Debian 12's runsc among them) refuse the statx flags coreutils passes, so every one
 * fails with "Invalid argument" while the run goes on.
 */
async function fileListingCheck(sandbox: Sandbox): Promise<CheckResult> {
  const res = await sandbox.exec(['/bin/sh', '-c', 'ls -ld / && stat -c %U /'], { timeoutSeconds: 30 });
  if (res.exitCode === 0) return ok('file listing', '`ls -l` and `stat` work in the sandbox');
  const why = res.stderr.toString('utf8').trim().split('\n')[0] ?? `exit ${res.exitCode}`;
  return warn(
    'file listing',
    `\`ls -l\` fails in the sandbox (${why}): the model sees that error on every listing`,
    `the sandbox runtime refuses coreutils' statx; use a newer gVisor (runsc) release, or runc (unset ${RUNTIME_VAR})`,
  );
}

/** With REDIS_URL unset, the Redis `lilypad start` would run of its own (src/cli/private-redis.ts). */
async function privateRedisCheck(env: Env): Promise<CheckResult> {
  const plan = await describePrivateRedis(env.LILYPAD_DATA_DIR, createDockerClient(), env.LILYPAD_REDIS_IMAGE);
  return plan.ok ? ok('redis', plan.detail) : fail('redis', plan.detail, 'install Redis (apt-get install redis-server), build the image (npm run images), or set REDIS_URL');
}

/** Redis at `url`; the URL is printed without its password (userinfo or `password=`). */
export async function redisCheck(url: string): Promise<CheckResult> {
  const shown = urlForDisplay(url);
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 3000, retryStrategy: () => null });
  try {
    await redis.connect();
    const info = await redis.info('server');
    const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
    const policy = ((await redis.config('GET', 'maxmemory-policy')) as string[])[1];
    if (policy !== 'noeviction') {
      return warn('redis', `Redis ${version} at ${shown} uses maxmemory-policy ${policy}`, 'set maxmemory-policy noeviction so queued jobs are never evicted');
    }
    return ok('redis', `Redis ${version}, maxmemory-policy noeviction`);
  } catch (err) {
    return fail('redis', `cannot reach ${shown}: ${(err as Error).message}`, 'start Redis or fix REDIS_URL');
  } finally {
    redis.disconnect();
  }
}

export async function modelChecks(env: Env): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  const base = env.OPENAI_BASE_URL.replace(/\/+$/, '');
  const client = new ModelClient({ baseURL: base, apiKey: env.OPENAI_API_KEY, timeoutMs: 60_000, maxRetries: 0, maxResponseBytes: env.LILYPAD_MODEL_MAX_RESPONSE_MB * 1024 * 1024 });
  let models: Array<{ id: string; max_model_len?: number }>;
  try {
    models = await client.listModels();
  } catch (err) {
    out.push(fail('model endpoint', `GET ${base}/models failed: ${(err as Error).message}`, 'start SGLang or vLLM and set OPENAI_BASE_URL (ending in /v1)'));
    return out;
  }
  const model = env.LILYPAD_MODEL ?? models[0]?.id;
  const listed = models.find((m) => m.id === model);
  if (!model) {
    out.push(fail('model endpoint', `${base} lists no models`, 'check the server was started with a model'));
    return out;
  }
  out.push(
    listed
      ? ok('model endpoint', `${base} serves ${model}`)
      : warn('model endpoint', `${model} is not among ${models.map((m) => m.id).join(', ')}`, 'set LILYPAD_MODEL to a served model id'),
  );

  // SGLang reports its launch arguments; vLLM does not have this endpoint.
  const origin = base.replace(/\/v1$/, '');
  let contextLength = listed?.max_model_len;
  try {
    const res = await fetch(`${origin}/get_server_info`, {
      headers: env.OPENAI_API_KEY ? { authorization: `Bearer ${env.OPENAI_API_KEY}` } : {},
      signal: AbortSignal.timeout(10_000),
    });
    if (res.ok) {
      const info = (await res.json()) as { tool_call_parser?: string | null; reasoning_parser?: string | null; context_length?: number };
      contextLength = info.context_length ?? contextLength;
      out.push(
        info.tool_call_parser === 'qwen3_coder'
          ? ok('tool-call parser', 'SGLang --tool-call-parser qwen3_coder')
          : fail('tool-call parser', `SGLang runs with tool_call_parser=${info.tool_call_parser ?? 'none'}`, 'restart SGLang with --tool-call-parser qwen3_coder'),
      );
      out.push(
        info.reasoning_parser === 'qwen3'
          ? ok('reasoning parser', 'SGLang --reasoning-parser qwen3')
          : fail('reasoning parser', `SGLang runs with reasoning_parser=${info.reasoning_parser ?? 'none'}`, 'restart SGLang with --reasoning-parser qwen3'),
      );
    }
  } catch {
    /* not SGLang, or no such endpoint: the canary below still proves the path */
  }
  if (typeof contextLength === 'number') {
    out.push(
      contextLength >= env.LILYPAD_MAX_CONTEXT_TOKENS
        ? ok('context length', `server ${contextLength} tokens >= budget ${env.LILYPAD_MAX_CONTEXT_TOKENS}`)
        : warn(
            'context length',
            `server context ${contextLength} tokens is below the ${env.LILYPAD_MAX_CONTEXT_TOKENS}-token budget`,
            `serve with --context-length ${env.LILYPAD_MAX_CONTEXT_TOKENS} (vLLM: --max-model-len) or lower LILYPAD_MAX_CONTEXT_TOKENS`,
          ),
    );
  } else {
    out.push(warn('context length', 'the server did not report its context length', 'make sure it serves at least 131072 tokens'));
  }
  out.push(await canary(client, model, env));
  return out;
}

async function canary(client: ModelClient, model: string, env: Env): Promise<CheckResult> {
  const glob = LEAF_TOOLS.find((t) => t.function.name === 'Glob')!;
  try {
    const outcome = await client.complete(
      {
        model,
        messages: [{ role: 'user', content: 'Call the Glob tool with pattern "**/*.py". Do not answer in text.' }],
        tools: [glob],
        tool_choice: 'auto',
        temperature: 0,
        max_completion_tokens: Math.min(2048, env.LILYPAD_MAX_TOKENS_PER_TURN),
        chat_template_kwargs: { enable_thinking: true },
      },
      AbortSignal.timeout(120_000),
      () => {},
    );
    if (outcome.kind !== 'ok') return fail('canary tool call', `rejected: ${outcome.message}`, 'check the served context length');
    const turn = interpretResponse(outcome.completion, [glob.function as never]);
    const native = (outcome.completion.choices[0]?.message.tool_calls ?? []).length > 0;
    if (native) return ok('canary tool call', `came back as a structured tool call (${turn.calls[0]?.function.name})`);
    if (turn.rescued) return fail('canary tool call', 'the tool call came back as text in content', `${turn.warnings.join('; ')}`);
    return warn('canary tool call', `no tool call in the reply (finish_reason ${turn.finishReason})`, 'check the tool-call parser flags; the model may also just have answered in text');
  } catch (err) {
    return fail('canary tool call', (err as Error).message, 'check the server log');
  }
}

/** This machine's kernel.pid_max (the engine's when it runs here), or undefined when unreadable. */
function readPidMax(): number | undefined {
  try {
    const n = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}
