import { OutcomeMap, type TestCaseOutcome } from './types.ts';

const XML_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
const unescapeXml = (s: string) =>
  s.replace(/&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);/g, (_, e: string) => XML_ENTITIES[e] ?? String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)));

export interface JUnitCase {
  classname: string | undefined;
  name: string;
  /** Names of the enclosing named <testsuite>s (node's describe() blocks), outermost first. */
  suites: string[];
  outcome: TestCaseOutcome;
}

/**
 * Every <testcase> in JUnit XML: Maven Surefire and Gradle report files, pytest --junitxml,
 * node --test-reporter=junit, jest-junit. Several documents may follow one another (report files
 * printed one after another into the output).
 */
export function junitCases(text: string): JUnitCase[] {
  const out: JUnitCase[] = [];
  if (!text.includes('<testcase')) return out;
  const attrOf = (attrs: string, name: string) => {
    const a = new RegExp(`\\b${name}="([^"]*)"`).exec(attrs);
    return a ? unescapeXml(a[1]!) : undefined;
  };
  const suites: string[] = [];
  const re = /<testsuite\b([^>]*?)(\/?)>|<\/testsuite>|<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g;
  for (const m of text.matchAll(re)) {
    if (m[0].startsWith('</testsuite')) {
      suites.pop();
      continue;
    }
    if (m[0].startsWith('<testsuite')) {
      if (m[2] !== '/') suites.push(attrOf(m[1]!, 'name') ?? '');
      continue;
    }
    const attrs = m[3]!;
    const name = attrOf(attrs, 'name');
    if (!name) continue;
    const body = m[5] ?? '';
    // Surefire's <flakyFailure>/<rerunFailure> are earlier tries; only <failure>/<error> decide.
    const outcome: TestCaseOutcome = /<error\b/.test(body) ? 'error' : /<failure\b/.test(body) ? 'failed' : /<skipped\b/.test(body) ? 'skipped' : 'passed';
    out.push({ classname: attrOf(attrs, 'classname'), name, suites: suites.filter(Boolean), outcome });
  }
  return out;
}

/**
 * One id per case: `classname.name` (Surefire's `com.x.CalcTest.adds`, pytest's dotted path),
 * or, without a classname (node's reporter), the describe() path as `suite > test`.
 */
export function parseJUnit(text: string): OutcomeMap {
  const map = new OutcomeMap();
  for (const c of junitCases(text)) map.record(junitId(c), c.outcome);
  return map;
}

export function junitId(c: JUnitCase): string {
  // node's reporter writes classname="test" for every case: its ids are the describe() path, as in TAP.
  if (!c.classname || c.classname === 'test') return [...c.suites, c.name].join(' > ');
  // jest-junit writes the full title (describe names and the test's) as both.
  if (c.classname === c.name) return c.name.trim();
  return `${c.classname}.${c.name}`;
}
