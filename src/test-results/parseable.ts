import type { TestRunner } from './types.ts';

/** Where JUnit report files land, for the runners that write them instead of printing results. */
export const JUNIT_REPORTS: Partial<Record<TestRunner, { dir: string; glob: string }>> = {
  maven: { dir: 'target/surefire-reports', glob: '*/target/surefire-reports/TEST-*.xml' },
  gradle: { dir: 'build/test-results', glob: '*/build/test-results/*/TEST-*.xml' },
};

// A command Lilypad may extend in place: one pipeline of words, no other commands around it.
const SHELL_CONTROL = /[;&|`<>()\n]|\$\(/;

/**
 * The test command with what makes its output readable per test: pytest `-rA` (every outcome in
 * the summary), no cache directory in the checkout and the other modules' results when one does not
 * import, unittest `-v`, `go test -json`, node's TAP
 * reporter, jest `--verbose`, cargo's pretty format where `-q` asked for the terse one; Maven and
 * Gradle report files are printed after the run (stale ones removed first) and the exit status
 * is kept. A command this cannot extend safely is returned unchanged.
 */
export function parseableCommand(runner: TestRunner | null, command: string): string {
  switch (runner) {
    case 'pytest':
      // A test module that does not import would otherwise stop the whole run: keep the others' results.
      return insertAfter(command, /(^|\s|\/)(py\.test|pytest)(?=\s|$)/, (has) => [
        ...(has('-rA') || /(^|\s)-r\S*A/.test(command) ? [] : ['-rA']),
        ...(has('no:cacheprovider') ? [] : ['-p', 'no:cacheprovider']),
        ...(has('--continue-on-collection-errors') ? [] : ['--continue-on-collection-errors']),
      ]);
    case 'unittest': {
      // unittest takes the last of -q and -v: a quiet run names no test, so -q gives way to -v.
      if (!SHELL_CONTROL.test(command) && /(^|\s)(-q|--quiet)(?=\s|$)/.test(command)) command = command.replace(/(^|\s)(-q|--quiet)(?=\s|$)/g, '$1-v');
      if (/(^|\s)(-v|--verbose)(\s|$)/.test(command)) return command;
      // `-v` must come after `discover`: unittest reads its first argument as the subcommand.
      if (/\bunittest\s+discover\b/.test(command)) return insertAfter(command, /\bunittest\s+discover(?=\s|$)/, () => ['-v']);
      if (/\bmanage\.py\s+test\b/.test(command)) return /(^|\s)(-v|--verbosity)\b/.test(command) ? command : insertAfter(command, /\bmanage\.py\s+test(?=\s|$)/, () => ['-v', '2']);
      return insertAfter(command, /\bunittest(?=\s|$)/, () => ['-v']);
    }
    case 'go':
      return insertAfter(command, /\bgo\s+test(?=\s|$)/, (has) => (has('-json') ? [] : ['-json']));
    case 'node-test':
      return /--test-reporter\b/.test(command) ? command : insertAfter(command, /\bnode\b(?:\s+[^\s|;&]+)*?\s+--test(?=\s|$)/, () => ['--test-reporter=tap']);
    case 'jest': {
      if (/--verbose\b/.test(command)) return command;
      if (/\bjest(?=\s|$)/.test(command)) return insertAfter(command, /\bjest(?=\s|$)/, () => ['--verbose']);
      // Through the package manager: npm and pnpm pass what follows `--` on to the script.
      if (!SHELL_CONTROL.test(command) && /^(npm|pnpm)\s+(test|run\s+test)(\s|$)/.test(command.trim())) return command.includes(' -- ') ? `${command.trim()} --verbose` : `${command.trim()} -- --verbose`;
      if (!SHELL_CONTROL.test(command) && /^yarn\s+(test|run\s+test)(\s|$)/.test(command.trim())) return `${command.trim()} --verbose`;
      return command;
    }
    case 'cargo': {
      if (SHELL_CONTROL.test(command) || !/(^|\s)(-q|--quiet)(\s|$)/.test(command) || /--format\b/.test(command)) return command;
      return / -- /.test(command) ? command.replace(/ -- /, ' -- --format=pretty ') : `${command.trim()} -- --format=pretty`;
    }
    case 'maven':
    case 'gradle': {
      const reports = JUNIT_REPORTS[runner]!;
      // The reports of an earlier run (the tests before the change) must not be read as this run's.
      const clear = `find . -path './.git' -prune -o -type d -path '*/${reports.dir}' -prune -exec rm -rf {} + 2>/dev/null`;
      const print = `find . -path './.git' -prune -o -type f -path '${reports.glob}' -exec cat {} + 2>/dev/null`;
      return `${clear}; ( ${command}\n); __lilypad_status=$?; ${print}; exit $__lilypad_status`;
    }
    default:
      return command;
  }
}

/**
 * Inserts words right after the runner's name (so flags land before any `&&`, `|` or redirection
 * that may follow); `has` tells whether a flag is there already. Unchanged when the runner's name
 * is not found.
 */
function insertAfter(command: string, at: RegExp, words: (has: (flag: string) => boolean) => string[]): string {
  const m = at.exec(command);
  if (!m) return command;
  const add = words((flag) => command.includes(flag));
  if (add.length === 0) return command;
  const end = m.index + m[0].length;
  return `${command.slice(0, end)} ${add.join(' ')}${command.slice(end)}`;
}
