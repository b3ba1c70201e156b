import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  hasToolCallMarkup,
  parseQwen3CoderToolCalls,
  type DeclaredTool,
  type RescueResult,
} from '../../src/agent/qwen3-coder-parser.ts';

// Declarations shaped like the five Leaf tools, plus one test-only tool with object/array params.
const TOOLS: readonly DeclaredTool[] = [
  {
    name: 'Read',
    parameters: {
      properties: {
        file_path: { type: 'string' },
        offset: { type: 'integer' },
        limit: { type: 'integer' },
      },
    },
  },
  {
    name: 'Write',
    parameters: { properties: { file_path: { type: 'string' }, content: { type: 'string' } } },
  },
  {
    name: 'Edit',
    parameters: {
      properties: {
        file_path: { type: 'string' },
        old_string: { type: 'string' },
        new_string: { type: 'string' },
        replace_all: { type: 'boolean' },
      },
    },
  },
  {
    name: 'Glob',
    parameters: { properties: { pattern: { type: 'string' }, path: { type: 'string' } } },
  },
  {
    name: 'Bash',
    parameters: {
      properties: {
        command: { type: 'string' },
        description: { type: 'string' },
        timeout: { type: 'number' },
      },
    },
  },
  {
    name: 'Configure',
    parameters: {
      properties: {
        settings: { type: 'object' },
        tags: { type: 'array', items: { type: 'string' } },
        level: { type: ['integer', 'null'] },
      },
    },
  },
];

function parse(text: string): RescueResult {
  return parseQwen3CoderToolCalls(text, TOOLS);
}

/** The calls with their arguments decoded, for readable deep-equality assertions. */
function decoded(result: RescueResult): Array<{ name: string; args: unknown }> {
  return result.calls.map((c) => ({ name: c.name, args: JSON.parse(c.arguments) as unknown }));
}

function block(name: string, params: Record<string, string>): string {
  const body = Object.entries(params)
    .map(([k, v]) => `<parameter=${k}>\n${v}\n</parameter>\n`)
    .join('');
  return `<tool_call>\n<function=${name}>\n${body}</function>\n</tool_call>`;
}

test('plain text with no call is returned unchanged as content, with no calls', () => {
  const text = 'All tests pass now. Nothing else to change.\n';
  assert.deepEqual(parse(text), { content: text, calls: [], rejected: [] });
});

test('one call with three string params yields one call with exactly those strings', () => {
  const text = [
    '<tool_call>',
    '<function=Edit>',
    '<parameter=file_path>',
    'src/app.py',
    '</parameter>',
    '<parameter=old_string>',
    'return a+b',
    '</parameter>',
    '<parameter=new_string>',
    'return a-b',
    '</parameter>',
    '</function>',
    '</tool_call>',
  ].join('\n');
  const result = parse(text);
  assert.equal(result.content, '');
  assert.deepEqual(result.rejected, []);
  assert.equal(result.calls.length, 1);
  assert.equal(result.calls[0]?.name, 'Edit');
  assert.equal(
    result.calls[0]?.arguments,
    '{"file_path":"src/app.py","old_string":"return a+b","new_string":"return a-b"}',
  );
});

test('leading prose before a call becomes content, trimmed of trailing whitespace only', () => {
  const text = `  Let me look at the file first.\n\n${block('Read', { file_path: 'a.py' })}`;
  const result = parse(text);
  assert.equal(result.content, '  Let me look at the file first.');
  assert.deepEqual(decoded(result), [{ name: 'Read', args: { file_path: 'a.py' } }]);
});

test('an object-typed param spread over two lines is JSON-decoded', () => {
  const text = block('Configure', { settings: '{"mode": "fast",\n "retries": 3}' });
  assert.deepEqual(decoded(parse(text)), [
    { name: 'Configure', args: { settings: { mode: 'fast', retries: 3 } } },
  ]);
});

test('two calls separated by a newline are both returned in order', () => {
  const text = `${block('Read', { file_path: 'a.py' })}\n${block('Glob', { pattern: '**/*.ts' })}`;
  const result = parse(text);
  assert.equal(result.content, '');
  assert.deepEqual(decoded(result), [
    { name: 'Read', args: { file_path: 'a.py' } },
    { name: 'Glob', args: { pattern: '**/*.ts' } },
  ]);
});

test('two calls with nothing between the blocks are both returned in order', () => {
  const text = `${block('Read', { file_path: 'a.py' })}${block('Read', { file_path: 'b.py' })}`;
  assert.deepEqual(decoded(parse(text)), [
    { name: 'Read', args: { file_path: 'a.py' } },
    { name: 'Read', args: { file_path: 'b.py' } },
  ]);
});

