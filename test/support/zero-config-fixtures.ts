/**
 * Repositories nobody configured, one per ecosystem (test/fixtures/zero-config/), each with a bug
 * an existing test catches, and the scripted model's fix for it: the code fixed and a new test
 * that shows the bug. Shared by the zero-config end-to-end tests and the first-request bench.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ScriptedReply } from './model-server.ts';
import { npmProject, packNpmPackage, type NpmPackage } from './npm-registry.ts';

export const ZERO_CONFIG_FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/zero-config');

/** Every file under a fixture folder, by path relative to it. */
export function fixtureFiles(name: string): Record<string, string> {
  const root = path.join(ZERO_CONFIG_FIXTURES, name);
  const out: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir).sort()) {
      const full = path.join(dir, entry);
      if (statSync(full).isDirectory()) walk(full);
      else out[path.relative(root, full)] = readFileSync(full, 'utf8');
    }
  };
  walk(root);
  return out;
}

/** The padding library the Node fixture depends on, as the test registry serves it. */
export function lpPad(version = '1.0.0'): NpmPackage {
  return packNpmPackage({ name: 'lp-pad', version, files: { 'index.js': readFileSync(path.join(ZERO_CONFIG_FIXTURES, 'npm-packages/lp-pad/index.js'), 'utf8') } });
}

/** The Node fixture with its package.json and lockfile for `deps` (from the test registry). */
export function nodeRepoFiles(deps: NpmPackage[]): Record<string, string> {
  return { ...fixtureFiles('node'), ...npmProject({ name: 'price-column', version: '2.1.0', scripts: { test: 'node --test' } }, deps) };
}

const bash = (command: string) => ({ name: 'Bash', arguments: { command } });
const edit = (file_path: string, old_string: string, new_string: string) => ({ name: 'Edit', arguments: { file_path, old_string, new_string } });
const write = (file_path: string, content: string) => ({ name: 'Write', arguments: { file_path, content } });

export interface ZeroConfigCase {
  /** The fixture folder (test/fixtures/zero-config/<fixture>). */
  fixture: string;
  title: string;
  body: string;
  /** The model: look, fix the code, add a test, answer. */
  script: ScriptedReply[];
  /** The file the fix changes and the test file the model adds. */
  fixFile: string;
  newTestFile: string;
  /** Text only the fixed code has, and text only the new test has (both must be in patch.diff). */
  fixText: string;
  newTestText: string;
}

export const PYTHON_CASE: ZeroConfigCase = {
  fixture: 'python',
  title: 'count_words counts empty words between repeated spaces',
  body: 'count_words("one  two") returns 3.',
  script: [
    { toolCalls: [bash('python -m pytest -q 2>&1 | tail -3')] },
    {
      toolCalls: [
        edit('src/wordcount/core.py', 'return len(text.split(" "))', 'return len(text.split())'),
        write('tests/test_whitespace.py', 'from wordcount import count_words\n\n\ndef test_tabs_and_newlines_separate_words():\n    assert count_words("one\\ttwo\\nthree") == 3\n'),
      ],
    },
    { content: 'count_words splits on any whitespace now; added a test for tabs and newlines.' },
  ],
  fixFile: 'src/wordcount/core.py',
  newTestFile: 'tests/test_whitespace.py',
  fixText: '+    return len(text.split())',
  newTestText: '+def test_tabs_and_newlines_separate_words():',
};

export const NODE_CASE: ZeroConfigCase = {
  fixture: 'node',
  title: 'priceColumn drops the zero of single-digit cents',
  body: 'priceColumn(1205) shows 12.5 instead of 12.05.',
  script: [
    { toolCalls: [bash('npm test 2>&1 | tail -5')] },
    {
      toolCalls: [
        edit('index.js', 'return padStart(`${whole}.${rest}`, width);', "return padStart(`${whole}.${String(rest).padStart(2, '0')}`, width);"),
        write('test/cents.test.js', "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\nconst { priceColumn } = require('../index.js');\n\ntest('one cent keeps both zeros', () => {\n  assert.equal(priceColumn(1, 6), '  0.01');\n});\n"),
      ],
    },
    { content: 'Cents are always two digits now; added a test for one cent.' },
  ],
  fixFile: 'index.js',
  newTestFile: 'test/cents.test.js',
  fixText: "String(rest).padStart(2, '0')",
  newTestText: "+test('one cent keeps both zeros'",
};

