/**
 * Holds the REST traffic through the stand-in to GitHub's own OpenAPI descriptions
 * (`@octokit/openapi`): api.github.com and the oldest Enterprise Server release the package ships.
 * A request must name an operation both describe (method and path template), use only the path and
 * query parameters it lists, send a JSON body that validates against its request schema with no
 * property the schema lacks, and use an installation token only where the operation is marked for
 * GitHub Apps. The stand-in's own JSON answers are validated against the response schemas.
 *
 * The descriptions are read on the first checked request; each schema is compiled once, when an
 * operation first needs it. A violation is recorded on the stand-in; `node --test` fails the test
 * during which it happened (an afterEach hook below), and close() throws for any left over.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterEach } from 'node:test';
import { Ajv } from 'ajv';
import type { ValidateFunction } from 'ajv';

/** The oldest Enterprise Server description @octokit/openapi ships (the stand-in itself answers as 3.15). */
export const OLDEST_GHES = 'ghes-3.17';
const DESCRIPTIONS = ['api.github.com', OLDEST_GHES] as const;

/**
 * Operations the app calls with an installation token although the description marks them
 * `x-github.enabledForGitHubApps: false`, where GitHub's REST documentation for the operation
 * ("Fine-grained access tokens for this endpoint") lists GitHub App installation access tokens.
 * Keyed `METHOD template`; the value says what the documentation requires. Nothing else is exempt.
 */
export const APP_TOKEN_EXCEPTIONS: ReadonlyMap<string, string> = new Map<string, string>([
  // "Create a reply for a review comment": the review loop answers a line comment in its thread.
  // Documented for installation tokens with "Pull requests" repository permission (write).
  ['POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies', 'pull_requests: write'],
]);

/**
 * Operations GitHub serves that its description leaves out, each checked as the described operation
 * it answers like. `GET /repositories/{id}`: a repository by the id that survives renames (the run
 * pages decide access by it); GitHub answers it exactly as `GET /repos/{owner}/{repo}`.
 */
const UNDESCRIBED_ALIASES: ReadonlyArray<{ method: string; pattern: RegExp; as: string }> = [
  { method: 'GET', pattern: /^\/repositories\/\d+$/, as: '/repos/by-id/by-id' },
];

/** The path to check `pathname` as: itself, or the described operation an undescribed one answers like. */
function describedPath(method: string, pathname: string): string {
  return UNDESCRIBED_ALIASES.find((a) => a.method === method && a.pattern.test(pathname))?.as ?? pathname;
}

/**
 * Where the description says less than GitHub sends, reported upstream as "schema inaccuracies";
 * each is corrected in the schema (not skipped), so the rest of the answer is still checked.
 */
