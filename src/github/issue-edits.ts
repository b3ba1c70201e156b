import { z } from 'zod';
import { graphqlBaseUrl, statusOf, type GitHubClient } from './client.ts';

/** Who last edited an issue's title or body, and when (GitHub keeps it on the issue: `editor`, `lastEditedAt`). */
export interface LastIssueEdit {
  login: string;
  bot: boolean;
  at: string;
}

const replySchema = z.object({
  data: z
    .object({
      repository: z
        .object({
          issue: z
            .object({ lastEditedAt: z.string().nullable(), editor: z.object({ __typename: z.string(), login: z.string() }).nullable() })
            .nullable(),
        })
        .nullable(),
    })
    .nullable()
    .optional(),
  errors: z.array(z.object({ message: z.string() }).loose()).optional(),
});

const QUERY = `query LilypadIssueEditor($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) { issue(number: $number) { lastEditedAt editor { __typename login } } }
}`;

/**
 * The last edit of an issue, null when it was never edited. REST has no editor; GraphQL does. A
 * server without GraphQL (HTTP 404) answers 'unknown'; any other failure throws, since a check
 * that silently passed would let an outsider's rewrite through.
 */
export async function lastIssueEdit(client: GitHubClient, owner: string, repo: string, issueNumber: number): Promise<LastIssueEdit | null | 'unknown'> {
  let raw: unknown;
  try {
    raw = (await client.request('POST /graphql', { baseUrl: graphqlBaseUrl(client), query: QUERY, variables: { owner, name: repo, number: issueNumber } })).data;
  } catch (err) {
    if (statusOf(err) === 404) return 'unknown';
    throw err;
  }
  const reply = replySchema.safeParse(raw);
  if (!reply.success) throw new Error(`unexpected GraphQL reply for the editor of ${owner}/${repo}#${issueNumber}: ${reply.error.message}`);
  const issue = reply.data.data?.repository?.issue;
  if (!issue) throw new Error(`could not read who last edited ${owner}/${repo}#${issueNumber}: ${(reply.data.errors ?? []).map((e) => e.message).join('; ') || 'no data'}`);
  if (!issue.lastEditedAt) return null;
  // A deleted account (no editor) is someone Lilypad cannot vouch for.
  if (!issue.editor) return { login: 'ghost', bot: false, at: issue.lastEditedAt };
  const bot = issue.editor.__typename === 'Bot';
  return { login: bot && !issue.editor.login.endsWith('[bot]') ? `${issue.editor.login}[bot]` : issue.editor.login, bot, at: issue.lastEditedAt };
}
