import { UsageError } from '../shared/usage-error.ts';

/**
 * What one attempt costs. Self-hosted: GPU time priced by the hour; hosted: tokens priced per
 * million. The formulas are documented in README.md ("Evaluating on your own issues") and printed in every report.
 */
export type CostModel =
  | { kind: 'gpu_hour'; gpuHourCost: number }
  | { kind: 'tokens'; inputCost: number; outputCost: number }
  | { kind: 'none' };

export interface EndpointSpec {
  name: string;
  baseURL: string;
  model?: string;
  /** Environment variable holding this endpoint's API key (default OPENAI_API_KEY). */
  apiKeyEnv?: string;
  cost: CostModel;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** `NAME=URL[,model=M][,gpu_hour_cost=X | ,input_cost=X,output_cost=Y][,api_key_env=VAR]` */
export function parseEndpoint(spec: string): EndpointSpec {
  const eq = spec.indexOf('=');
  const example = 'e.g. --endpoint local=http://127.0.0.1:30000/v1,model=frognano-4b,gpu_hour_cost=2.5';
  if (eq <= 0) throw new UsageError(`--endpoint "${spec}": expected NAME=URL[,key=value…]; ${example}`);
  const name = spec.slice(0, eq);
  if (!NAME.test(name)) throw new UsageError(`--endpoint "${spec}": the name "${name}" may hold letters, digits, ".", "_" and "-" only (it names a directory)`);
  const [url = '', ...pairs] = spec.slice(eq + 1).split(',');
  if (!/^https?:\/\/[^/]+/.test(url)) throw new UsageError(`--endpoint ${name}: "${url}" is not an http(s) URL; ${example}`);
  const options = new Map<string, string>();
  for (const pair of pairs) {
    const i = pair.indexOf('=');
    const key = i < 0 ? pair : pair.slice(0, i);
    if (i < 0 || !['model', 'gpu_hour_cost', 'input_cost', 'output_cost', 'api_key_env'].includes(key)) {
      throw new UsageError(`--endpoint ${name}: unknown option "${pair}"; accepted: model=M, gpu_hour_cost=X, input_cost=X, output_cost=Y, api_key_env=VAR`);
    }
    if (options.has(key)) throw new UsageError(`--endpoint ${name}: ${key} given twice`);
    options.set(key, pair.slice(i + 1));
  }
  const money = (key: string): number | undefined => {
    const raw = options.get(key);
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n) || n < 0) throw new UsageError(`--endpoint ${name}: ${key} must be a number of zero or more, got "${raw}"`);
    return n;
  };
  const gpu = money('gpu_hour_cost');
  const input = money('input_cost');
  const output = money('output_cost');
  let cost: CostModel = { kind: 'none' };
  if (gpu !== undefined && (input !== undefined || output !== undefined)) {
    throw new UsageError(`--endpoint ${name}: give either gpu_hour_cost (self-hosted) or input_cost and output_cost (per million tokens), not both`);
  }
  if (gpu !== undefined) cost = { kind: 'gpu_hour', gpuHourCost: gpu };
  else if (input !== undefined || output !== undefined) {
    if (input === undefined || output === undefined) throw new UsageError(`--endpoint ${name}: token pricing needs both input_cost and output_cost (per million tokens)`);
    cost = { kind: 'tokens', inputCost: input, outputCost: output };
  }
  const model = options.get('model');
  const keyEnv = options.get('api_key_env');
  if (keyEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(keyEnv)) throw new UsageError(`--endpoint ${name}: api_key_env must be an environment variable name`);
  return { name, baseURL: url.replace(/\/+$/, ''), ...(model ? { model } : {}), ...(keyEnv ? { apiKeyEnv: keyEnv } : {}), cost };
}

export interface AttemptUsage {
  promptTokens: number;
  completionTokens: number;
  /** Seconds the model server spent answering this attempt's requests (sum over its model calls). */
  modelSeconds: number;
}

/**
 * Cost of one attempt.
 * - gpu_hour: GPU-seconds = the time the endpoint spent answering the attempt's requests;
 *   cost = GPU-seconds / 3600 × gpu_hour_cost. Requests that overlapped on one server are each
 *   counted in full, so with --workers > 1 this is an upper bound for a single-GPU server.
 * - tokens: cost = prompt_tokens / 1e6 × input_cost + completion_tokens / 1e6 × output_cost.
 */
export function attemptCost(cost: CostModel, usage: AttemptUsage): number | null {
  switch (cost.kind) {
    case 'gpu_hour':
      return (usage.modelSeconds / 3600) * cost.gpuHourCost;
    case 'tokens':
      return (usage.promptTokens / 1e6) * cost.inputCost + (usage.completionTokens / 1e6) * cost.outputCost;
    case 'none':
      return null;
  }
}

export function describeCost(cost: CostModel): string {
  switch (cost.kind) {
    case 'gpu_hour':
      return `GPU-seconds / 3600 × ${cost.gpuHourCost} per GPU-hour`;
    case 'tokens':
      return `prompt tokens / 1e6 × ${cost.inputCost} + completion tokens / 1e6 × ${cost.outputCost}`;
    case 'none':
      return 'no price given';
  }
}