const SCHEMA_INACCURACIES: ReadonlyArray<{ what: string; apply(spec: Obj): void }> = [
  {
    // GitHub answers `"body": null` for an issue without a description, in search results as in
    // GET /repos/{owner}/{repo}/issues/{n} (where the description does allow null).
    what: 'issue-search-result-item.body is null for an issue without a body',
    apply(spec) {
      const item = ((spec['components'] as Obj)['schemas'] as Obj)['issue-search-result-item'] as Obj;
      ((item['properties'] as Obj)['body'] as Obj)['nullable'] = true;
    },
  },
  {
    // A label without a description has `"description": null`, as components/schemas/label and
    // the labels of pull-request say; only pull-request-simple's copy of the label says string.
    what: 'pull-request-simple.labels[].description is null for a label without one',
    apply(spec) {
      const pr = ((spec['components'] as Obj)['schemas'] as Obj)['pull-request-simple'] as Obj;
      const label = ((pr['properties'] as Obj)['labels'] as Obj)['items'] as Obj;
      ((label['properties'] as Obj)['description'] as Obj)['nullable'] = true;
    },
  },
  {
    // A review comment on a line that a later push changed (outdated) has `"position": null` and
    // `"line": null` (its `original_*` fields keep the place); the schema says integer.
    what: 'pull-request-review-comment position and line are null once the comment is outdated',
    apply(spec) {
      const c = ((spec['components'] as Obj)['schemas'] as Obj)['pull-request-review-comment'] as Obj;
      for (const k of ['position', 'line']) ((c['properties'] as Obj)[k] as Obj)['nullable'] = true;
    },
  },
  {
    // A reply through POST .../pulls/{n}/comments names the comment it answers (`in_reply_to`)
    // and GitHub takes the commit and path from it: the description's own text says "When
    // specified, all parameters other than body are ignored", yet requires commit_id and path.
    what: 'POST .../pulls/{n}/comments: with in_reply_to, only body is required',
    apply(spec) {
      const op = ((spec['paths'] as Obj)['/repos/{owner}/{repo}/pulls/{pull_number}/comments'] as Obj)['post'] as Obj;
      const schema = (((op['requestBody'] as Obj)['content'] as Obj)['application/json'] as Obj)['schema'] as Obj;
      schema['required'] = ['body'];
      schema['anyOf'] = [{ required: ['commit_id', 'path'] }, { required: ['in_reply_to'] }];
    },
  },
  {
    // The account is the user or organisation (or the enterprise) the app is installed on: one of
    // the two, as components/schemas/installation says (anyOf), not both at once (allOf).
    what: 'GET /app/installations: account is a user or an enterprise, not both',
    apply(spec) {
      const op = ((spec['paths'] as Obj)['/app/installations'] as Obj)['get'] as Obj;
      const schema = ((((op['responses'] as Obj)['200'] as Obj)['content'] as Obj)['application/json'] as Obj)['schema'] as Obj;
      const account = ((schema['items'] as Obj)['properties'] as Obj)['account'] as Obj;
      if (Array.isArray(account['allOf'])) {
        account['anyOf'] = account['allOf'];
        delete account['allOf'];
      }
    },
  },
];

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };
interface Operation {
  parameters?: Obj[];
  requestBody?: Obj;
  responses?: Record<string, Obj>;
  'x-github'?: { enabledForGitHubApps?: boolean };
}
interface Route {
  method: string;
  template: string;
  regex: RegExp;
  /** Literal segments first, then templates whose parameters stay within one segment. */
  rank: number;
  pointer: string;
  op: Operation;
  pathParams: Obj[] | undefined;
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const pointerPart = (s: string): string => encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1'));

class Description {
  readonly name: string;
  private readonly spec: Obj;
  private readonly ajv: Ajv;
  private readonly routes: Route[] = [];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(name: string, file: string) {
    this.name = name;
    this.spec = JSON.parse(readFileSync(file, 'utf8')) as Obj;
    for (const fix of SCHEMA_INACCURACIES) fix.apply(this.spec);
    nullableWithoutType(this.spec);
    // OpenAPI 3.0 schemas: `nullable` is understood by Ajv; `example`, `x-*`, `discriminator` and
    // formats are annotations here. The whole document is one schema whose parts are referenced by
    // pointer, so `#/components/...` resolves inside it; Ajv compiles only what a pointer reaches.
    this.ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true, validateSchema: false });
    // Ajv walks every key of an added schema looking for `$id`s (half a second for this document);
    // none are needed, so the document's parts are there to follow by pointer but not to walk.
    const root = {};
    for (const key of ['paths', 'components']) Object.defineProperty(root, key, { value: this.spec[key], enumerable: false });
    this.ajv.addSchema(root, name);
    const paths = this.spec['paths'] as Record<string, Record<string, Json>>;
    for (const [template, item] of Object.entries(paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (!['get', 'put', 'post', 'delete', 'patch', 'head'].includes(method) || !isObj(op)) continue;
        const segments = template.split('/').slice(1);
        const literal = segments.filter((s) => !s.includes('{')).length;
        const body = segments.map((s) => s.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '([^/]+)')).join('/');
        const wide = segments.map((s) => s.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{path\\?\}/g, '(.*)').replace(/\\?\{ref\\?\}/g, '(.+)').replace(/\\?\{[^}]+\\?\}/g, '([^/]+)')).join('/');
        const pointer = `#/paths/${pointerPart(template)}/${method}`;
        const pathParams = Array.isArray(item['parameters']) ? (item['parameters'] as Obj[]) : undefined;
        this.routes.push({ method: method.toUpperCase(), template, regex: new RegExp(`^/${body}/?$`), rank: literal * 2 + 1, pointer, op: op as Operation, pathParams });
        // `{path}` of contents and `{ref}` of git refs may hold slashes; an empty `{path}` is the root.
        const wideRe = `^/${wide}/?$`.replace(/\/\(\.\*\)\/\?\$$/, '(?:/(.*))?/?$'); // `.../contents` is the root too
        if (wide !== body) this.routes.push({ method: method.toUpperCase(), template, regex: new RegExp(wideRe), rank: literal * 2, pointer, op: op as Operation, pathParams });
      }
    }
    this.routes.sort((a, b) => b.rank - a.rank);
  }

  /** Follows one `$ref` (and its chain) inside the document; returns the target and its pointer. */
  deref(value: Obj, pointer: string): { value: Obj; pointer: string } {
    let v = value;
    let p = pointer;
    for (let i = 0; i < 10 && typeof v['$ref'] === 'string'; i++) {
      p = v['$ref'];
      let target: unknown = this.spec;
      for (const part of p.slice(2).split('/')) target = (target as Obj)[decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~')];
      v = target as Obj;
    }
    return { value: v, pointer: p };
  }

  find(method: string, pathname: string): { route: Route; params: string[] } | undefined {
    const m = method === 'HEAD' ? ['HEAD', 'GET'] : [method];
    for (const route of this.routes) {
      if (!m.includes(route.method)) continue;
      const hit = route.regex.exec(pathname);
      if (hit) return { route, params: hit.slice(1) };
    }
    return undefined;
  }

  hasPath(pathname: string): boolean {
    return this.routes.some((r) => r.regex.test(pathname));
  }

  validator(pointer: string): ValidateFunction {
    let v = this.compiled.get(pointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `${this.name}${pointer}` });
      this.compiled.set(pointer, v);
    }
    return v;
  }

  errors(pointer: string, value: unknown): string[] {
    let v: ValidateFunction;
    try {
      v = this.validator(pointer);
    } catch (err) {
      return [`the schema at ${pointer} cannot be compiled: ${err instanceof Error ? err.message : String(err)}`];
    }
    if (v(value)) return [];
    return (v.errors ?? []).slice(0, 40).map((e) => `${e.instancePath || '(body)'} ${e.message ?? 'is invalid'}${e.params && 'allowedValues' in e.params ? ` ${JSON.stringify(e.params['allowedValues'])}` : ''}`);
  }

  /** Properties in `value` that no branch of `schema` describes, as JSON paths. */
  unknownProperties(value: unknown, schema: Obj, at: string, out: string[]): void {
    const branches: Obj[] = [];
    const collect = (s: Obj): void => {
      const d = this.deref(s, '').value;
      branches.push(d);
      for (const k of ['allOf', 'anyOf', 'oneOf']) if (Array.isArray(d[k])) for (const b of d[k] as Obj[]) collect(b);
    };
    collect(schema);
    if (Array.isArray(value)) {
      for (const b of branches) if (isObj(b['items'])) value.forEach((item, i) => this.unknownProperties(item, b['items'] as Obj, `${at}[${i}]`, out));
      return;
    }
    if (!isObj(value)) return;
    const described = branches.filter((b) => isObj(b['properties']));
    const open = branches.some((b) => b['additionalProperties'] !== undefined && b['additionalProperties'] !== false);
    if (described.length === 0) return; // a free-form object
    for (const [key, inner] of Object.entries(value)) {
      const schemas = described.map((b) => (b['properties'] as Obj)[key]).filter(isObj);
      if (schemas.length === 0) {
        if (!open) out.push(`${at}.${key}`);
        continue;
      }
      for (const s of schemas) this.unknownProperties(inner, s, `${at}.${key}`, out);
    }
  }
}