test('two calls with </tool_call> missing between them are both returned', () => {
  const text = [
    '<tool_call>',
    '<function=Read>',
    '<parameter=file_path>',
    'a.py',
    '</parameter>',
    '</function>',
    '<tool_call>',
    '<function=Bash>',
    '<parameter=command>',
    'npm test',
    '</parameter>',
    '</function>',
    '</tool_call>',
  ].join('\n');
  assert.deepEqual(decoded(parse(text)), [
    { name: 'Read', args: { file_path: 'a.py' } },
    { name: 'Bash', args: { command: 'npm test' } },
  ]);
});

test('typed params: integer 42, number 3.14, boolean true and object are converted', () => {
  const text =
    block('Read', { file_path: 'a.py', offset: '42', limit: '7' }) +
    block('Bash', { command: 'sleep 1', timeout: '3.14' }) +
    block('Edit', { file_path: 'a.py', old_string: 'x', new_string: 'y', replace_all: 'true' }) +
    block('Configure', { settings: '{"a": [1, 2], "b": null}', tags: '["x", "y"]' });
  assert.deepEqual(decoded(parse(text)), [
    { name: 'Read', args: { file_path: 'a.py', offset: 42, limit: 7 } },
    { name: 'Bash', args: { command: 'sleep 1', timeout: 3.14 } },
    { name: 'Edit', args: { file_path: 'a.py', old_string: 'x', new_string: 'y', replace_all: true } },
    { name: 'Configure', args: { settings: { a: [1, 2], b: null }, tags: ['x', 'y'] } },
  ]);
  // The arguments string carries real JSON numbers and booleans, not quoted ones.
  assert.equal(parse(block('Read', { offset: '42' })).calls[0]?.arguments, '{"offset":42}');
});

test('a string-typed param keeps numeric-looking text as a string ("123" stays "123")', () => {
  const text = block('Write', { file_path: '123', content: 'true' });
  assert.equal(parse(text).calls[0]?.arguments, '{"file_path":"123","content":"true"}');
});

test('boolean is case-insensitive for true/false and keeps any other text raw', () => {
  const edit = (v: string): unknown =>
    decoded(parse(block('Edit', { replace_all: v })))[0]?.args;
  assert.deepEqual(edit('TRUE'), { replace_all: true });
  assert.deepEqual(edit('False'), { replace_all: false });
  assert.deepEqual(edit('yes'), { replace_all: 'yes' });
});

test('integer and number params that do not parse keep the raw string', () => {
  assert.deepEqual(decoded(parse(block('Read', { offset: '4.5', limit: 'ten' })))[0]?.args, {
    offset: '4.5',
    limit: 'ten',
  });
  assert.deepEqual(decoded(parse(block('Bash', { timeout: 'soon' })))[0]?.args, { timeout: 'soon' });
});

test('a raw null becomes null for non-string types and stays "null" for string types', () => {
  const text =
    block('Read', { file_path: 'null', offset: 'null' }) +
    block('Configure', { settings: 'null', tags: 'null', level: 'null' });
  assert.deepEqual(decoded(parse(text)), [
    { name: 'Read', args: { file_path: 'null', offset: null } },
    { name: 'Configure', args: { settings: null, tags: null, level: null } },
  ]);
});

test('a union type ["integer","null"] converts an integer value', () => {
  assert.deepEqual(decoded(parse(block('Configure', { level: '3' })))[0]?.args, { level: 3 });
});

test('a Python-literal dict is converted to JSON', () => {
  const text = block('Configure', { settings: "{'name': 'it\\'s', 'on': True, 'off': False, 'none': None}" });
  assert.deepEqual(decoded(parse(text))[0]?.args, {
    settings: { name: "it's", on: true, off: false, none: null },
  });
});

test('a Python-literal list and tuple are converted to JSON arrays', () => {
  assert.deepEqual(decoded(parse(block('Configure', { tags: "['a', \"b\", 1, -2.5, None,]" })))[0]?.args, {
    tags: ['a', 'b', 1, -2.5, null],
  });
  assert.deepEqual(decoded(parse(block('Configure', { tags: "('x', ('y',))" })))[0]?.args, {
    tags: ['x', ['y']],
  });
});

