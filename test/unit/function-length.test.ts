import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

/** The spine and its phases read as short named steps: no function in src/pipeline/ is over this. */
const MAX_LINES = 80;
const ROOT = path.resolve(import.meta.dirname, '../../src/pipeline');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

function longFunctions(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      const name = 'name' in node && node.name ? node.name.getText(source) : '(anonymous)';
      if (lines > MAX_LINES) found.push(`${path.relative(ROOT, file)}:${start + 1} ${name} is ${lines} lines`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

test(`no function in src/pipeline/ is over ${MAX_LINES} lines`, () => {
  const long = files(ROOT).flatMap(longFunctions);
  assert.deepEqual(long, []);
});
