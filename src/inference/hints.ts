import { parse as parseYaml } from 'yaml';
import type { TestRunner } from '../test-results/types.ts';
import type { RepoView } from './types.ts';

/** A test command the repository itself names somewhere. */
export interface Hint {
  /** The command as written (one line, continuations joined). */
  command: string;
  runner: TestRunner;
  from: string;
}

/** A Makefile's `test:` target. */
export interface MakeTarget {
  file: string;
  target: string;
  prerequisites: string[];
  recipe: string[];
  /**
   * The Makefile's `export NAME=value` lines as shell assignments to put before a recipe line
   * run on its own; null when an export is not a plain value (it refers to make variables).
   */
  exports: string[] | null;
}

const MAKEFILES = ['Makefile', 'makefile', 'GNUmakefile'];

export async function makeTestTarget(repo: RepoView): Promise<MakeTarget | null> {
  const file = repo.first(...MAKEFILES);
  if (!file) return null;
  const text = (await repo.read(file)) ?? '';
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  for (const target of ['test', 'tests', 'check']) {
    const at = lines.findIndex((l) => new RegExp(`^${target}\\s*:(?![=:])`).test(l));
    if (at < 0) continue;
    const prerequisites = lines[at]!.slice(lines[at]!.indexOf(':') + 1).split(/[;#]/)[0]!.trim().split(/\s+/).filter(Boolean);
    const recipe: string[] = [];
    for (let i = at + 1; i < lines.length && (lines[i]!.startsWith('\t') || lines[i]!.trim() === '' || lines[i]!.trim().startsWith('#')); i++) {
      let line = lines[i]!.trim();
      if (!line || line.startsWith('#')) continue;
      while (line.endsWith('\\') && i + 1 < lines.length) line = `${line.slice(0, -1).trim()} ${lines[++i]!.trim()}`;
      recipe.push(line.replace(/^[@+-]+/, '').trim());
    }
    let exports: string[] | null = [];
    for (const l of lines) {
      const e = /^export\s+([A-Za-z_]\w*)\s*:?=\s*(.*?)\s*$/.exec(l);
      if (!e) continue;
      if (/^[\w./:,=@%+-]*$/.test(e[2]!)) exports?.push(`${e[1]}=${e[2]}`);
      else exports = null;
    }
    return { file, target, prerequisites, recipe, exports };
  }
  return null;
}

/** `run:` lines of the repository's GitHub Actions workflows, test-looking workflows first. */
export async function workflowRunLines(repo: RepoView): Promise<Array<{ line: string; from: string }>> {
  const files = repo.files.filter((f) => /^\.github\/workflows\/[^/]+\.ya?ml$/.test(f));
  files.sort((a, b) => Number(!/test|ci|check|build/i.test(a)) - Number(!/test|ci|check|build/i.test(b)) || (a < b ? -1 : 1));
  const out: Array<{ line: string; from: string }> = [];
  for (const file of files) {
    let doc: unknown;
    try {
      doc = parseYaml((await repo.read(file)) ?? '');
    } catch {
      continue;
    }
    const jobs = (doc as { jobs?: Record<string, { steps?: Array<{ run?: unknown }> }> } | null)?.jobs;
    if (!jobs || typeof jobs !== 'object') continue;
    for (const job of Object.values(jobs)) {
      for (const step of Array.isArray(job?.steps) ? job.steps : []) {
        if (typeof step?.run !== 'string') continue;
        for (const line of joinContinuations(step.run)) out.push({ line, from: file });
      }
    }
  }
  return out;
}

/** Commands shown in CONTRIBUTING (code spans, code blocks, `$ ` prompts). */
export async function contributingLines(repo: RepoView): Promise<Array<{ line: string; from: string }>> {
  const file = repo.files.find((f) => /^(\.github\/|docs\/)?CONTRIBUTING(\.(md|rst|txt))?$/i.test(f));
  if (!file) return [];
  const text = (await repo.read(file)) ?? '';
  const out: Array<{ line: string; from: string }> = [];
  for (const m of text.matchAll(/``?([^`\n]+)``?/g)) out.push({ line: m[1]!.trim(), from: file });
  let fenced = false;
  for (const raw of text.replace(/\r\n?/g, '\n').split('\n')) {
    if (/^\s*```/.test(raw)) {
      fenced = !fenced;
      continue;
    }
    // Lines of fenced or indented (Markdown, reST) code blocks, without a shell prompt.
    if (fenced || /^( {2,}|\t)\S/.test(raw)) out.push({ line: raw.trim().replace(/^[$%]\s+/, ''), from: file });
  }
  return out;
}

function joinContinuations(script: string): string[] {
  const lines: string[] = [];
  let acc = '';
  for (const raw of script.replace(/\r\n?/g, '\n').split('\n')) {
    const line = raw.trim();
    if (line.endsWith('\\')) {
      acc += `${line.slice(0, -1).trim()} `;
      continue;
    }
    lines.push((acc + line).trim());
    acc = '';
  }
  if (acc) lines.push(acc.trim());
  return lines.filter(Boolean);
}

// Words that need the network, another service or privileges: a hint holding one is not taken.
const UNSAFE = /\b(sudo|docker|podman|curl|wget|apt(-get)?|brew|pip3?\s+install|npm\s+(install|ci|i)\b|yarn\s+(install|add)|pnpm\s+(install|add)|go\s+(get|install)|cargo\s+install|git\s+(clone|fetch|pull)|ssh|scp|tox|nox|coverage\s+(xml|html|report)|codecov|coveralls|poetry|uv|pipenv|hatch|pdm|conda)\b/;

/**
 * The runner of a simple test command (one command, no shell control, no variables), or null:
 * `pytest ...`, `python -m pytest|unittest ...`, `npm|yarn|pnpm test`, `node --test ...`,
 * `go test ...`, `cargo test ...`, `mvn ... test`, `./gradlew test`, `make test`.
 */
export function classifyCommand(command: string): TestRunner | null {
  const c = command.trim();
  if (!c || /[;&|`<>()$\\]|\s#/.test(c) || UNSAFE.test(c)) return null;
  if (/^(python3?\s+-m\s+)?(py\.test|pytest)(\s|$)/.test(c)) return 'pytest';
  if (/^python3?\s+-m\s+unittest(\s|$)/.test(c)) return 'unittest';
  if (/^python3?\s+(\.\/)?manage\.py\s+test(\s|$)/.test(c)) return 'unittest';
  if (/^(npm|yarn|pnpm)\s+(run\s+)?test(\s|$)/.test(c) || /^npm\s+t$/.test(c)) return 'npm';
  if (/^node\s+(\S+\s+)*--test(\s|$)/.test(c)) return 'node-test';
  if (/^go\s+test(\s|$)/.test(c)) return 'go';
  if (/^cargo\s+test(\s|$)/.test(c)) return 'cargo';
  if (/^(mvn|\.\/mvnw)\s+(\S+\s+)*(test|verify)(\s|$)/.test(c)) return 'maven';
  if (/^(\.\/gradlew|gradle)\s+(\S+\s+)*(test|check)(\s|$)/.test(c)) return 'gradle';
  if (/^make\s+(test|tests|check)$/.test(c)) return 'make';
  return null;
}

/** Hints from the workflows, then CONTRIBUTING, in that order; one per distinct command. */
export async function commandHints(repo: RepoView): Promise<Hint[]> {
  const seen = new Set<string>();
  const out: Hint[] = [];
  for (const { line, from } of [...(await workflowRunLines(repo)), ...(await contributingLines(repo))]) {
    const command = line.replace(/\s+/g, ' ').trim();
    const runner = classifyCommand(command);
    if (!runner || seen.has(command)) continue;
    seen.add(command);
    out.push({ command, runner, from });
  }
  return out;
}
