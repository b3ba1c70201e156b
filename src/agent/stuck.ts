import { createHash } from 'node:crypto';

/**
 * When an attempt is going nowhere (issue 17): the same tool call with the same observation
 * `repeats` times, or `idleSteps` steps in a row that change no file and run no command it had
 * not run before. 0 turns a rule off. Lilypad only watches: nothing is ever added to the model's
 * conversation; the attempt just ends, with its work kept, under the exit reason `stuck`.
 */
export interface StuckLimits {
  repeats: number;
  idleSteps: number;
}

export const STUCK_OFF: StuckLimits = { repeats: 0, idleSteps: 0 };

export class StuckWatch {
  private readonly seen = new Map<string, number>();
  private readonly commands = new Set<string>();
  private idle = 0;
  private progressThisStep = false;

  constructor(private readonly limits: StuckLimits) {}

  /** After a tool call: why the attempt is stuck, or null. */
  call(name: string, rawArguments: string, observation: string): string | null {
    if (name === 'Write' || name === 'Edit') {
      // A write that worked changes a file: progress, whatever it wrote.
      if (/^(Wrote|Edited) /.test(observation)) this.progressThisStep = true;
    } else if (name === 'Bash') {
      const command = commandOf(rawArguments);
      if (command !== null && !this.commands.has(command)) {
        this.commands.add(command);
        this.progressThisStep = true;
      }
    }
    if (this.limits.repeats <= 0) return null;
    const key = createHash('sha256').update(name).update('\0').update(rawArguments).update('\0').update(observation).digest('hex');
    const n = (this.seen.get(key) ?? 0) + 1;
    this.seen.set(key, n);
    return n >= this.limits.repeats ? `the same ${name} call came back with the same observation ${n} times` : null;
  }

  /** After a step's tool calls: why the attempt is stuck, or null. */
  step(): string | null {
    this.idle = this.progressThisStep ? 0 : this.idle + 1;
    this.progressThisStep = false;
    if (this.limits.idleSteps > 0 && this.idle >= this.limits.idleSteps) return `${this.idle} steps in a row changed no file and ran no new command`;
    return null;
  }
}

function commandOf(rawArguments: string): string | null {
  try {
    const args = JSON.parse(rawArguments) as { command?: unknown };
    return typeof args.command === 'string' ? args.command.trim() : null;
  } catch {
    return null;
  }
}
