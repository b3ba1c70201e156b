/**
 * A stand-in for GitHub Enterprise Server (REST API, git smart HTTP, webhook deliveries) for tests.
 * See server.ts for the overview and types.ts for the API.
 */
export { startGitHubStandin } from './server.ts';
export { signAppJwt } from './auth.ts';
export { signatures as webhookSignatures, exampleFor as webhookExample } from './webhooks.ts';
export { GHES_VERSION } from './state.ts';
export type * from './types.ts';
