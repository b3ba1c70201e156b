import type { ChatCompletionFunctionTool } from 'openai/resources/chat/completions';

/**
 * The five tools exactly as FrogNano-4B saw them in training (Leaf): names, parameter names, JSON
 * types, required lists and order are part of the protocol. Descriptions are our own words with the
 * same meaning and brevity. No `strict`, no defaults. Semantics live in src/sandbox/toolbox.py.
 */
export const LEAF_TOOLS: readonly ChatCompletionFunctionTool[] = [
  {
    type: 'function',
    function: {
      name: 'Read',
      description: 'Read a text file from the repository. Returns its lines numbered from 1.',
      parameters: {
        type: 'object',
        properties: {
          file_path: { type: 'string', description: 'Path of the file to read' },
          offset: { type: 'integer', description: 'First line to return (1-based)' },
          limit: { type: 'integer', description: 'Maximum number of lines' },
        },
        required: ['file_path'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'Write',
      description: 'Write a whole file, creating parent directories as needed.',
      parameters: {
        type: 'object',
        properties: {
          file_path: { type: 'string', description: 'Path of the file to write' },
          content: { type: 'string', description: 'Full new file content' },
        },
        required: ['file_path', 'content'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'Edit',
      description: 'Replace an exact string in a file with another string.',
      parameters: {
        type: 'object',
        properties: {
          file_path: { type: 'string', description: 'Path of the file to edit' },
          old_string: { type: 'string', description: 'Exact text to replace' },
          new_string: { type: 'string', description: 'Replacement text' },
          replace_all: { type: 'boolean', description: 'Replace every occurrence' },
        },
        required: ['file_path', 'old_string', 'new_string'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'Glob',
      description: 'Find files whose paths match a glob pattern.',
      parameters: {
        type: 'object',
        properties: {
          pattern: { type: 'string', description: 'Glob pattern, e.g. **/*.py' },
          path: { type: 'string', description: 'Directory to search from' },
        },
        required: ['pattern'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'Bash',
      description: 'Run a shell command in the repository directory.',
      parameters: {
        type: 'object',
        properties: {
          command: { type: 'string', description: 'Command to run' },
          description: { type: 'string', description: 'What the command does' },
          timeout: { type: 'number', description: 'Timeout in seconds' },
        },
        required: ['command'],
      },
    },
  },
];
