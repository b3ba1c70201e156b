import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import type { Logger } from '../observability/logger.ts';
import type { GuardedRequest } from './webhook-limits.ts';

/**
 * The shape of every delivery Lilypad acts on, checked once where it enters, before Probot hands it
 * to a handler (src/github/webhooks.ts). GitHub sends every app events it never subscribed to
 * (installation, marketplace and authorization events, without `repository`), and a payload may
 * lack or null any field: a signed delivery is answered 200 when Lilypad does not act on it (one
 * debug line), 400 with one sentence when it is not the shape a handler reads, and reaches a
 * handler only when it is. The keys are `event.action` (`status` has no action), exactly the ones
 * webhooks.ts registers (test/unit/webhook-payloads.test.ts holds the two together).
 */
const id = z.number().int().nonnegative();
const text = z.string();
const repository = z.object({ id, name: text.min(1), owner: z.object({ login: text.min(1) }) });
const sender = z.object({ login: text.min(1), type: text });
const envelope = { installation: z.object({ id: id.positive() }), repository, sender };
const label = z.object({ name: text }).nullish();
const issue = z.object({ number: id, title: text, body: text.nullish(), pull_request: z.unknown().optional() });
const comment = z.object({ id, body: text });
const pullRequest = z.object({ number: id });
// Whose pull request a CI result names: only those whose head is in this repository are kept.
const pullNumbers = z.array(z.object({ number: id, head: z.object({ repo: z.object({ id }) }) }));
// GitHub Enterprise Server 3.5 sends apps without a slug.
const app = z.object({ slug: text.nullish() }).nullish();

export const DELIVERY_SHAPES = {
  'issues.labeled': z.object({ ...envelope, issue, label }),
  'issues.unlabeled': z.object({ ...envelope, issue, label }),
  'issues.closed': z.object({ ...envelope, issue }),
  'issues.edited': z.object({ ...envelope, issue, changes: z.object({}) }),
  'issue_comment.created': z.object({ ...envelope, issue, comment }),
  'pull_request_review.submitted': z.object({
    ...envelope,
    review: z.object({ id, node_id: text, state: text, body: text.nullish() }),
    pull_request: pullRequest,
  }),
  'pull_request_review_comment.created': z.object({ ...envelope, comment, pull_request: pullRequest }),
  'pull_request.closed': z.object({ ...envelope, pull_request: pullRequest }),
  'pull_request.unlabeled': z.object({ ...envelope, pull_request: pullRequest, label }),
  'check_run.completed': z.object({
    ...envelope,
    check_run: z.object({
      conclusion: text.nullable(),
      head_sha: text,
      name: text,
      pull_requests: pullNumbers,
      app,
      check_suite: z.object({ status: text.nullish(), head_branch: text.nullish() }).nullish(),
    }),
  }),
  'check_suite.completed': z.object({
    ...envelope,
    check_suite: z.object({ conclusion: text.nullable(), head_sha: text, head_branch: text.nullish(), pull_requests: pullNumbers, app }),
  }),
  status: z.object({ ...envelope, state: text, sha: text, context: text }),
} as const;

export type DeliveryKey = keyof typeof DELIVERY_SHAPES;

export type Verdict =
  | { kind: 'accept' }
  | { kind: 'ignore'; reason: string }
  | { kind: 'refuse'; message: string };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  return Array.isArray(v) ? 'an array' : `a ${typeof v}`;
}

/** What to do with a signed delivery of `event` whose body is `body` (its raw text). */
export function judgeDelivery(event: string, body: string): Verdict {
  let payload: unknown;
  try {
    payload = JSON.parse(body);
  } catch {
    return { kind: 'refuse', message: `The ${event} delivery was refused: its body is not valid JSON.` };
  }
  if (!isRecord(payload)) return { kind: 'refuse', message: `The ${event} delivery was refused: its body is ${kindOf(payload)}, not a JSON object.` };
  const action = typeof payload['action'] === 'string' ? payload['action'] : null;
  const key = action ? `${event}.${action}` : event;
  const shape = (DELIVERY_SHAPES as Record<string, z.ZodType>)[key] ?? (DELIVERY_SHAPES as Record<string, z.ZodType>)[event];
  if (!shape) return { kind: 'ignore', reason: `Lilypad does not act on ${key}` };
  // Not from an installation (GitHub sends those only to the app's owner account): nothing to run as.
  if (payload['installation'] === undefined || payload['installation'] === null) return { kind: 'ignore', reason: `the ${key} delivery names no installation` };
  const checked = shape.safeParse(payload);
  if (checked.success) return { kind: 'accept' };
  const first = checked.error.issues[0]!;
  const field = first.path.map(String).join('.');
  let value: unknown = payload;
  for (const part of first.path) value = isRecord(value) || Array.isArray(value) ? (value as Record<PropertyKey, unknown>)[part as PropertyKey] : undefined;
  const what = value === undefined ? 'is missing' : `is ${kindOf(value)}, not what GitHub sends`;
  return { kind: 'refuse', message: `The ${key} delivery was refused: ${field} ${what}.` };
}

/** True when the X-Hub-Signature-256 header is the HMAC of the body with the app's webhook secret. */
function signedWith(secret: string, body: Buffer, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string' || !header.startsWith('sha256=')) return false;
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(body).digest('hex')}`);
  const given = Buffer.from(header);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Answers a webhook delivery that no handler may see and returns true: a wrong signature (401),
 * a signed delivery Lilypad does not act on (200) or of the wrong shape (400). Returns false for
 * everything else, which goes on to Probot: other paths, requests without GitHub's headers or
 * with another content type (Probot refuses them without a log line), and deliveries of the right
 * shape (Probot checks the signature again and runs the handler).
 */
export function createDeliveryGuard(opts: { path: string; secret: string; logger: Logger }): (req: GuardedRequest, res: ServerResponse) => boolean {
  const { logger } = opts;
  return (req, res) => {
    if (req.method !== 'POST' || req.url?.split('?')[0] !== opts.path || !req.rawBody) return false;
    const event = req.headers['x-github-event'];
    const type = String(req.headers['content-type'] ?? '');
    if (typeof event !== 'string' || !/^[a-z_]{1,100}$/.test(event) || !type.startsWith('application/json')) return false;
    const signature = req.headers['x-hub-signature-256'];
    const delivery = req.headers['x-github-delivery'];
    // A missing header: Probot answers 400 naming it.
    if (typeof signature !== 'string' || typeof delivery !== 'string') return false;
    const answer = (status: number, message: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message }));
    };
    // Answered here rather than by Probot, which logs every wrong signature as an error with a stack.
    if (!signedWith(opts.secret, req.rawBody, signature)) {
      logger.warn({ delivery, event }, 'webhook refused with 401: its signature does not match WEBHOOK_SECRET');
      answer(401, 'The delivery was refused: its X-Hub-Signature-256 does not match the webhook secret.');
      return true;
    }
    const verdict = judgeDelivery(event, req.rawBody.toString('utf8'));
    if (verdict.kind === 'accept') return false;
    if (verdict.kind === 'ignore') {
      logger.debug({ delivery, event }, `webhook ignored: ${verdict.reason}`);
      answer(200, `Ignored: ${verdict.reason}.`);
      return true;
    }
    logger.warn({ delivery, event }, `webhook refused with 400: ${verdict.message}`);
    answer(400, verdict.message);
    return true;
  };
}
