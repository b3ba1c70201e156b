/**
 * The names of the five Leaf tools, in the order the model saw them (src/agent/tools.ts holds their
 * definitions). Metrics label tool calls with these and nothing else, so a made-up name from the
 * model cannot create a new time series.
 */
export const TOOL_NAMES = ['Read', 'Write', 'Edit', 'Glob', 'Bash'] as const;
