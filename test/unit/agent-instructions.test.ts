/**
 * The pure parts of repository instructions: which paths an issue names, the `instructions`,
 * `ci_fix` and `ci_fix_attempts` settings, and the rendered section.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseRepoConfig } from '../../src/config/repo-config.ts';
import { instructionsSetting, pathsNamedIn, renderInstructionsSection, thirdPartyDirectory, type AgentInstructions } from '../../src/workspace/agent-instructions.ts';

describe('paths an issue names', () => {
  test('path-like words, code spans and links into the repository; line suffixes and punctuation dropped', () => {
    const text = [
      'Crash in src/api/handler.ts:42, called from `lib/util.py`.',
      'See ./docs/setup.md and packages/cli/ (the CLI).',
      'Link: https://github.com/acme/app/blob/main/tools/gen/run.sh#L10-L12 and https://example.com/a/b/c',
      'The `Makefile` target, a path that climbs out ../../etc/passwd, and /etc/shadow.',
      'Dates like 2024/05/01 are words too: a/b.',
    ].join('\n');
    assert.deepEqual(pathsNamedIn(text), ['tools/gen/run.sh', 'src/api/handler.ts', 'lib/util.py', 'docs/setup.md', 'packages/cli', 'Makefile', 'etc/shadow', '2024/05/01', 'a/b']);
  });

  test('bounded, and without duplicates', () => {
    const text = Array.from({ length: 80 }, (_, i) => `dir${i}/file.ts dir${i}/file.ts`).join(' ');
    const paths = pathsNamedIn(text, 50);
    assert.equal(paths.length, 50);
    assert.equal(new Set(paths).size, 50);
  });
});

describe('settings', () => {
  test('defaults: AGENTS.md discovery, ci_fix command, 2 automatic fixes', () => {
    const r = parseRepoConfig(null, null);
    assert.ok(r.ok);
    assert.equal(r.config.instructions, undefined);
    assert.deepEqual(instructionsSetting(r.config.instructions), { mode: 'discover' });
    assert.equal(r.config.ci_fix, 'command');
    assert.equal(r.config.ci_fix_attempts, 2);
    assert.deepEqual(r.config.ci_status_contexts, [], 'no commit status counts as CI unless named');
  });

  test('ci_status_contexts: a list of contexts; a single string is refused saying what to write', () => {
    const named = parseRepoConfig({ ci_status_contexts: ['ci/jenkins', 'buildkite/main'] }, 'x');
    assert.ok(named.ok);
    assert.deepEqual(named.config.ci_status_contexts, ['ci/jenkins', 'buildkite/main']);
    const bare = parseRepoConfig({ ci_status_contexts: 'ci/jenkins' }, '.github/lilypad.yml');
    assert.equal(bare.ok, false);
    if (bare.ok) return;
    assert.deepEqual(bare.problems, ['`ci_status_contexts`: must be a list of commit status contexts, such as [ci/jenkins]']);
  });

  test('instructions: none, or a path inside the repository', () => {
    const none = parseRepoConfig({ instructions: 'none' }, 'x');
    assert.ok(none.ok);
    assert.deepEqual(instructionsSetting(none.config.instructions), { mode: 'off' });
    const file = parseRepoConfig({ instructions: './docs/AGENTS.md', ci_fix: 'auto', ci_fix_attempts: 10 }, 'x');
    assert.ok(file.ok);
    assert.deepEqual(instructionsSetting(file.config.instructions), { mode: 'file', path: 'docs/AGENTS.md' });
    assert.equal(file.config.ci_fix, 'auto');
  });

  test('a path outside the repository, a bad ci_fix or too many attempts: each problem named with the fix', () => {
    for (const [value, why] of [
      ['../secrets.md', /must be `none` or a path in the repository such as docs\/AGENTS\.md; it must not contain `\.\.`/],
      ['/etc/passwd', /relative to the repository root/],
      ['docs\\AGENTS.md', /backslashes/],
      ['docs//AGENTS.md', /empty parts/],
    ] as const) {
      const r = parseRepoConfig({ instructions: value }, '.github/lilypad.yml');
      assert.equal(r.ok, false, value);
      if (r.ok) continue;
      assert.equal(r.problems.length, 1);
      assert.ok(r.problems[0]?.startsWith('`instructions`: '));
      assert.match(r.problems[0] ?? '', why);
    }
    const bad = parseRepoConfig({ ci_fix: 'always', ci_fix_attempts: 11, instructions: '' }, 'x');
    assert.equal(bad.ok, false);
    if (bad.ok) return;
    assert.equal(bad.problems.length, 3);
    assert.ok(bad.problems.some((p) => p.startsWith('`ci_fix`') && /auto|command|off/.test(p)));
    assert.ok(bad.problems.some((p) => p.startsWith('`ci_fix_attempts`')));
    assert.ok(bad.problems.some((p) => p.startsWith('`instructions`')));
  });
});

describe('the rendered section', () => {
  const base: AgentInstructions = { commit: 'abcdef0123456789', setting: { mode: 'discover' }, files: [], skipped: [{ path: 'AGENTS.md', reason: 'a symbolic link; links are not followed' }] };

  test('nothing to show: no section at all', () => {
    assert.equal(renderInstructionsSection(base), '');
    assert.equal(renderInstructionsSection({ ...base, files: [{ path: 'AGENTS.md', reason: 'root', namedBy: [], text: '  \n', bytes: 3, cutBytes: 0 }] }), '');
  });

  test('a configured file is named in the heading; many named paths are abbreviated', () => {
    const section = renderInstructionsSection({
      ...base,
      setting: { mode: 'file', path: 'docs/ai.md' },
      files: [{ path: 'docs/ai.md', reason: 'configured', namedBy: [], text: 'Use pnpm.\n', bytes: 10, cutBytes: 0 }],
    });
    assert.equal(section, "---\n\n## Repository instructions (from docs/ai.md at abcdef0)\n\nThese instructions for coding agents were found in the repository, in `docs/ai.md` (read at commit abcdef0, before any change of yours).\n\n### `docs/ai.md`\n\nUse pnpm.");
    const many = renderInstructionsSection({
      ...base,
      files: [
        { path: 'AGENTS.md', reason: 'root', namedBy: [], text: 'root', bytes: 4, cutBytes: 0 },
        { path: 'src/AGENTS.md', reason: 'directory', namedBy: ['src/a.ts', 'src/b.ts', 'src/c.ts', 'src/d.ts'], text: 'src', bytes: 3, cutBytes: 0 },
      ],
    });
    assert.match(many, /### `src\/AGENTS\.md` \(applies to `src\/a\.ts`, `src\/b\.ts`, `src\/c\.ts`, …\)/);
    assert.match(many, /^---\n\n## Repository instructions \(from AGENTS\.md files at abcdef0\)\n\nThese instructions for coding agents were found in the repository, in AGENTS\.md files \(read at commit abcdef0/);
  });

  test('it says where the instructions were found, never that the maintainers wrote them', () => {
    const one = renderInstructionsSection({ ...base, files: [{ path: 'AGENTS.md', reason: 'root', namedBy: [], text: 'x', bytes: 1, cutBytes: 0 }] });
    assert.match(one, /found in the repository, in `AGENTS\.md`/);
    assert.doesNotMatch(one, /maintainer/i);
  });
});

describe('third-party directories', () => {
  test('vendored, third-party, dependency and fixture directories, at any depth and in any case', () => {
    for (const [dir, part] of [
      ['vendor', 'vendor'],
      ['vendor/github.com/x', 'vendor'],
      ['src/third_party/zlib', 'src/third_party'],
      ['web/node_modules/left-pad', 'web/node_modules'],
      ['tests/fixtures/app', 'tests/fixtures'],
      ['pkg/testdata', 'pkg/testdata'],
      ['lib/Vendor', 'lib/Vendor'],
      ['third-party', 'third-party'],
      ['test/__fixtures__/x', 'test/__fixtures__'],
    ] as const) {
      assert.equal(thirdPartyDirectory(dir), part, dir);
    }
    for (const dir of ['src', 'src/vendoring', 'docs/fixtures-guide', 'tests/unit', 'vendors.d']) assert.equal(thirdPartyDirectory(dir), null, dir);
  });
});
