/**
 * GitHub's GraphQL API at `POST /api/graphql` (the Enterprise Server path), for the few types
 * Lilypad reads: a pull request's review threads with their comments, and `addReaction` (the only
 * way GitHub offers to react to a pull request *review*: REST has reaction endpoints for issues,
 * issue comments and review comments, not for reviews).
 *
 * This is a small GraphQL executor, not a general engine: it parses real query documents
 * (operations, variables, aliases, arguments, nested selections, `__typename`) and answers them
 * against the schema below. Anything outside it is answered the way GitHub answers a query it
 * cannot validate: HTTP 200 with `errors` (`undefinedField`, `argumentNotAccepted`, …) and no
 * `data`. Fragments and directives are refused the same way.
 */
import { levelAllows, nodeId } from './state.ts';
import type { ReactionContent } from './types.ts';
import type { CommentRec, IssueRec, ReactionRec, RepoRec, ReviewCommentRec, ReviewRec, StandinState, ThreadRec, TokenRec } from './state.ts';
import type { AuthInfo } from './auth.ts';
import type { ApiResponse } from './rest.ts';

// ------------------------------------------------------------------ lexer

type Tok = { kind: 'punct' | 'name' | 'int' | 'float' | 'string'; value: string; line: number; column: number };

class GraphQLSyntaxError extends Error {
  constructor(
    message: string,
    readonly line: number,
    readonly column: number,
  ) {
    super(message);
  }
}

function lex(src: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  let line = 1;
  let lineStart = 0;
  while (i < src.length) {
    const c = src[i] ?? '';
    const column = i - lineStart + 1;
    if (c === '\n') {
      line++;
      i++;
      lineStart = i;
    } else if (c === ' ' || c === '\t' || c === '\r' || c === ',' || c === '\uFEFF') {
      i++;
    } else if (c === '#') {
      while (i < src.length && src[i] !== '\n') i++;
    } else if (src.startsWith('...', i)) {
      toks.push({ kind: 'punct', value: '...', line, column });
      i += 3;
    } else if ('!$()=:@[]{}|&'.includes(c)) {
      toks.push({ kind: 'punct', value: c, line, column });
      i++;
    } else if (/[_A-Za-z]/.test(c)) {
      const m = /^[_A-Za-z][_0-9A-Za-z]*/.exec(src.slice(i));
      const name = m?.[0] ?? c;
      toks.push({ kind: 'name', value: name, line, column });
      i += name.length;
    } else if (/[-0-9]/.test(c)) {
      const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(src.slice(i));
      if (!m) throw new GraphQLSyntaxError(`Parse error on "${c}"`, line, column);
      toks.push({ kind: m[2] || m[3] ? 'float' : 'int', value: m[0], line, column });
      i += m[0].length;
    } else if (c === '"') {
      if (src.startsWith('"""', i)) throw new GraphQLSyntaxError('block strings are not supported by the GitHub stand-in', line, column);
      let j = i + 1;
      while (j < src.length && src[j] !== '"') j += src[j] === '\\' ? 2 : 1;
      if (j >= src.length) throw new GraphQLSyntaxError('Parse error: unterminated string', line, column);
      toks.push({ kind: 'string', value: JSON.parse(src.slice(i, j + 1)) as string, line, column });
      i = j + 1;
    } else {
      throw new GraphQLSyntaxError(`Parse error on "${c}"`, line, column);
    }
  }
  return toks;
}

// ----------------------------------------------------------------- parser

type Value =
  | { kind: 'variable'; name: string }
  | { kind: 'literal'; value: unknown }
  | { kind: 'enum'; value: string }
  | { kind: 'list'; values: Value[] }
  | { kind: 'object'; fields: Record<string, Value> };

interface Field {
  alias: string;
  name: string;
  args: Record<string, Value>;
  selections: Field[] | null;
  line: number;
  column: number;
}

interface Operation {
  type: 'query' | 'mutation';
  variables: Record<string, { defaultValue: Value | undefined }>;
  selections: Field[];
}

class Parser {
  private pos = 0;
  constructor(private readonly toks: Tok[]) {}

