/**
 * Webhook deliveries as GitHub Enterprise Server sends them, and payloads built on the real examples
 * shipped in @octokit/webhooks-examples (GHES 3.5 set), filled from the stand-in's state.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { GHES_VERSION } from './state.ts';
import type { IssueRec, RepoRec, StandinState, UserRec, CommentRec, ReviewCommentRec, ReviewRec } from './state.ts';
import type { WebhookDelivery, WebhookPayload, WebhookResult } from './types.ts';

interface ExampleEvent {
  name: string;
  examples: Record<string, unknown>[];
}

const EXAMPLES_HOST = 'https://octocoders.github.io';
let examplesCache: ExampleEvent[] | null = null;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The GHES 3.5 example payloads from @octokit/webhooks-examples (the newest GHES set it ships). */
export function webhookExamples(): ExampleEvent[] {
  if (examplesCache) return examplesCache;
  const require = createRequire(import.meta.url);
  const file = require.resolve('@octokit/webhooks-examples/ghes-35/index.json');
  const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
  if (!Array.isArray(parsed)) throw new Error('unexpected @octokit/webhooks-examples format');
  examplesCache = parsed.filter(isRecord).map((e) => ({
    name: String(e.name),
    examples: Array.isArray(e.examples) ? e.examples.filter(isRecord) : [],
  }));
  return examplesCache;
}

/** The first example of `event` with `action` (a deep copy), or undefined. `status` payloads have no action. */
export function exampleFor(event: string, action: string | undefined): Record<string, unknown> | undefined {
  const ev = webhookExamples().find((e) => e.name === event);
  const ex = ev?.examples.find((x) => x.action === action);
  return ex ? (JSON.parse(JSON.stringify(ex)) as Record<string, unknown>) : undefined;
}

function rehost(value: unknown, origin: string): unknown {
  if (typeof value === 'string') return value.split(EXAMPLES_HOST).join(origin);
  if (Array.isArray(value)) return value.map((v) => rehost(v, origin));
  if (isRecord(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = rehost(v, origin);
    return out;
  }
  return value;
}

export class PayloadFactory {
  constructor(private readonly state: StandinState) {}

  /**
   * Starts from the example for `event`/`templateAction` and fills in the keys we know from state;
   * keys we do not model (e.g. `enterprise`) keep the example's values, re-hosted on the stand-in.
   */
  build(event: string, action: string, templateAction: string, fill: Record<string, unknown>, issue: IssueRec): WebhookPayload {
    return this.buildForRepo(event, action, templateAction, fill, issue.repo);
  }

  /** As build, for events about a repository rather than an issue; `action` undefined for events without one (`status`). */
  buildForRepo(event: string, action: string | undefined, templateAction: string | undefined, fill: Record<string, unknown>, repo: RepoRec): WebhookPayload {
    const s = this.state;
    const template = exampleFor(event, templateAction) ?? (action === undefined ? {} : { action });
    const inst = s.installationFor(repo.owner);
    const known: Record<string, unknown> = {
      ...fill,
      ...(action === undefined ? {} : { action }),
      repository: s.repo(repo),
    };
    if (inst) known.installation = { id: inst.id, node_id: Buffer.from(`023:IntegrationInstallation${inst.id}`).toString('base64') };
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(template)) {
      if (key === 'changes' && !('changes' in known)) continue;
      if (key === 'installation' && !inst) continue;
      if (key in known) out[key] = known[key];
      else if (key === 'label' || key === 'comment' || key === 'assignee') continue;
      else out[key] = rehost(template[key], s.origin);
    }
    for (const [k, v] of Object.entries(known)) if (!(k in out)) out[k] = v;
    if (repo.owner.type === 'Organization' && !('organization' in out)) {
      const org = s.user(repo.owner);
      const orgPayload = {
        login: org.login,
        id: org.id,
        node_id: org.node_id,
        url: `${s.apiUrl}/orgs/${org.login}`,
        repos_url: `${s.apiUrl}/orgs/${org.login}/repos`,
        events_url: `${s.apiUrl}/orgs/${org.login}/events`,
        hooks_url: `${s.apiUrl}/orgs/${org.login}/hooks`,
        issues_url: `${s.apiUrl}/orgs/${org.login}/issues`,
        members_url: `${s.apiUrl}/orgs/${org.login}/members{/member}`,
        public_members_url: `${s.apiUrl}/orgs/${org.login}/public_members{/member}`,
        avatar_url: org.avatar_url,
        description: null,
      };
      // GitHub places `organization` after `repository`.
      const ordered: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(out)) {
        ordered[k] = v;
        if (k === 'repository') ordered.organization = orgPayload;
      }
      return ordered;
    }
    return out;
  }

  sender(login: string): UserRec {
    return this.state.ensureUser(login);
  }

  issueEvent(action: string, issue: IssueRec, sender: string, extra: Record<string, unknown> = {}, templateAction = action): WebhookPayload {
    return this.build('issues', action, templateAction, { issue: this.state.issue(issue), ...extra, sender: this.state.user(this.sender(sender)) }, issue);
  }

  /** `pull_request_review` (the review in its webhook form: lower-case state, null for an empty body). */
  reviewEvent(action: string, review: ReviewRec, sender: string): WebhookPayload {
    const s = this.state;
    return this.build('pull_request_review', action, 'submitted', { review: s.review(review, true), pull_request: s.pull(review.issue), sender: s.user(this.sender(sender)) }, review.issue);
  }

  /** `pull_request_review_comment`. */
  reviewCommentEvent(action: string, comment: ReviewCommentRec, sender: string): WebhookPayload {
    const s = this.state;
    return this.build('pull_request_review_comment', action, 'created', { comment: s.reviewComment(comment), pull_request: s.pull(comment.issue), sender: s.user(this.sender(sender)) }, comment.issue);
  }

  /** `pull_request` (with `number`, and the full pull request as single-pull responses have it). */
  pullRequestEvent(action: string, issue: IssueRec, sender: string): WebhookPayload {
    const s = this.state;
    return this.build('pull_request', action, action, { number: issue.number, pull_request: s.pull(issue, true), sender: s.user(this.sender(sender)) }, issue);
  }

  commentEvent(action: string, comment: CommentRec, sender: string): WebhookPayload {
    const s = this.state;
    return this.build('issue_comment', action, action, { issue: s.issue(comment.issue), comment: s.comment(comment), sender: s.user(this.sender(sender)) }, comment.issue);
  }
}

