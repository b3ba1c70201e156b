import { z } from 'zod';
import { OutcomeMap, type TestCaseOutcome } from './types.ts';

const goEvent = z.object({
  Action: z.string(),
  Package: z.string().optional(),
  Test: z.string().optional(),
});

const GO_OUTCOME: Record<string, TestCaseOutcome> = { pass: 'passed', fail: 'failed', skip: 'skipped' };

export function looksLikeGoJson(text: string): boolean {
  return /^\{"Time":"[^"]*","Action":"/m.test(text) || /^\{"Action":"/m.test(text);
}

/**
 * `go test -json`: ids are `package::TestName` (subtests `TestName/case`). A package that
 * failed without any test result (it did not build) is reported as `package` with `error`.
 */
export function parseGoJson(text: string): OutcomeMap {
  const map = new OutcomeMap();
  const packagesWithTests = new Set<string>();
  const failedPackages: string[] = [];
  for (const line of text.split('\n')) {
    // Before go 1.24 a package that did not build is only a text line among the events.
    const unbuilt = /^FAIL\s+(\S+)\s+\[(?:build|setup) failed\]/.exec(line);
    if (unbuilt) failedPackages.push(unbuilt[1]!);
    if (!line.startsWith('{')) continue;
    let event: z.infer<typeof goEvent>;
    try {
      const parsed = goEvent.safeParse(JSON.parse(line));
      if (!parsed.success) continue;
      event = parsed.data;
    } catch {
      continue;
    }
    const outcome = GO_OUTCOME[event.Action];
    if (!outcome) continue;
    const pkg = event.Package ?? '';
    if (event.Test) {
      packagesWithTests.add(pkg);
      map.record(`${pkg}::${event.Test}`, outcome);
    } else if (outcome === 'failed') failedPackages.push(pkg);
  }
  for (const pkg of failedPackages) if (!packagesWithTests.has(pkg)) map.record(pkg, 'error');
  return map;
}

/**
 * `go test -v` text: `--- PASS: TestX (0.00s)` lines, named by the package of the `ok`/`FAIL`
 * line that closes them (`package::TestX`), or by the test name alone where none follows.
 */
export function parseGoText(text: string): OutcomeMap {
  const map = new OutcomeMap();
  let pending: Array<[string, TestCaseOutcome]> = [];
  const flush = (pkg: string | null) => {
    for (const [name, outcome] of pending) map.record(pkg ? `${pkg}::${name}` : name, outcome);
    pending = [];
  };
  for (const line of text.split('\n')) {
    const t = /^\s*--- (PASS|FAIL|SKIP): (\S+)/.exec(line);
    if (t) {
      pending.push([t[2]!, t[1] === 'PASS' ? 'passed' : t[1] === 'FAIL' ? 'failed' : 'skipped']);
      continue;
    }
    const end = /^(ok|FAIL)\s+(\S+)\s+(?:[\d.]+s|\(cached\)|\[)/.exec(line);
    if (end) {
      if (pending.length === 0 && end[1] === 'FAIL' && /\[(build failed|setup failed)\]/.test(line)) map.record(end[2]!, 'error');
      flush(end[2]!);
    }
  }
  flush(null);
  return map;
}