  private peek(): Tok | undefined {
    return this.toks[this.pos];
  }

  private next(): Tok {
    const t = this.toks[this.pos++];
    if (!t) throw new GraphQLSyntaxError('Parse error on end of input', 0, 0);
    return t;
  }

  private expect(value: string): Tok {
    const t = this.next();
    if (t.value !== value || (t.kind !== 'punct' && t.kind !== 'name')) throw new GraphQLSyntaxError(`Parse error on "${t.value}" (expected "${value}")`, t.line, t.column);
    return t;
  }

  private is(value: string): boolean {
    const t = this.peek();
    return t !== undefined && t.kind === 'punct' && t.value === value;
  }

  document(): Operation[] {
    const ops: Operation[] = [];
    while (this.peek()) ops.push(this.operation());
    if (ops.length === 0) throw new GraphQLSyntaxError('Parse error on end of input', 0, 0);
    return ops;
  }

  private operation(): Operation {
    const t = this.peek();
    if (t?.kind === 'name' && t.value === 'fragment') throw new GraphQLSyntaxError('fragments are not supported by the GitHub stand-in', t.line, t.column);
    let type: Operation['type'] = 'query';
    const variables: Operation['variables'] = {};
    if (t?.kind === 'name') {
      if (t.value !== 'query' && t.value !== 'mutation') throw new GraphQLSyntaxError(`Parse error on "${t.value}"`, t.line, t.column);
      type = t.value;
      this.next();
      if (this.peek()?.kind === 'name') this.next(); // operation name
      if (this.is('(')) {
        this.next();
        while (!this.is(')')) {
          this.expect('$');
          const name = this.next().value;
          this.expect(':');
          this.typeRef();
          let defaultValue: Value | undefined;
          if (this.is('=')) {
            this.next();
            defaultValue = this.value();
          }
          variables[name] = { defaultValue };
        }
        this.next();
      }
    }
    return { type, variables, selections: this.selectionSet() };
  }

  private typeRef(): void {
    if (this.is('[')) {
      this.next();
      this.typeRef();
      this.expect(']');
    } else {
      const t = this.next();
      if (t.kind !== 'name') throw new GraphQLSyntaxError(`Parse error on "${t.value}"`, t.line, t.column);
    }
    if (this.is('!')) this.next();
  }

  private selectionSet(): Field[] {
    this.expect('{');
    const fields: Field[] = [];
    while (!this.is('}')) {
      const t = this.next();
      if (t.kind === 'punct' && t.value === '...') throw new GraphQLSyntaxError('fragments are not supported by the GitHub stand-in', t.line, t.column);
      if (t.kind !== 'name') throw new GraphQLSyntaxError(`Parse error on "${t.value}"`, t.line, t.column);
      let alias = t.value;
      let name = t.value;
      if (this.is(':')) {
        this.next();
        name = this.next().value;
      }
      const args: Record<string, Value> = {};
      if (this.is('(')) {
        this.next();
        while (!this.is(')')) {
          const argName = this.next().value;
          this.expect(':');
          args[argName] = this.value();
        }
        this.next();
      }
      if (this.is('@')) throw new GraphQLSyntaxError('directives are not supported by the GitHub stand-in', t.line, t.column);
      const selections = this.is('{') ? this.selectionSet() : null;
      fields.push({ alias, name, args, selections, line: t.line, column: t.column });
    }
    this.next();
    return fields;
  }

  private value(): Value {
    const t = this.next();
    if (t.kind === 'punct' && t.value === '$') return { kind: 'variable', name: this.next().value };
    if (t.kind === 'int') return { kind: 'literal', value: Number.parseInt(t.value, 10) };
    if (t.kind === 'float') return { kind: 'literal', value: Number.parseFloat(t.value) };
    if (t.kind === 'string') return { kind: 'literal', value: t.value };
    if (t.kind === 'name') {
      if (t.value === 'true' || t.value === 'false') return { kind: 'literal', value: t.value === 'true' };
      if (t.value === 'null') return { kind: 'literal', value: null };
      return { kind: 'enum', value: t.value };
    }
    if (t.value === '[') {
      const values: Value[] = [];
      while (!this.is(']')) values.push(this.value());
      this.next();
      return { kind: 'list', values };
    }
    if (t.value === '{') {
      const fields: Record<string, Value> = {};
      while (!this.is('}')) {
        const key = this.next().value;
        this.expect(':');
        fields[key] = this.value();
      }
      this.next();
      return { kind: 'object', fields };
    }
    throw new GraphQLSyntaxError(`Parse error on "${t.value}"`, t.line, t.column);
  }
}

