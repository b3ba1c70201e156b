import { instructionsSetting, readAgentInstructions, renderInstructionsSection, type AgentInstructions } from '../workspace/agent-instructions.ts';
import type { RunTask } from './phases/attempts.ts';
import type { RunContext } from './run-context.ts';

/** What result.json and the run record say of the repository's instructions for agents. */
export interface InstructionsSummary {
  commit: string;
  files: Array<{ path: string; bytes: number; cut_bytes: number; reason: string }>;
  skipped: Array<{ path: string; reason: string }>;
}

/**
 * The task with the repository's instructions for coding agents (AGENTS.md at the root and in the
 * directories the task names, or the file `instructions:` names; none with `instructions: none`)
 * appended as a section the model can tell apart from the issue. Read at the commit given: the
 * default branch's base for every kind of run, never a pull request's head (which the agent
 * wrote). A repository whose instructions cannot be read gets the task as it is, and a warning.
 */
export async function withInstructions(ctx: RunContext, task: RunTask, at: { gitDir: string; commit: string }, setting: string | undefined): Promise<{ task: RunTask; instructions: InstructionsSummary | null }> {
  const parsed = instructionsSetting(setting);
  if (parsed.mode === 'off') return { task, instructions: null };
  let read: AgentInstructions;
  try {
    read = await ctx.step('instructions', () => readAgentInstructions({ gitDir: at.gitDir, commit: at.commit, taskText: `${task.title}\n${task.body}`, setting: parsed, signal: ctx.signal }));
  } catch (err) {
    ctx.log.warn({ err: (err as Error).message }, 'could not read the repository\'s instructions for agents');
    return { task: { ...task, warning: join(task.warning, `the repository's instructions for agents could not be read: ${(err as Error).message}`) }, instructions: null };
  }
  const summary: InstructionsSummary = { commit: read.commit, files: read.files.map((f) => ({ path: f.path, bytes: f.bytes, cut_bytes: f.cutBytes, reason: f.reason })), skipped: read.skipped };
  const section = renderInstructionsSection(read);
  if (!section) return { task, instructions: summary };
  return { task: { ...task, body: task.body ? `${task.body}\n\n${section}` : section }, instructions: summary };
}

function join(a: string | undefined, b: string): string {
  return a ? `${a} ${b}` : b;
}
