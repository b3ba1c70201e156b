/** A run of backticks longer than any in `text`: a code fence or span the text cannot close. */
export function fenceFor(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  return '`'.repeat(longest + 1);
}

/** `text` as a Markdown block quote (trailing blank lines dropped, empty lines kept as `>`). */
export function blockQuote(text: string): string {
  return text
    .replace(/\s+$/, '')
    .split('\n')
    .map((l) => (l ? `> ${l}` : '>'))
    .join('\n');
}
