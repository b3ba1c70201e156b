/** The run page's address under LILYPAD_PUBLIC_URL (for the pull request body and the status comment). */
export function runPageUrl(publicUrl: string, runId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/runs/${encodeURIComponent(runId)}`;
}
