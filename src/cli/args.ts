import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from '../shared/usage-error.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

const hint = (command: string) => `see \`${command} --help\``;

/**
 * node:util parseArgs (strict) for a subcommand, whose mistakes become one-line UsageErrors that
 * name the option and point at `<command> --help`, instead of an ERR_PARSE_ARGS_* stack trace.
 */
export function parseCommandArgs<const O extends Options>(command: string, { args, options }: { args: string[]; options: O }) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (!code.startsWith('ERR_PARSE_ARGS_')) throw err;
    throw new UsageError(`${diagnose(args, options) ?? firstSentence((err as Error).message)}; ${hint(command)}`, { command });
  }
}

/**
 * The first mistake in `args`, said in our words. Node's messages differ between releases and
 * suggest `--` tricks that do not apply here, so the tokens are re-read leniently and checked one by one.
 */
function diagnose(args: string[], options: Options): string | undefined {
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
  for (const t of tokens) {
    if (t.kind === 'positional') return `unexpected argument "${t.value}" (this command takes options only)`;
    if (t.kind !== 'option') continue;
    const spec = options[t.name];
    if (!spec) return `unknown option ${t.rawName}`;
    if (spec.type === 'boolean' && t.value !== undefined) return `${t.rawName} takes no value (got "${t.value}")`;
    if (spec.type === 'string') {
      if (t.value === undefined) return `${t.rawName} needs a value`;
      // strict mode refuses `--repo --title x`: the "value" is most likely the next option.
      if (!t.inlineValue && t.value.startsWith('-')) return `${t.rawName} needs a value (got the option "${t.value}"; write ${t.rawName}=${t.value} if that is the value)`;
    }
  }
  return undefined;
}

const firstSentence = (message: string) => message.split(/\.\s/)[0]!.replace(/\.$/, '');

/**
 * A positive whole number given on the command line, or undefined when the option was not given;
 * anything else ("abc", "1.5", "0", "1e3") is a usage error naming the option.
 */
export function positiveInt(command: string, name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = /^[1-9]\d*$/.test(raw.trim()) ? Number(raw.trim()) : NaN;
  if (!Number.isSafeInteger(n)) throw new UsageError(`${name} must be a positive whole number, got "${raw}"; ${hint(command)}`, { command });
  return n;
}

/** An http(s) base URL such as http://127.0.0.1:30000/v1, given on the command line. */
export function httpUrl(command: string, name: string, raw: string): string {
  if (!/^https?:\/\/[^/]+/.test(raw)) throw new UsageError(`${name} must be an http(s) URL such as http://127.0.0.1:30000/v1, got "${raw}"; ${hint(command)}`, { command });
  return raw;
}
