import { z } from 'zod';
import type { TestRunner } from '../test-results/types.ts';
import type { Candidate, RepoView } from './types.ts';

const packageJson = z
  .object({
    scripts: z.record(z.string(), z.unknown()).optional(),
    packageManager: z.string().optional(),
    devDependencies: z.record(z.string(), z.unknown()).optional(),
    dependencies: z.record(z.string(), z.unknown()).optional(),
  })
  .passthrough();

// What `npm init` writes: a test script that only fails.
const PLACEHOLDER = /no test specified/;

/** The runner a test script calls, as far as its text tells. */
export function scriptRunner(script: string): TestRunner {
  if (/\bnode\s+(\S+\s+)*--test\b/.test(script)) return 'node-test';
  if (/\bjest\b/.test(script)) return 'jest';
  if (/\bvitest\b/.test(script)) return 'vitest';
  if (/\bmocha\b/.test(script)) return 'mocha';
  return 'npm';
}

/** The text of a script and of the scripts it runs (`npm run x`, `yarn x`, `pnpm run /^test:/`), for runner detection. */
function expandScript(scripts: Record<string, unknown>, name: string, depth = 0): string {
  const own = scripts[name];
  if (typeof own !== 'string' || depth > 3) return '';
  let text = own;
  for (const m of own.matchAll(/\b(?:npm|pnpm|yarn)\s+(?:run(?:-script)?\s+)?(\/[^/\s]+\/|[\w:.-]+)/g)) {
    const ref = m[1]!;
    const names = ref.startsWith('/') ? Object.keys(scripts).filter((k) => new RegExp(ref.slice(1, -1)).test(k)) : [ref];
    for (const n of names) if (n !== name) text += `\n${expandScript(scripts, n, depth + 1)}`;
  }
  return text;
}

export async function inferNode(repo: RepoView, toolsDir: string): Promise<Candidate> {
  const notes: string[] = [];
  const setupFrom = ['package.json'];
  let pkg: z.infer<typeof packageJson> = {};
  let raw: unknown = {};
  try {
    raw = JSON.parse((await repo.read('package.json')) ?? '{}');
  } catch {
    notes.push('package.json is not valid JSON: its scripts were not read');
  }
  const parsed = packageJson.safeParse(raw);
  if (parsed.success) pkg = parsed.data;
  else notes.push('package.json is not an object of the usual shape: its scripts were not read');

  const pm = /^(npm|yarn|pnpm)@(\d[\w.+-]*)/.exec(pkg.packageManager ?? '');
  // yarn and pnpm are not in the sandbox image: npm installs the version the project pins into a
  // directory outside the checkout, which goes first on PATH (scripts call them by name too).
  const tool = (spec: string) => `npm install -g --no-audit --no-fund --prefix "${toolsDir}" ${spec}`;
  const setup: string[] = [];
  let envPath: string[] = [];
  const withPath = (command: string) => (envPath.length ? `PATH="${envPath.join(':')}:$PATH" ${command}` : command);
  let runScripts = 'npm test';
  if (repo.has('pnpm-lock.yaml') || pm?.[1] === 'pnpm') {
    envPath = [`${toolsDir}/bin`];
    setup.push(tool(`pnpm@${pm?.[1] === 'pnpm' ? pm[2] : '9'}`), withPath(`pnpm install${repo.has('pnpm-lock.yaml') ? ' --frozen-lockfile' : ''}`));
    if (repo.has('pnpm-lock.yaml')) setupFrom.push('pnpm-lock.yaml');
  } else if (repo.has('yarn.lock') || pm?.[1] === 'yarn') {
    const lock = (await repo.read('yarn.lock')) ?? '';
    const berry = /__metadata:/.test(lock) || (pm?.[1] === 'yarn' && !pm[2]!.startsWith('1.'));
    if (repo.has('yarn.lock')) setupFrom.push('yarn.lock');
    if (berry) {
      const yarnrc = (await repo.read('.yarnrc.yml')) ?? '';
      const yarnPath = /^yarnPath:\s*["']?([^"'\s]+)/m.exec(yarnrc)?.[1];
      if (yarnrc) setupFrom.push('.yarnrc.yml');
      // Plug'n'Play (berry's default) leaves no node_modules: only yarn can run the scripts then.
      const pnp = !/^nodeLinker:\s*["']?node-modules/m.test(yarnrc);
      if (yarnPath && repo.has(yarnPath)) {
        setup.push(`node ${yarnPath} install --immutable`);
        if (pnp) runScripts = `node ${yarnPath} test`;
      } else {
        envPath = [`${toolsDir}/bin`];
        setup.push(tool(`@yarnpkg/cli-dist@${pm?.[2] ?? '4'}`), withPath('yarn install --immutable'));
        if (pnp) runScripts = 'yarn test';
      }
    } else {
      envPath = [`${toolsDir}/bin`];
      setup.push(tool(`yarn@${pm?.[1] === 'yarn' ? pm[2] : '1'}`), withPath('yarn install --frozen-lockfile --non-interactive'));
    }
  } else if (repo.has('package-lock.json') || repo.has('npm-shrinkwrap.json')) {
    setup.push('npm ci --no-audit --no-fund');
    setupFrom.push(repo.has('package-lock.json') ? 'package-lock.json' : 'npm-shrinkwrap.json');
  } else {
    setup.push('npm install --no-audit --no-fund');
    notes.push("no lockfile: dependencies are resolved afresh (npm install), so versions may differ from the maintainers'");
  }

  const scripts = pkg.scripts ?? {};
  const testScript = typeof scripts.test === 'string' ? scripts.test : undefined;
  let test: string | null = null;
  let runner: TestRunner | null = null;
  const testFrom: string[] = [];
  if (testScript && !PLACEHOLDER.test(testScript)) {
    // npm runs any package manager's scripts with node_modules/.bin on PATH, and is in the image.
    test = withPath(runScripts);
    runner = scriptRunner(expandScript(scripts, 'test'));
    testFrom.push('package.json');
  } else {
    // No script: node's own runner, where the tests are written for it.
    const candidates = repo.files.filter((f) => /(^|\/)(test|tests)\/.*\.[cm]?js$|\.test\.[cm]?js$/.test(f) && !f.includes('node_modules/')).slice(0, 5);
    let usesNodeTest = false;
    for (const f of candidates) if (/from ['"]node:test['"]|require\(['"]node:test['"]\)/.test((await repo.read(f)) ?? '')) usesNodeTest = true;
    if (usesNodeTest) {
      test = 'node --test';
      runner = 'node-test';
      testFrom.push(candidates[0]!);
    } else notes.push(testScript ? 'package.json\'s test script is npm\'s placeholder ("no test specified"): no test command was inferred' : 'package.json has no test script and no node:test files were found: no test command was inferred');
  }
  return { ecosystem: 'node', setup, setupFrom, test, testFrom, runner, envPath, notes };
}