// ----------------------------------------------------------------- schema

interface Ctx {
  state: StandinState;
  token: TokenRec;
  errors: GraphQLError[];
}

interface GraphQLError {
  message: string;
  type?: string;
  path?: (string | number)[];
  locations?: { line: number; column: number }[];
  extensions?: Record<string, unknown>;
}

/** A validation problem: the whole request fails with errors and no data, as on GitHub. */
class ValidationError extends Error {
  constructor(readonly error: GraphQLError) {
    super(error.message);
  }
}

/** A field that resolves to null with an error beside it (NOT_FOUND, FORBIDDEN, …). */
class FieldError extends Error {
  constructor(
    message: string,
    readonly type: string,
  ) {
    super(message);
  }
}

type Args = Record<string, unknown>;
interface FieldDef {
  /** The object type it returns, or 'scalar'. Interfaces resolve their concrete type with `typeOf`. */
  type: string;
  list?: boolean;
  args?: string[];
  resolve: (parent: unknown, args: Args, ctx: Ctx) => unknown;
}

const REACTION_ENUM: Record<string, ReactionContent> = {
  THUMBS_UP: '+1',
  THUMBS_DOWN: '-1',
  LAUGH: 'laugh',
  HOORAY: 'hooray',
  CONFUSED: 'confused',
  HEART: 'heart',
  ROCKET: 'rocket',
  EYES: 'eyes',
};

function scalar(resolve: (parent: never) => unknown): FieldDef {
  return { type: 'scalar', resolve: (p) => resolve(p as never) };
}

function encodeCursor(index: number): string {
  return Buffer.from(`cursor:v2:${index}`).toString('base64');
}

function decodeCursor(cursor: unknown): number {
  if (cursor === null || cursor === undefined) return -1;
  const m = /^cursor:v2:(\d+)$/.exec(Buffer.from(String(cursor), 'base64').toString('utf8'));
  if (!m) throw new FieldError(`\`${String(cursor)}\` does not appear to be a valid cursor.`, 'INVALID_CURSOR_ARGUMENTS');
  return Number(m[1]);
}

interface Connection<T> {
  nodes: T[];
  totalCount: number;
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
}

function paginate<T>(items: T[], args: Args, connectionName: string): Connection<T> {
  const first = args.first;
  if (typeof first !== 'number') {
    throw new FieldError(`You must provide a \`first\` or \`last\` value to properly paginate the \`${connectionName}\` connection.`, 'MISSING_PAGINATION_BOUNDARIES');
  }
  if (first > 100) {
    throw new FieldError(`Requesting ${first} records on the \`${connectionName}\` connection exceeds the \`first\` limit of 100 records.`, 'EXCESSIVE_PAGINATION');
  }
  const start = decodeCursor(args.after) + 1;
  const nodes = items.slice(start, start + first);
  return {
    nodes,
    totalCount: items.length,
    pageInfo: {
      hasNextPage: start + first < items.length,
      hasPreviousPage: start > 0,
      startCursor: nodes.length ? encodeCursor(start) : null,
      endCursor: nodes.length ? encodeCursor(start + nodes.length - 1) : null,
    },
  };
}

const connectionFields = (nodeType: string): Record<string, FieldDef> => ({
  nodes: { type: nodeType, list: true, resolve: (p) => (p as Connection<unknown>).nodes },
  totalCount: scalar((p: Connection<unknown>) => p.totalCount),
  pageInfo: { type: 'PageInfo', resolve: (p) => (p as Connection<unknown>).pageInfo },
});