export function signatures(secret: string, body: string): { sha256: string; sha1: string } {
  return {
    sha256: `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
    sha1: `sha1=${createHmac('sha1', secret).update(body).digest('hex')}`,
  };
}

function assertLoopback(target: URL): void {
  const host = target.hostname.replace(/^\[|\]$/g, '');
  if (host !== '127.0.0.1' && host !== 'localhost' && host !== '::1') {
    throw new Error(`the GitHub stand-in only delivers webhooks to loopback addresses, not ${target.host}`);
  }
}

export interface DeliveryContext {
  secret: string;
  appId: number;
  hookId: number;
  host: string;
  deliveries: WebhookDelivery[];
}

/** POSTs `payload` to `targetUrl` with GitHub's headers and HMAC signatures. */
export async function deliver(ctx: DeliveryContext, targetUrl: string, event: string, payload: object, deliveryId?: string): Promise<WebhookResult> {
  const target = new URL(targetUrl);
  assertLoopback(target);
  const body = JSON.stringify(payload);
  const id = deliveryId ?? randomUUID();
  const sig = signatures(ctx.secret, body);
  const headers: Record<string, string> = {
    accept: '*/*',
    'content-type': 'application/json',
    'user-agent': `GitHub-Hookshot/${randomBytes(4).toString('hex').slice(0, 7)}`,
    'x-github-delivery': id,
    'x-github-event': event,
    'x-github-hook-id': String(ctx.hookId),
    'x-github-hook-installation-target-id': String(ctx.appId),
    'x-github-hook-installation-target-type': 'integration',
    'x-github-enterprise-host': ctx.host,
    'x-github-enterprise-version': GHES_VERSION,
    'x-hub-signature': sig.sha1,
    'x-hub-signature-256': sig.sha256,
  };
  const response = await fetch(target, { method: 'POST', headers, body, redirect: 'manual' });
  const text = await response.text();
  ctx.deliveries.push({ targetUrl, event, deliveryId: id, headers, body, status: response.status, responseBody: text });
  return { status: response.status, body: text, deliveryId: id };
}
