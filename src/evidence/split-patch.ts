import { diffFiles } from './diff-files.ts';
import { isTestFile } from './test-files.ts';

export interface SplitPatch<T extends string | Buffer = string> {
  /** The sections of the test files: a patch of its own (empty when the change has no tests). */
  tests: T;
  /** The sections of every other file: applied alone, it is the change without its tests. */
  code: T;
  testFiles: string[];
  codeFiles: string[];
}

/**
 * A change cut in two: its test files and the rest. Each half is made of whole file sections of
 * the original, in their order, so each applies with `git apply` on its own (and the two together
 * make the original change). Running the `tests` half on the base commit is how a test is shown
 * to fail without the fix.
 */
export function splitPatch(diff: string): SplitPatch;
/** The diff as git wrote it (bytes): the halves are bytes too, exactly as they were in it. */
export function splitPatch(diff: Buffer): SplitPatch<Buffer>;
export function splitPatch(diff: string | Buffer): SplitPatch<string> | SplitPatch<Buffer> {
  const out: SplitPatch = { tests: '', code: '', testFiles: [], codeFiles: [] };
  for (const file of diffFiles(diff)) {
    if (isTestFile(file.path)) {
      out.tests += file.text;
      out.testFiles.push(file.path);
    } else {
      out.code += file.text;
      out.codeFiles.push(file.path);
    }
  }
  return Buffer.isBuffer(diff) ? { ...out, tests: Buffer.from(out.tests, 'latin1'), code: Buffer.from(out.code, 'latin1') } : out;
}