const actorFields: Record<string, FieldDef> = {
  // GitHub's GraphQL gives an app's bot user its login without the `[bot]` suffix REST shows.
  login: scalar((u: { login: string; type: string }) => (u.type === 'Bot' ? u.login.replace(/\[bot\]$/, '') : u.login)),
  url: scalar((u: { login: string }) => u.login),
};

const SCHEMA: Record<string, Record<string, FieldDef>> = {
  Query: {
    repository: {
      type: 'Repository',
      args: ['owner', 'name', 'followRenames'],
      resolve: (_p, args, ctx) => {
        const repo = ctx.state.findRepo(String(args.owner ?? ''), String(args.name ?? ''));
        const t = ctx.token;
        const covered = repo && repo.owner === t.installation.account && (t.repositoryIds === null || t.repositoryIds.includes(repo.id));
        if (!repo || (repo.private && !covered)) throw new FieldError(`Could not resolve to a Repository with the name '${String(args.owner)}/${String(args.name)}'.`, 'NOT_FOUND');
        return repo;
      },
    },
  },
  Mutation: {
    addReaction: {
      type: 'AddReactionPayload',
      args: ['input'],
      resolve: (_p, args, ctx) => {
        const input = (args.input ?? {}) as Args;
        const content = REACTION_ENUM[String(input.content)];
        if (!content) throw new FieldError(`Argument 'content' on InputObject 'AddReactionInput' has an invalid value (${String(input.content)}).`, 'INVALID');
        const subject = findReactable(ctx.state, String(input.subjectId ?? ''));
        if (!subject) throw new FieldError(`Could not resolve to a node with the global id of '${String(input.subjectId)}'`, 'NOT_FOUND');
        const t = ctx.token;
        const repo = subject.repo;
        const covered = repo.owner === t.installation.account && (t.repositoryIds === null || t.repositoryIds.includes(repo.id));
        const perm = subject.kind === 'issue' || subject.kind === 'issueComment' ? (levelAllows(t.permissions.issues, 'write') || levelAllows(t.permissions.pull_requests, 'write')) : levelAllows(t.permissions.pull_requests, 'write');
        if (!covered || !perm) throw new FieldError('Resource not accessible by integration', 'FORBIDDEN');
        const { reaction } = ctx.state.addReaction(subject.reactions, ctx.state.botUser, content);
        return { reaction, subject };
      },
    },
  },
  Repository: {
    id: scalar((r: RepoRec) => nodeId('Repository', r.id)),
    name: scalar((r: RepoRec) => r.name),
    nameWithOwner: scalar((r: RepoRec) => `${r.owner.login}/${r.name}`),
    issue: {
      type: 'Issue',
      args: ['number'],
      resolve: (p, args, ctx) => {
        const repo = p as RepoRec;
        if (!levelAllows(ctx.token.permissions.issues, 'read')) throw new FieldError('Resource not accessible by integration', 'FORBIDDEN');
        const issue = repo.issues.get(Number(args.number));
        if (!issue || issue.pull) throw new FieldError(`Could not resolve to an Issue with the number of ${String(args.number)}.`, 'NOT_FOUND');
        return issue;
      },
    },
    pullRequest: {
      type: 'PullRequest',
      args: ['number'],
      resolve: (p, args, ctx) => {
        const repo = p as RepoRec;
        const t = ctx.token;
        if (!levelAllows(t.permissions.pull_requests, 'read')) throw new FieldError('Resource not accessible by integration', 'FORBIDDEN');
        const issue = repo.issues.get(Number(args.number));
        if (!issue || !issue.pull) throw new FieldError(`Could not resolve to a PullRequest with the number of ${String(args.number)}.`, 'NOT_FOUND');
        return issue;
      },
    },
  },
  Issue: {
    id: scalar((i: IssueRec) => nodeId('Issue', i.id)),
    number: scalar((i: IssueRec) => i.number),
    title: scalar((i: IssueRec) => i.title),
    body: scalar((i: IssueRec) => i.body ?? ''),
    createdAt: scalar((i: IssueRec) => i.createdAt),
    lastEditedAt: scalar((i: IssueRec) => i.lastEdit?.at ?? null),
    editor: { type: 'Actor', resolve: (p) => (p as IssueRec).lastEdit?.editor ?? null },
    author: { type: 'Actor', resolve: (p) => (p as IssueRec).user },
  },
  PullRequest: {
    id: scalar((i: IssueRec) => nodeId('PullRequest', i.pull?.id ?? 0)),
    number: scalar((i: IssueRec) => i.number),
    title: scalar((i: IssueRec) => i.title),
    reviewThreads: { type: 'PullRequestReviewThreadConnection', args: ['first', 'after'], resolve: (p, args, ctx) => paginate(ctx.state.threadsOf(p as IssueRec), args, 'reviewThreads') },
  },
  PullRequestReviewThreadConnection: connectionFields('PullRequestReviewThread'),
  PullRequestReviewThread: {
    id: scalar((t: ThreadRec) => nodeId('PullRequestReviewThread', t.id)),
    isResolved: scalar((t: ThreadRec) => t.resolved),
    isOutdated: scalar((t: ThreadRec) => t.comments[0]?.outdated ?? false),
    path: scalar((t: ThreadRec) => t.comments[0]?.path ?? ''),
    line: scalar((t: ThreadRec) => (t.comments[0] && !t.comments[0].outdated ? t.comments[0].line : null)),
    originalLine: scalar((t: ThreadRec) => t.comments[0]?.originalLine ?? null),
    diffSide: scalar((t: ThreadRec) => t.comments[0]?.side ?? 'RIGHT'),
    resolvedBy: { type: 'User', resolve: (p) => (p as ThreadRec).resolvedBy },
    comments: { type: 'PullRequestReviewCommentConnection', args: ['first', 'after'], resolve: (p, args) => paginate((p as ThreadRec).comments, args, 'comments') },
  },
  PullRequestReviewCommentConnection: connectionFields('PullRequestReviewComment'),
  PullRequestReviewComment: {
    id: scalar((c: ReviewCommentRec) => nodeId('PullRequestReviewComment', c.id)),
    databaseId: scalar((c: ReviewCommentRec) => c.id),
    body: scalar((c: ReviewCommentRec) => c.body),
    author: { type: 'Actor', resolve: (p) => (p as ReviewCommentRec).user },
    authorAssociation: scalar((c: ReviewCommentRec) => c.issue.repo.owner === c.user ? 'OWNER' : c.issue.repo.collaborators.has(c.user.login.toLowerCase()) ? 'COLLABORATOR' : 'NONE'),
    createdAt: scalar((c: ReviewCommentRec) => c.createdAt),
    updatedAt: scalar((c: ReviewCommentRec) => c.updatedAt),
    diffHunk: scalar((c: ReviewCommentRec) => c.diffHunk),
    outdated: scalar((c: ReviewCommentRec) => c.outdated),
    path: scalar((c: ReviewCommentRec) => c.path),
    line: scalar((c: ReviewCommentRec) => (c.outdated ? null : c.line)),
    originalLine: scalar((c: ReviewCommentRec) => c.originalLine),
    replyTo: { type: 'PullRequestReviewComment', resolve: (p) => (p as ReviewCommentRec).inReplyTo },
    pullRequestReview: { type: 'PullRequestReview', resolve: (p) => (p as ReviewCommentRec).review },
  },
  PullRequestReview: {
    id: scalar((r: ReviewRec) => nodeId('PullRequestReview', r.id)),
    databaseId: scalar((r: ReviewRec) => r.id),
    state: scalar((r: ReviewRec) => r.state),
    body: scalar((r: ReviewRec) => r.body),
    author: { type: 'Actor', resolve: (p) => (p as ReviewRec).user },
  },
  Actor: actorFields,
  User: actorFields,
  PageInfo: {
    hasNextPage: scalar((p: Connection<unknown>['pageInfo']) => p.hasNextPage),
    hasPreviousPage: scalar((p: Connection<unknown>['pageInfo']) => p.hasPreviousPage),
    startCursor: scalar((p: Connection<unknown>['pageInfo']) => p.startCursor),
    endCursor: scalar((p: Connection<unknown>['pageInfo']) => p.endCursor),
  },
  AddReactionPayload: {
    reaction: { type: 'Reaction', resolve: (p) => (p as { reaction: ReactionRec }).reaction },
    subject: { type: 'Reactable', resolve: (p) => (p as { subject: Reactable }).subject },
  },
  Reaction: {
    id: scalar((r: ReactionRec) => nodeId('Reaction', r.id)),
    databaseId: scalar((r: ReactionRec) => r.id),
    content: scalar((r: ReactionRec) => Object.entries(REACTION_ENUM).find(([, v]) => v === r.content)?.[0] ?? null),
  },
  Reactable: {
    id: scalar((s: Reactable) => s.nodeId),
    databaseId: scalar((s: Reactable) => s.databaseId),
  },
};