/**
 * OpenAPI 3.0's `nullable: true` beside `allOf`/`anyOf`/`oneOf` and no `type` (GitHub writes nullable
 * references so) means "this, or null"; Ajv takes `nullable` only beside a `type`. Rewritten in place
 * to `anyOf: [{ type: 'null' }, this]`, once when the description is read.
 */
function nullableWithoutType(node: unknown): void {
  if (Array.isArray(node)) {
    for (const item of node) nullableWithoutType(item);
    return;
  }
  if (!isObj(node)) return;
  for (const v of Object.values(node)) nullableWithoutType(v);
  // `nullable` beside an `enum` (state_reason, ...) lets null through too.
  if (node['nullable'] === true && Array.isArray(node['enum']) && !node['enum'].includes(null)) node['enum'] = [...node['enum'], null];
  if (node['nullable'] === undefined || node['type'] !== undefined) return;
  const nullable = node['nullable'] === true;
  delete node['nullable'];
  if (!nullable) return;
  const rest: Obj = { ...node };
  for (const k of Object.keys(node)) delete node[k];
  node['anyOf'] = [{ type: 'null' }, rest];
}

let loaded: Description[] | undefined;
function descriptions(): Description[] {
  if (!loaded) {
    const require = createRequire(import.meta.url);
    const dir = path.join(path.dirname(require.resolve('@octokit/openapi/package.json')), 'generated');
    loaded = DESCRIPTIONS.map((name) => new Description(name, path.join(dir, `${name}.json`)));
  }
  return loaded;
}

