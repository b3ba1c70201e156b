import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { crossFolderImports, layeringProblems } from '../support/layering.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

async function sourceFiles(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const entry of await readdir(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const abs = path.join(entry.parentPath, entry.name);
    files.set(path.relative(ROOT, abs).split(path.sep).join('/'), await readFile(abs, 'utf8'));
  }
  return files;
}

test('no file in src/ imports against the data flow, and no two folders import each other', async () => {
  const files = await sourceFiles();
  assert.ok(files.size > 100, `read ${files.size} files under src/`);
  assert.deepEqual(layeringProblems(files), []);
});

test('nothing below the pipeline imports pipeline/, cli/, web/ or eval/', async () => {
  const upward = [...(await sourceFiles())].flatMap(([file, text]) =>
    crossFolderImports(file, text)
      .filter((imp) => ['pipeline', 'cli', 'web', 'eval'].includes(imp.to) && !['cli', 'web', 'eval', 'pipeline'].includes(imp.from))
      .map((imp) => `${imp.file}:${imp.line} → ${imp.specifier}`),
  );
  assert.deepEqual(upward, []);
});

test('an import up the flow is reported with the file, the line and what to do', () => {
  const problems = layeringProblems(
    new Map([
      ['src/github/webhooks.ts', "import { a } from './client.ts';\nimport type { RunJob } from '../pipeline/job.ts';\n"],
      ['src/pipeline/job.ts', "export type RunJob = { id: string };\n"],
      ['src/github/client.ts', 'export const a = 1;\n'],
    ]),
  );
  assert.equal(problems.length, 1);
  assert.match(problems[0]!, /^src\/github\/webhooks\.ts:2 imports '\.\.\/pipeline\/job\.ts': github\/ may not import from pipeline\/, which is above it/);
  assert.match(problems[0]!, /move what both need down/);
});

test('dynamic imports, re-exports and multi-line imports count; comments and packages do not', () => {
  const text = [
    "import {",
    "  x,",
    "} from '../cli/args.ts';",
    "export { y } from '../web/html.ts';",
    "const z = await import('../eval/run.ts');",
    "// see '../cli/main.ts' for why",
    "/* import { w } from '../cli/w.ts'; */",
    "import { Queue } from 'bullmq';",
    "import '../pipeline/side-effect.ts';",
  ].join('\n');
  const found = crossFolderImports('src/store/q.ts', text).map((imp) => `${imp.line} ${imp.to}`);
  assert.deepEqual(found, ['1 cli', '4 web', '5 eval', '9 pipeline']);
});

test('two folders of one level that import each other are a cycle', () => {
  const problems = layeringProblems(
    new Map([
      ['src/store/a.ts', "import type { L } from '../observability/l.ts';\n"],
      ['src/observability/l.ts', "import { keys } from '../store/a.ts';\nexport type L = 1;\n"],
    ]),
  );
  assert.equal(problems.length, 1);
  assert.match(problems[0]!, /^folders import each other in a cycle: observability → store → observability \(src\/observability\/l\.ts:1, src\/store\/a\.ts:1\)/);
});

test('a file in a folder the flow does not place is reported', () => {
  const problems = layeringProblems(new Map([['src/queue/worker.ts', ''], ['src/index.ts', '']]));
  assert.equal(problems.length, 2);
  assert.match(problems[0]!, /src\/queue\/worker\.ts is in src\/queue\/, which the data flow does not place/);
  assert.match(problems[1]!, /src\/index\.ts is in src\/ itself/);
});
