import type { ScriptedReply } from './model-server.ts';

/** The model fixes calc.py's add() in one edit, then says so. */
export const FIX_ADD_SCRIPT: ScriptedReply[] = [
  { toolCalls: [{ name: 'Edit', arguments: { file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b' } }] },
  { content: 'Fixed add().' },
];

/**
 * A script whose first conversation hangs at its first model call (a worker is mid-agent while
 * the fault happens); every later conversation fixes the bug.
 */
export function hangOnce(): (turn: number) => ScriptedReply {
  let hung = false;
  return (turn: number) => {
    if (turn === 0 && !hung) {
      hung = true;
      return { hang: true as const };
    }
    return FIX_ADD_SCRIPT[turn] ?? { content: 'done' };
  };
}