test('an object value that is neither JSON nor a Python literal keeps the raw string', () => {
  const raw = "{mode: fast, 'unterminated}";
  assert.deepEqual(decoded(parse(block('Configure', { settings: raw })))[0]?.args, { settings: raw });
});

test('an unknown parameter (not in the schema) keeps the raw string', () => {
  const text = block('Read', { file_path: 'a.py', verbose: 'true', count: '3' });
  assert.equal(
    parse(text).calls[0]?.arguments,
    '{"file_path":"a.py","verbose":"true","count":"3"}',
  );
});

test('a missing </parameter> ends the value at the next <parameter=', () => {
  const text = [
    '<tool_call>',
    '<function=Read>',
    '<parameter=file_path>',
    'a.py',
    '<parameter=offset>',
    '10',
    '</parameter>',
    '</function>',
    '</tool_call>',
  ].join('\n');
  assert.deepEqual(decoded(parse(text)), [{ name: 'Read', args: { file_path: 'a.py', offset: 10 } }]);
});

test('a missing </parameter> ends the value at </function>', () => {
  const text = '<tool_call>\n<function=Glob>\n<parameter=pattern>\n*.md\n</function>\n</tool_call>';
  assert.deepEqual(decoded(parse(text)), [{ name: 'Glob', args: { pattern: '*.md' } }]);
});

test('a bare <function=...> without <tool_call> is still a call, and prose before it is content', () => {
  const text = 'Running the tests.\n<function=Bash>\n<parameter=command>\nnpm test\n</parameter>\n</function>';
  const result = parse(text);
  assert.equal(result.content, 'Running the tests.');
  assert.deepEqual(decoded(result), [{ name: 'Bash', args: { command: 'npm test' } }]);
});

test('a call with no parameters gives {}', () => {
  const result = parse('<tool_call>\n<function=Glob>\n</function>\n</tool_call>');
  assert.deepEqual(result.calls, [{ name: 'Glob', arguments: '{}' }]);
});

test('an empty value gives ""', () => {
  assert.equal(
    parse('<tool_call>\n<function=Write>\n<parameter=file_path>\nempty.txt\n</parameter>\n<parameter=content>\n</parameter>\n</function>\n</tool_call>')
      .calls[0]?.arguments,
    '{"file_path":"empty.txt","content":""}',
  );
  // No newlines at all around the value is also an empty string.
  assert.equal(
    parse('<function=Write><parameter=content></parameter></function>').calls[0]?.arguments,
    '{"content":""}',
  );
});

test('quotes, backslashes and <b>tags</b> inside values are preserved verbatim', () => {
  const content = 'print("a\\tb", \'c\')\npath = "C:\\\\dir\\\\"\nhtml = "<b>bold</b> &amp; <i>x</i>"';
  const result = parse(block('Write', { file_path: 'x.py', content }));
  assert.deepEqual(decoded(result), [{ name: 'Write', args: { file_path: 'x.py', content } }]);
});

/**
 * Linear, not quadratic: the CPU time for 8n is compared with the CPU time for n (best of five
 * each). CPU time, not wall time, so that a busy machine that preempts the test does not count, and
 * n is large enough that the small parse takes milliseconds. Linear is about 8x; a scan that restarts
 * is 64x. (Wall time at a tenth of this size once read 28x for a linear parse on a loaded CI machine.)
 */
function growth(make: (n: number) => string, n: number): number {
  const best = (text: string) => Math.min(...[0, 1, 2, 3, 4].map(() => {
    const before = process.cpuUsage();
    parse(text);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / 1000;
  }));
  const small = Math.max(best(make(n)), 0.5);
  return best(make(8 * n)) / small;
}

test('a value of 100,000 spaces is kept exactly, and parsing grows linearly with it', () => {
  const spaces = ' '.repeat(100_000);
  const result = parse(block('Write', { file_path: 'blank.txt', content: spaces }));
  const args = JSON.parse(result.calls[0]?.arguments ?? '{}') as { content?: string };
  assert.equal(args.content?.length, 100_000);
  assert.equal(args.content, spaces);
  const ratio = growth((n) => block('Write', { file_path: 'blank.txt', content: ' '.repeat(n) }), 1_000_000);
  assert.ok(ratio < 24, `8x the spaces took ${ratio.toFixed(1)}x the time`);
});

test('unclosed markup over a long text still parses in linear time', () => {
  // Many parameters with no closing tags at all: each scan must not restart from scratch.
  const make = (n: number) => '<function=Read>' + '<parameter=x>\nv\n'.repeat(n / 5) + ' '.repeat(n);
  assert.equal(parse(make(100_000)).calls.length, 1);
  const ratio = growth(make, 100_000);
  assert.ok(ratio < 24, `8x the text took ${ratio.toFixed(1)}x the time`);
});

