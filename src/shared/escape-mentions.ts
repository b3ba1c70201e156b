/**
 * `@name` and `@org/team` turned into inline code, so the text pings nobody where GitHub renders it
 * and reads as a quoted name wherever it is passed on. An address (`me@example.com`) and text
 * already in backticks are left alone.
 */
export function escapeMentions(text: string): string {
  return text.replace(/(^|[^\w`])@([A-Za-z0-9][A-Za-z0-9-]*(?:\/[A-Za-z0-9_.-]+)?)/g, '$1`@$2`');
}
