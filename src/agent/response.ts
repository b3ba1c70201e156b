import { randomBytes } from 'node:crypto';
import type { ChatCompletion } from 'openai/resources/chat/completions';
import { hasToolCallMarkup, parseQwen3CoderToolCalls, type DeclaredTool } from './qwen3-coder-parser.ts';

/** An assistant message as kept in history: only these fields, sent back unchanged every turn. */
interface StoredToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}
export interface StoredAssistantMessage {
  role: 'assistant';
  content: string;
  tool_calls?: StoredToolCall[];
  reasoning_content?: string;
}
export interface ToolMessage {
  role: 'tool';
  tool_call_id: string;
  content: string;
}

interface InterpretedTurn {
  message: StoredAssistantMessage;
  calls: StoredToolCall[];
  finishReason: string;
  /** Tool calls recovered from text by Lilypad's own parser (misconfigured server). */
  rescued: boolean;
  warnings: string[];
}

const FIX_TOOL_PARSER =
  'start SGLang with --tool-call-parser qwen3_coder (vLLM: --enable-auto-tool-choice --tool-call-parser qwen3_coder)';
const FIX_REASONING_PARSER = 'start the server with --reasoning-parser qwen3';

interface WireMessage {
  content?: string | null;
  reasoning_content?: string | null;
  reasoning?: string | null;
  tool_calls?: Array<{ id?: string; type?: string; function?: { name?: string; arguments?: string } }> | null;
}

/**
 * Reads one response the way SGLang and vLLM really send it: reasoning under either field name,
 * opaque tool-call ids, and, when the server did not parse the qwen3_coder markup, the calls
 * rescued from the text (declared tool names only) with a warning naming the flag to fix.
 */
export function interpretResponse(completion: ChatCompletion, tools: readonly DeclaredTool[]): InterpretedTurn {
  const choice = completion.choices[0];
  const wire = (choice?.message ?? {}) as WireMessage;
  const finishReason = String(choice?.finish_reason ?? 'stop');
  const warnings: string[] = [];
  let content = typeof wire.content === 'string' ? wire.content : '';
  let reasoning = [wire.reasoning_content, wire.reasoning].find((r): r is string => typeof r === 'string' && r.length > 0) ?? '';

  // No reasoning parser: the reasoning and the closing </think> arrive inside content.
  if (!reasoning && content.includes('</think>')) {
    const at = content.indexOf('</think>');
    reasoning = content.slice(0, at).replace(/^\s*<think>/, '').trim();
    content = content.slice(at + '</think>'.length).replace(/^\s+/, '');
    warnings.push(`the reply carried its reasoning and </think> inside content; ${FIX_REASONING_PARSER}`);
  }

  let calls: StoredToolCall[] = (wire.tool_calls ?? [])
    .filter((c) => c && c.function && typeof c.function.name === 'string')
    .map((c) => ({
      id: typeof c.id === 'string' && c.id ? c.id : newCallId(),
      type: 'function' as const,
      function: { name: c.function?.name ?? '', arguments: typeof c.function?.arguments === 'string' ? c.function.arguments : '{}' },
    }));

  let rescued = false;
  if (calls.length === 0 && hasToolCallMarkup(content)) {
    const parsed = parseQwen3CoderToolCalls(content, tools);
    if (parsed.calls.length > 0) {
      rescued = true;
      content = parsed.content;
      calls = parsed.calls.map((c) => ({ id: newCallId(), type: 'function' as const, function: { name: c.name, arguments: c.arguments } }));
      warnings.push(
        `the model server returned ${parsed.calls.length} tool call(s) as text in content instead of tool_calls; ` +
          `Lilypad parsed them itself. Fix the server: ${FIX_TOOL_PARSER}`,
      );
    } else {
      warnings.push(`tool-call markup in content could not be parsed as a qwen3_coder call; the turn ended the run. ${FIX_TOOL_PARSER}`);
    }
    if (parsed.rejected.length > 0) {
      warnings.push(`ignored call(s) to undeclared tool(s): ${[...new Set(parsed.rejected)].join(', ')}`);
    }
  } else if (calls.length === 0 && hasToolCallMarkup(reasoning)) {
    warnings.push('tool-call markup appeared inside reasoning (the model did not close </think>); the turn had no tool call');
  }

  const message: StoredAssistantMessage = { role: 'assistant', content };
  if (calls.length > 0) message.tool_calls = calls;
  if (reasoning) message.reasoning_content = reasoning;
  return { message, calls, finishReason, rescued, warnings };
}

function newCallId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}
