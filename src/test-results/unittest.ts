import { OutcomeMap, type TestCaseOutcome } from './types.ts';

/** unittest ids as SWE-bench writes them for Django, `test_x (pkg.mod.Class)`, become `pkg.mod.Class.test_x`. */
export function normaliseUnittestId(id: string): string {
  const m = /^(\S+) \(([\w.]+)\)$/.exec(id.trim());
  if (!m) return id.trim();
  const [, name, where] = m;
  return where!.endsWith(`.${name}`) ? where! : `${where}.${name}`;
}

const RESULT_WORD = /^(ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$/;

function outcomeOf(word: string): TestCaseOutcome {
  if (word === 'ok' || word === 'expected failure') return 'passed';
  if (word.startsWith('skipped')) return 'skipped';
  return word === 'ERROR' ? 'error' : 'failed';
}

/** `python -m unittest -v` (and Django's `manage.py test -v 2`); ids are dotted `module.Class.test`. */
export function parseUnittest(text: string): OutcomeMap {
  const map = new OutcomeMap();
  const lines = text.split('\n');
  // "test_add (test_calc.AddTest.test_add) ... ok" (3.11+), "test_add (test_calc.AddTest) ... ok" (older);
  // a docstring puts its first line between the id and " ... ".
  const head = /^(\w+) \(([\w.]+)\)/;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const m = head.exec(line);
    if (m) {
      const id = normaliseUnittestId(`${m[1]} (${m[2]})`);
      let rest = line.slice(m[0].length);
      if (!rest.includes(' ... ') && i + 1 < lines.length && lines[i + 1]!.includes(' ... ')) rest = lines[++i]!;
      const sep = rest.lastIndexOf(' ... ');
      if (sep >= 0) {
        const word = rest.slice(sep + 5).trim();
        if (RESULT_WORD.test(word)) map.record(id, outcomeOf(word));
      }
      continue;
    }
    // The failure listing after the run; it also names tests whose " ... " line other output broke up.
    const failure = /^(FAIL|ERROR): (\w+) \(([\w.]+)\)/.exec(line);
    if (failure) map.record(normaliseUnittestId(`${failure[2]} (${failure[3]})`), failure[1] === 'ERROR' ? 'error' : 'failed');
  }
  return map;
}