/** The concrete type name `__typename` reports. */
function typeOf(typeName: string, value: unknown): string {
  if (typeName === 'Actor' || typeName === 'User') return (value as { type: string }).type === 'Bot' ? 'Bot' : (value as { type: string }).type === 'Organization' ? 'Organization' : 'User';
  if (typeName === 'Reactable') return (value as Reactable).typename;
  return typeName;
}

interface Reactable {
  kind: 'review' | 'reviewComment' | 'issueComment' | 'issue';
  typename: string;
  nodeId: string;
  databaseId: number;
  repo: RepoRec;
  reactions: ReactionRec[];
}

function findReactable(state: StandinState, id: string): Reactable | undefined {
  for (const r of state.reviews.values()) {
    if (nodeId('PullRequestReview', r.id) === id) return { kind: 'review', typename: 'PullRequestReview', nodeId: id, databaseId: r.id, repo: r.issue.repo, reactions: r.reactions };
  }
  for (const c of state.reviewComments.values()) {
    if (nodeId('PullRequestReviewComment', c.id) === id) return { kind: 'reviewComment', typename: 'PullRequestReviewComment', nodeId: id, databaseId: c.id, repo: c.issue.repo, reactions: c.reactions };
  }
  for (const c of state.comments.values() as Iterable<CommentRec>) {
    if (nodeId('IssueComment', c.id) === id) return { kind: 'issueComment', typename: 'IssueComment', nodeId: id, databaseId: c.id, repo: c.issue.repo, reactions: c.reactions };
  }
  for (const repo of state.repos.values()) {
    for (const i of repo.issues.values()) {
      if (nodeId(i.pull ? 'PullRequest' : 'Issue', i.pull ? i.pull.id : i.id) === id) return { kind: 'issue', typename: i.pull ? 'PullRequest' : 'Issue', nodeId: id, databaseId: i.id, repo, reactions: i.reactions };
    }
  }
  return undefined;
}

