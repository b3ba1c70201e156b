import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AgentIdentity } from '../../src/sandbox/agent-identity.ts';
import { SandboxImageError } from '../../src/sandbox/errors.ts';
import { checkToolboxHello, ToolboxIdentityError } from '../../src/sandbox/toolbox-hello.ts';
import type { helloSchema } from '../../src/sandbox/protocol.ts';
import type { z } from 'zod';

type Hello = z.infer<typeof helloSchema>;
import { agentIdsEnv, toolboxEnv, toolboxLaunchArgv } from '../../src/sandbox/toolbox-launch.ts';

// What the host requires of a fresh toolbox before it trusts it: it acts as exactly the agent,
// keeps real and saved uid 0 (out of the agent's reach), holds no capability and is non-dumpable.

const agent: AgentIdentity = { uid: 1000, gid: 1000, groups: [1000, 27], home: '/home/lilypad', python: '/usr/bin/python3' };
const good: Hello = {
  identity_error: null,
  uid: 1000,
  gid: 1000,
  groups: [27, 1000],
  real_uid: 0,
  saved_uid: 0,
  capabilities: 0,
  pid: 42,
  python: '3.11.2',
  repo: '/testbed',
  nondumpable: true,
};

describe('checkToolboxHello', () => {
  test('a toolbox acting as the agent with real and saved uid 0, no capability, non-dumpable is accepted', () => {
    assert.doesNotThrow(() => checkToolboxHello(good, agent, 'img'));
  });

  const refused: [string, Partial<Hello>, RegExp][] = [
    ['the agent its real uid (the old arrangement: the agent could reach it)', { real_uid: 1000 }, /real uid 1000/],
    ['the agent its saved uid', { saved_uid: 1000 }, /saved 1000/],
    ['acting as another uid', { uid: 1001 }, /effective 1001/],
    ['acting as another gid', { gid: 0 }, /gid 0/],
    ['other supplementary groups', { groups: [1000] }, /groups 1000, capabilities/],
    ['still holding a capability', { capabilities: 0xc0 }, /capabilities 192/],
    ['capabilities it could not read', { capabilities: -1 }, /capabilities -1/],
    ['unable to take the ids at all', { identity_error: 'PermissionError: [Errno 1] Operation not permitted' }, /could not take the agent's user \(PermissionError/],
  ];
  for (const [what, change, message] of refused) {
    test(`refused: ${what}`, () => {
      assert.throws(() => checkToolboxHello({ ...good, ...change }, agent, 'img'), (err: Error) => err instanceof ToolboxIdentityError && message.test(err.message));
    });
  }

  test('refused as an image problem: a python3 that cannot make the toolbox non-dumpable', () => {
    assert.throws(() => checkToolboxHello({ ...good, nondumpable: false }, agent, 'img'), (err: Error) => err instanceof SandboxImageError && /ctypes/.test(err.message));
  });
});

describe('how the toolbox is started', () => {
  test('from the probed interpreter by absolute path, isolated (-I -S), never through PATH', () => {
    const argv = toolboxLaunchArgv('/usr/bin/python3');
    assert.equal(argv[0], '/bin/sh');
    assert.equal(argv.at(-1), '/usr/bin/python3');
    assert.match(argv[2] ?? '', /-u -I -S -c/);
    assert.doesNotMatch(argv[2] ?? '', /command -v|\/tmp/);
  });

  test("with the agent's HOME and ids, and nothing of the host's", () => {
    assert.deepEqual(toolboxEnv(agent, '/testbed'), ['LILYPAD_REPO_DIR=/testbed', 'HOME=/home/lilypad', 'LILYPAD_AGENT_IDS=1000:1000:1000,27']);
    assert.deepEqual(toolboxEnv({ ...agent, home: null, groups: [] }, '/w'), ['LILYPAD_REPO_DIR=/w', 'LILYPAD_AGENT_IDS=1000:1000:']);
    assert.equal(agentIdsEnv(agent), 'LILYPAD_AGENT_IDS=1000:1000:1000,27');
  });
});
