import Bottleneck from 'bottleneck';

/**
 * GitHub asks an integration to leave a second between requests that change something, and more
 * between requests that notify people; octokit's throttling plugin does that for every client in
 * the process (1 s between writes and GraphQL queries, 3 s between writes that notify). The plugin
 * fixes those numbers, so Lilypad hands it queues of its own with the same spacing, taken from
 * LILYPAD_GITHUB_WRITE_SPACING_MS (default 1000). Only a test against a local stand-in of GitHub
 * has a reason to shorten it.
 */
export interface WritePacing {
  write: Bottleneck.Group;
  notifications: Bottleneck.Group;
}

/** The spacing GitHub asks for, in milliseconds between two writes. */
export const GITHUB_WRITE_SPACING_MS = 1000;
/** Writes that notify people (comments, pull requests, review requests) wait this many times longer. */
const NOTIFICATION_FACTOR = 3;

// One pair of queues per spacing, shared by every client in the process (as the plugin's own are):
// pacing per client would let two jobs' writes reach GitHub back to back.
const shared = new Map<number, WritePacing>();

export function writePacing(spacingMs: number = GITHUB_WRITE_SPACING_MS): WritePacing {
  if (!Number.isInteger(spacingMs) || spacingMs < 0) throw new Error(`write spacing must be a whole number of milliseconds, 0 or more (got ${spacingMs})`);
  let pacing = shared.get(spacingMs);
  if (!pacing) {
    // As the plugin's own groups: one request at a time per queue, the spacing between them.
    const group = (id: string, minTime: number) => new Bottleneck.Group({ id, maxConcurrent: 1, minTime, timeout: 2 * 60_000 });
    pacing = { write: group('lilypad-write', spacingMs), notifications: group('lilypad-notifications', spacingMs * NOTIFICATION_FACTOR) };
    shared.set(spacingMs, pacing);
  }
  return pacing;
}