/** A query or path value as the parameter's type: GitHub reads `per_page=30` as the integer 30. */
function coerce(raw: string, schema: Obj): unknown {
  const type = schema['type'];
  if ((type === 'integer' || type === 'number') && /^-?\d+(\.\d+)?$/.test(raw)) return Number(raw);
  if (type === 'boolean' && (raw === 'true' || raw === 'false')) return raw === 'true';
  if (type === 'array') return raw.split(',');
  return raw;
}

export interface CheckedRequest {
  method: string;
  /** The path after /api/v3, percent-encoded as sent. */
  pathname: string;
  query: URLSearchParams;
  /** The parsed JSON body, undefined when there was none. */
  body: unknown;
  /** How the request authenticated. */
  auth: 'none' | 'app' | 'installation' | 'user' | 'invalid';
}

/** What is wrong with the request, per description; [] when it conforms to both. */
export function checkRequest(req: CheckedRequest): string[] {
  const out: string[] = [];
  const what = `${req.method} ${req.pathname}`;
  for (const d of descriptions()) {
    const hit = d.find(req.method, describedPath(req.method, req.pathname));
    if (!hit) {
      out.push(`${d.name}: no operation ${what}${d.hasPath(req.pathname) ? ' (the path exists with other methods)' : ''}`);
      continue;
    }
    const { route, params } = hit;
    const op = `${route.method} ${route.template}`;
    const declared = [...(route.pathParams ?? []).map((p, i) => ({ p, at: `${route.pointer.replace(/\/[^/]+$/, '')}/parameters/${i}` })), ...(route.op.parameters ?? []).map((p, i) => ({ p, at: `${route.pointer}/parameters/${i}` }))].map(({ p, at }) => d.deref(p, at));
    const names = [...route.template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
    names.forEach((name, i) => {
      const param = declared.find((p) => p.value['in'] === 'path' && p.value['name'] === name);
      if (!param) return;
      const raw = decodeURIComponent(params[i] ?? '');
      const schema = d.deref(param.value['schema'] as Obj, `${param.pointer}/schema`);
      for (const e of d.errors(schema.pointer, coerce(raw, schema.value))) out.push(`${d.name}: ${op}: path parameter ${name}=${raw}: ${e.replace('(body) ', '')}`);
    });
    for (const key of new Set(req.query.keys())) {
      const param = declared.find((p) => p.value['in'] === 'query' && p.value['name'] === key);
      if (!param) {
        out.push(`${d.name}: ${op}: query parameter ${key} is not described`);
        continue;
      }
      const schema = d.deref(param.value['schema'] as Obj, `${param.pointer}/schema`);
      for (const value of req.query.getAll(key)) {
        for (const e of d.errors(schema.pointer, coerce(value, schema.value))) out.push(`${d.name}: ${op}: query parameter ${key}=${value}: ${e.replace('(body) ', '')}`);
      }
    }
    for (const p of declared) {
      if (p.value['required'] === true && p.value['in'] === 'query' && !req.query.has(String(p.value['name']))) out.push(`${d.name}: ${op}: required query parameter ${String(p.value['name'])} is missing`);
    }
    const rb = route.op.requestBody ? d.deref(route.op.requestBody, `${route.pointer}/requestBody`) : undefined;
    const content = rb && isObj(rb.value['content']) ? (rb.value['content'] as Obj) : undefined;
    const json = content && isObj(content['application/json']) ? (content['application/json'] as Obj) : undefined;
    if (req.body === undefined) {
      if (rb?.value['required'] === true && json && !isEmptyAllowed(d, json)) out.push(`${d.name}: ${op}: the request body is required`);
    } else if (!json) {
      out.push(`${d.name}: ${op}: takes no JSON body, got ${JSON.stringify(req.body).slice(0, 120)}`);
    } else {
      const pointer = `${rb!.pointer}/content/application~1json/schema`;
      for (const e of d.errors(pointer, req.body)) out.push(`${d.name}: ${op}: body ${e}`);
      const unknown: string[] = [];
      d.unknownProperties(req.body, json['schema'] as Obj, '(body)', unknown);
      for (const u of unknown) out.push(`${d.name}: ${op}: ${u} is not in the description`);
    }
    if (req.auth === 'installation' && route.op['x-github']?.enabledForGitHubApps === false && !APP_TOKEN_EXCEPTIONS.has(op)) {
      out.push(`${d.name}: ${op} is not available to GitHub Apps (x-github.enabledForGitHubApps is false), yet called with an installation token`);
    }
  }
  return [...new Set(out)];
}

function isEmptyAllowed(d: Description, json: Obj): boolean {
  const schema = isObj(json['schema']) ? d.deref(json['schema'], '').value : {};
  return !Array.isArray(schema['required']) || schema['required'].length === 0;
}

/** What is wrong with a JSON answer the stand-in gives, per description. */
export function checkResponse(method: string, pathname: string, status: number, body: unknown): string[] {
  if (status === 304 || status >= 500) return [];
  const out: string[] = [];
  for (const d of descriptions()) {
    const hit = d.find(method, describedPath(method, pathname));
    if (!hit) continue; // reported with the request
    const { route } = hit;
    const op = `${route.method} ${route.template}`;
    const responses = route.op.responses ?? {};
    const described = responses[String(status)] ?? (status >= 400 ? responses['default'] : undefined);
    if (!described) {
      if (status < 300) out.push(`${d.name}: ${op}: the stand-in answered ${status}, which the description does not list (${Object.keys(responses).join(', ')})`);
      continue;
    }
    const r = d.deref(described, `${route.pointer}/responses/${status}`);
    const content = isObj(r.value['content']) ? (r.value['content'] as Obj) : undefined;
    const type = content ? Object.keys(content).find((t) => /json/.test(t)) : undefined;
    if (!type || !isObj((content![type] as Obj)['schema'])) continue;
    if (method === 'HEAD' || status === 204) continue;
    const pointer = `${r.pointer}/content/${pointerPart(type)}/schema`;
    for (const e of d.errors(pointer, body)) out.push(`${d.name}: ${op}: answer ${status} ${e}`);
  }
  return [...new Set(out)];
}

// ------------------------------------------------------------------ failing the test that made it

export interface ViolationSink {
  /** Violations not yet reported by a test. */
  pending: string[];
  /** Every violation seen (also the reported ones). */
  all: string[];
}

const live = new Set<ViolationSink>();

export function openSink(): ViolationSink {
  const sink: ViolationSink = { pending: [], all: [] };
  live.add(sink);
  return sink;
}

export function record(sink: ViolationSink, what: string, problems: string[]): void {
  if (problems.length === 0) return;
  const line = `${what}\n    ${problems.join('\n    ')}`;
  sink.pending.push(line);
  sink.all.push(line);
}

function takePending(sinks: Iterable<ViolationSink>): string[] {
  const out: string[] = [];
  for (const s of sinks) out.push(...s.pending.splice(0));
  return out;
}

/** The violations no test has reported yet, taken: for a test that sends a bad request on purpose. */
export function takeViolations(sink: ViolationSink): string[] {
  return takePending([sink]);
}

export function closeSink(sink: ViolationSink): void {
  live.delete(sink);
  const left = takePending([sink]);
  if (left.length > 0) throw violationError(left);
}

function violationError(all: string[]): Error {
  const counts = new Map<string, number>();
  for (const l of all) counts.set(l, (counts.get(l) ?? 0) + 1);
  const lines = [...counts].map(([l, n]) => (n > 1 ? `${l}\n    (${n} times)` : l));
  return new Error(`requests or answers that do not conform to GitHub's REST description (test/support/github-standin/conformance.ts):\n  ${lines.join('\n  ')}`);
}

// Under `node --test`, a test during which a violation happened fails with it (its afterEach).
if (process.env['NODE_TEST_CONTEXT']) {
  afterEach(() => {
    const lines = takePending(live);
    if (lines.length > 0) throw violationError(lines);
  });
}