// --------------------------------------------------------------- executor

function resolveValue(v: Value, variables: Record<string, unknown>, op: Operation): unknown {
  switch (v.kind) {
    case 'variable': {
      if (!(v.name in op.variables)) throw new ValidationError({ message: `Variable $${v.name} is used by anonymous query but not declared`, extensions: { code: 'variableNotDefined', variableName: v.name } });
      const given = variables[v.name];
      const dflt = op.variables[v.name]?.defaultValue;
      return given !== undefined ? given : dflt ? resolveValue(dflt, variables, op) : null;
    }
    case 'literal':
      return v.value;
    case 'enum':
      return v.value;
    case 'list':
      return v.values.map((x) => resolveValue(x, variables, op));
    case 'object':
      return Object.fromEntries(Object.entries(v.fields).map(([k, x]) => [k, resolveValue(x, variables, op)]));
  }
}

function execute(typeName: string, parent: unknown, fields: Field[], ctx: Ctx, variables: Record<string, unknown>, op: Operation, path: (string | number)[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const defs = SCHEMA[typeName] ?? {};
  for (const f of fields) {
    const here = [...path, f.alias];
    if (f.name === '__typename') {
      out[f.alias] = typeOf(typeName, parent);
      continue;
    }
    const def = defs[f.name];
    const location = [{ line: f.line, column: f.column }];
    if (!def) {
      throw new ValidationError({ message: `Field '${f.name}' doesn't exist on type '${typeName}'`, path: here, locations: location, extensions: { code: 'undefinedField', typeName, fieldName: f.name } });
    }
    for (const a of Object.keys(f.args)) {
      if (!(def.args ?? []).includes(a)) {
        throw new ValidationError({ message: `Field '${f.name}' doesn't accept argument '${a}'`, path: here, locations: location, extensions: { code: 'argumentNotAccepted', name: f.name, typeName: 'Field', argumentName: a } });
      }
    }
    if (def.type === 'scalar' && f.selections) {
      throw new ValidationError({ message: `Selections can't be made on scalars (field '${f.name}' returns a scalar)`, path: here, locations: location, extensions: { code: 'selectionMismatch', nodeName: `field '${f.name}'` } });
    }
    if (def.type !== 'scalar' && !f.selections) {
      throw new ValidationError({ message: `Field must have selections (field '${f.name}' returns ${def.type}${def.list ? ' list' : ''} but has no selections)`, path: here, locations: location, extensions: { code: 'selectionMismatch', nodeName: `field '${f.name}'` } });
    }
    const args = Object.fromEntries(Object.entries(f.args).map(([k, v]) => [k, resolveValue(v, variables, op)]));
    let value: unknown;
    try {
      value = def.resolve(parent, args, ctx);
    } catch (err) {
      if (!(err instanceof FieldError)) throw err;
      ctx.errors.push({ type: err.type, path: here, locations: location, message: err.message });
      out[f.alias] = null;
      continue;
    }
    if (def.type === 'scalar' || value === null || value === undefined) {
      out[f.alias] = value ?? null;
    } else if (def.list) {
      out[f.alias] = (value as unknown[]).map((item, i) => execute(def.type, item, f.selections ?? [], ctx, variables, op, [...here, i]));
    } else {
      out[f.alias] = execute(def.type, value, f.selections ?? [], ctx, variables, op, here);
    }
  }
  return out;
}

/** Answers `POST /api/graphql`. */
export function handleGraphql(state: StandinState, auth: AuthInfo, body: unknown): ApiResponse {
  if (auth.kind === 'invalid') return { status: 401, json: { message: 'Bad credentials', documentation_url: 'https://docs.github.com/graphql' } };
  if (auth.kind !== 'installation') {
    return { status: 401, json: { message: 'This endpoint requires you to be authenticated.', documentation_url: 'https://docs.github.com/graphql/guides/forming-calls-with-graphql#authenticating-with-graphql' } };
  }
  const b = (typeof body === 'object' && body !== null ? body : {}) as { query?: unknown; variables?: unknown };
  if (typeof b.query !== 'string') return { status: 200, json: { errors: [{ message: 'A query attribute must be specified and must be a string.' }] } };
  const variables = (typeof b.variables === 'object' && b.variables !== null ? b.variables : {}) as Record<string, unknown>;
  let ops: Operation[];
  try {
    ops = new Parser(lex(b.query)).document();
  } catch (err) {
    if (!(err instanceof GraphQLSyntaxError)) throw err;
    return { status: 200, json: { errors: [{ message: err.message, locations: [{ line: err.line, column: err.column }] }] } };
  }
  const op = ops[0];
  if (!op || ops.length > 1) return { status: 200, json: { errors: [{ message: 'An operation name is required (the GitHub stand-in runs single-operation documents only)' }] } };
  const ctx: Ctx = { state, token: auth.token, errors: [] };
  try {
    const data = execute(op.type === 'query' ? 'Query' : 'Mutation', null, op.selections, ctx, variables, op, []);
    return { status: 200, json: ctx.errors.length ? { data, errors: ctx.errors } : { data } };
  } catch (err) {
    if (err instanceof ValidationError) return { status: 200, json: { errors: [err.error] } };
    throw err;
  }
}