export const RUST_CASE: ZeroConfigCase = {
  fixture: 'rust',
  title: 'to_roman writes 90 as LXXXX',
  body: 'to_roman(90) should be XC; 40, 400 and 900 are wrong too.',
  script: [
    { toolCalls: [bash('cargo test --offline 2>&1 | tail -5')] },
    {
      toolCalls: [
        edit('src/lib.rs', 'const NUMERALS: [(u32, &str); 9] = [\n    (1000, "M"),\n    (500, "D"),\n    (100, "C"),\n    (50, "L"),\n    (10, "X"),', 'const NUMERALS: [(u32, &str); 13] = [\n    (1000, "M"),\n    (900, "CM"),\n    (500, "D"),\n    (400, "CD"),\n    (100, "C"),\n    (90, "XC"),\n    (50, "L"),\n    (40, "XL"),\n    (10, "X"),'),
        write('tests/subtractive.rs', 'use roman::to_roman;\n\n#[test]\nfn forty_is_xl() {\n    assert_eq!(to_roman(40), "XL");\n}\n'),
      ],
    },
    { content: 'Added the subtractive numerals (CM, CD, XC, XL) and a test for 40.' },
  ],
  fixFile: 'src/lib.rs',
  newTestFile: 'tests/subtractive.rs',
  fixText: '+    (90, "XC"),',
  newTestText: '+fn forty_is_xl() {',
};

export const GO_CASE: ZeroConfigCase = {
  fixture: 'go',
  title: 'Wrap breaks a line that fits exactly',
  body: 'Wrap("aaa bbb", 7) gives two lines; the line is 7 characters and fits.',
  script: [
    { toolCalls: [bash('go test ./... 2>&1 | tail -5')] },
    {
      toolCalls: [
        edit('wrap.go', 'len(line)+1+len(word) >= width', 'len(line)+1+len(word) > width'),
        write('fit_test.go', 'package wordwrap\n\nimport "testing"\n\nfunc TestTwoShortWordsFit(t *testing.T) {\n\tif got := Wrap("ab cd", 5); len(got) != 1 {\n\t\tt.Fatalf("Wrap(\\"ab cd\\", 5) = %q, want one line", got)\n\t}\n}\n'),
      ],
    },
    { content: 'A word that ends exactly at the width stays on the line; added a test.' },
  ],
  fixFile: 'wrap.go',
  newTestFile: 'fit_test.go',
  fixText: '+\t\tif line != "" && len(line)+1+len(word) > width {',
  newTestText: '+func TestTwoShortWordsFit(t *testing.T) {',
};

export const JAVA_CASE: ZeroConfigCase = {
  fixture: 'java',
  title: 'Slug.of keeps every dash',
  body: 'Slug.of("Rock & Roll") is "rock---roll"; it should be "rock-roll".',
  script: [
    { toolCalls: [bash('ls src/main/java/dev/lilypad/slug')] },
    {
      toolCalls: [
        edit('src/main/java/dev/lilypad/slug/Slug.java', 'replaceAll("[^a-z0-9]", "-");', 'replaceAll("[^a-z0-9]+", "-").replaceAll("^-|-$", "");'),
        write(
          'src/test/java/dev/lilypad/slug/SlugEdgesTest.java',
          'package dev.lilypad.slug;\n\nimport static org.junit.jupiter.api.Assertions.assertEquals;\n\nimport org.junit.jupiter.api.Test;\n\nclass SlugEdgesTest {\n    @Test\n    void noDashAtTheEnds() {\n        assertEquals("why-not", Slug.of("Why not?"));\n    }\n}\n',
        ),
      ],
    },
    { content: 'Runs of other characters become one dash, and none is left at the ends; added a test.' },
  ],
  fixFile: 'src/main/java/dev/lilypad/slug/Slug.java',
  newTestFile: 'src/test/java/dev/lilypad/slug/SlugEdgesTest.java',
  fixText: '+        return title.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]+", "-").replaceAll("^-|-$", "");',
  newTestText: '+    void noDashAtTheEnds() {',
};
