/**
 * The signals that ask a Lilypad command to stop and clean up (containers, proxies, its Redis):
 * Ctrl-C, `kill`, and SIGHUP, which a process gets when its terminal closes (a window shut, an SSH
 * connection dropped); Node's default for SIGHUP is to exit at once, leaving containers running.
 */
export const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * After SIGHUP the terminal is gone, and a write to it throws EIO (synchronously, for a tty): the
 * first progress line of the cleanup would crash the process before it removed anything. From the
 * hangup on, writes to a terminal are dropped; pipes and files are left alone.
 */
let droppingAfterHangup = false;

function dropTerminalWritesAfterHangup(): void {
  if (droppingAfterHangup) return;
  droppingAfterHangup = true;
  process.once('SIGHUP', () => {
    for (const stream of [process.stdout, process.stderr]) {
      if (!stream.isTTY) continue;
      const dropped = (...args: unknown[]): boolean => {
        const done = args.find((a): a is () => void => typeof a === 'function');
        if (done) queueMicrotask(done);
        return true;
      };
      stream.write = dropped as typeof stream.write;
    }
  });
}

/**
 * Calls `handler` on each stop signal until the returned function is called; from the hangup on,
 * writes to a terminal are dropped, so that the handler's cleanup can run to its end.
 */
export function onStopSignal(handler: (signal: NodeJS.Signals) => void): () => void {
  dropTerminalWritesAfterHangup();
  for (const sig of STOP_SIGNALS) process.on(sig, handler);
  return () => {
    for (const sig of STOP_SIGNALS) process.off(sig, handler);
  };
}
