/**
 * The two messages a run starts with. The system text is ours (three short lines with the meaning
 * Leaf used); the user message is the issue title on the first line, then the body, verbatim
 * apart from the hygiene below. Nothing else is ever injected into the conversation.
 */
export const SYSTEM_PROMPT = [
  'You are a software engineering agent working in a checked-out code repository.',
  'Use the tools to inspect files, make focused edits and run commands.',
  'Solve the task, validate your change when practical, then reply with a brief final answer.',
].join('\n');

export function buildUserMessage(title: string, body: string): string {
  return body ? `${title}\n${body}` : title;
}

// Zero-width characters, bidi controls and Unicode tag characters: invisible to a human reviewer,
// readable by the model, the classic carrier of hidden instructions.
const INVISIBLE = /[\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF\u061C\u180E]|\uDB40[\uDC00-\uDC7F]/g;
const HTML_COMMENT = /<!--[\s\S]*?(?:-->|$)/g;

interface SanitizedText {
  text: string;
  removedComments: number;
  removedInvisible: number;
}

/** Best-effort input hygiene for issue text: strips HTML comments and invisible characters. */
export function sanitizeIssueText(text: string): SanitizedText {
  let removedComments = 0;
  let removedInvisible = 0;
  const noComments = text.replace(HTML_COMMENT, () => {
    removedComments++;
    return '';
  });
  const clean = noComments.replace(INVISIBLE, () => {
    removedInvisible++;
    return '';
  });
  return { text: clean, removedComments, removedInvisible };
}

/** Cleans an issue's title and body for the model; `warning` says what was removed, if anything. */
export function prepareIssue(title: string, body: string): { title: string; body: string; warning?: string } {
  const t = sanitizeIssueText(title);
  const b = sanitizeIssueText(body);
  const comments = t.removedComments + b.removedComments;
  const invisible = t.removedInvisible + b.removedInvisible;
  if (comments + invisible === 0) return { title: t.text, body: b.text };
  return {
    title: t.text,
    body: b.text,
    warning: `removed ${comments} HTML comment(s) and ${invisible} invisible character(s) from the issue text before the model saw it`,
  };
}