test('a truncated call at end of text keeps the parameters seen so far', () => {
  const text = 'Reading.\n<tool_call>\n<function=Read>\n<parameter=file_path>\na.py\n</parameter>\n<parameter=offset>\n5\n</parameter>\n';
  const result = parse(text);
  assert.equal(result.content, 'Reading.');
  assert.deepEqual(decoded(result), [{ name: 'Read', args: { file_path: 'a.py', offset: 5 } }]);
});

test('a call truncated inside a value keeps the partial value, and a truncated name is dropped', () => {
  assert.deepEqual(decoded(parse('<tool_call>\n<function=Bash>\n<parameter=command>\nls -la')), [
    { name: 'Bash', args: { command: 'ls -la' } },
  ]);
  assert.deepEqual(decoded(parse('<tool_call>\n<function=Bash>\n<parameter=comm')), [
    { name: 'Bash', args: {} },
  ]);
  const cutName = parse('Thinking done.\n<tool_call>\n<function=Ba');
  assert.deepEqual(cutName, { content: 'Thinking done.', calls: [], rejected: [] });
});

test('leading indentation and trailing blank lines are preserved; exactly one newline is stripped each side', () => {
  const text =
    '<tool_call>\n<function=Edit>\n' +
    '<parameter=file_path>\nsrc/app.py\n</parameter>\n' +
    '<parameter=old_string>\n    return a+b\n\n\n</parameter>\n' +
    '<parameter=new_string>\n\n    return a-b\n\n</parameter>\n' +
    '</function>\n</tool_call>';
  assert.deepEqual(decoded(parse(text)), [
    {
      name: 'Edit',
      args: { file_path: 'src/app.py', old_string: '    return a+b\n\n', new_string: '\n    return a-b\n' },
    },
  ]);
});

test('an undeclared tool name lands in rejected, not in calls', () => {
  const text = `${block('DeleteRepo', { name: 'x' })}\n${block('Read', { file_path: 'a.py' })}\n${block('exec', {})}`;
  const result = parse(text);
  assert.deepEqual(result.rejected, ['DeleteRepo', 'exec']);
  assert.deepEqual(decoded(result), [{ name: 'Read', args: { file_path: 'a.py' } }]);
  assert.deepEqual(parseQwen3CoderToolCalls(block('Read', { file_path: 'a.py' }), []), {
    content: '',
    calls: [],
    rejected: ['Read'],
  });
});

test('a value holding tool-call markup but closed by </parameter> is kept whole', () => {
  const doc = 'Example:\n<tool_call>\n<function=Read>\n</tool_call>\nend';
  assert.deepEqual(decoded(parse(block('Write', { file_path: 'doc.md', content: doc }))), [
    { name: 'Write', args: { file_path: 'doc.md', content: doc } },
  ]);
});

test('a literal </parameter> inside a value cuts it short (known limitation of the format)', () => {
  const text = block('Write', { file_path: 'p.xml', content: 'a</parameter>b' });
  const args = decoded(parse(text))[0]?.args as { content?: string };
  assert.equal(args.content, 'a');
});

test('the older JSON form inside <tool_call> is not a call and leaves the text as content', () => {
  const text = '<tool_call>\n{"name": "Read", "arguments": {"file_path": "a.py"}}\n</tool_call>';
  assert.deepEqual(parse(text), { content: text, calls: [], rejected: [] });
});

test('a parameter named __proto__ is an ordinary key', () => {
  const result = parse(
    '<function=Read>\n<parameter=__proto__>\nx\n</parameter>\n<parameter=file_path>\na.py\n</parameter>\n</function>',
  );
  assert.equal(result.calls[0]?.arguments, '{"__proto__":"x","file_path":"a.py"}');
});

test('hasToolCallMarkup flags <tool_call>, <function= and </parameter> and nothing else', () => {
  assert.equal(hasToolCallMarkup('x <tool_call> y'), true);
  assert.equal(hasToolCallMarkup('<function=Read>'), true);
  assert.equal(hasToolCallMarkup('a.py\n</parameter>'), true);
  assert.equal(hasToolCallMarkup('plain answer with <b>html</b> and </think>'), false);
  assert.equal(hasToolCallMarkup(''), false);
  assert.equal(hasToolCallMarkup(null), false);
  assert.equal(hasToolCallMarkup(undefined), false);
});
