/**
 * Progress on stderr: a redrawn bar with the ETA on a terminal, one plain line per finished item
 * otherwise (CI logs, files). The ETA is the mean time per finished item, spread over the workers.
 */
export class Progress {
  private done = 0;
  private skipped = 0;
  private resolved = 0;
  private readonly started = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private readonly running = new Map<string, string>();

  constructor(
    private readonly total: number,
    private readonly out: NodeJS.WriteStream | { isTTY?: boolean; write(s: string): boolean },
    private readonly label = 'eval',
  ) {
    if (this.out.isTTY) {
      this.timer = setInterval(() => this.draw(), 1000);
      this.timer.unref();
    }
  }

  /** Work found finished by an earlier run (--resume): counted, not timed. */
  skip(n: number): void {
    this.skipped += n;
    this.done += n;
    this.draw();
  }

  start(key: string, what: string): void {
    this.running.set(key, what);
    this.draw();
  }

  finish(key: string, line: string, resolved: boolean): void {
    this.running.delete(key);
    this.done++;
    if (resolved) this.resolved++;
    if (this.out.isTTY) {
      this.out.write(`\r\x1b[K${line}\n`);
      this.draw();
    } else {
      this.out.write(`[${this.done}/${this.total}] ${line} (${this.eta()})\n`);
    }
  }

  note(line: string): void {
    this.out.write(this.out.isTTY ? `\r\x1b[K${line}\n` : `${line}\n`);
    this.draw();
  }

  eta(): string {
    const timed = this.done - this.skipped;
    const left = this.total - this.done;
    const elapsed = (Date.now() - this.started) / 1000;
    if (left === 0) return `done in ${fmt(elapsed)}`;
    if (timed === 0) return `elapsed ${fmt(elapsed)}, ETA unknown`;
    return `elapsed ${fmt(elapsed)}, ETA ${fmt((elapsed / timed) * left)}`;
  }

  private draw(): void {
    if (!this.out.isTTY) return;
    const width = 24;
    const filled = this.total === 0 ? width : Math.round((this.done / this.total) * width);
    const now = [...this.running.values()].slice(0, 2).join(', ');
    this.out.write(
      `\r\x1b[K${this.label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${this.done}/${this.total} resolved ${this.resolved} ${this.eta()}${now ? `  ${now}` : ''}`,
    );
  }

  stop(): void {
    clearInterval(this.timer);
    if (this.out.isTTY) this.out.write('\n');
  }
}

function fmt(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
