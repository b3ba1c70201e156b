/**
 * docker/compose.yml, run as an operator would (`npm run test:compose`): the file validates with the
 * Compose at hand (Debian's docker-compose 1.29, or `docker compose` v2), then the whole stack comes
 * up on this engine with nothing configured but the GitHub host and the model server, the web
 * service registers the GitHub App (its credentials land in the settings file on the config
 * volume), a signed `issues.labeled` webhook to the web service becomes a draft pull request made
 * by the worker container through the host's engine, and `down -v` leaves no container, network or
 * volume of the project behind.
 *
 * The GitHub stand-in and the scripted model server run in this process on 127.0.0.1; the stack's
 * services share the host's network (test/compose/host-network.yml) so they reach them there and
 * listen on loopback only. Environment: LILYPAD_COMPOSE (e.g. "docker compose") picks the Compose
 * command; LILYPAD_NODE_IMAGE the app image's Node base (default: node:20-bookworm-slim when it is
 * present locally, else lilypad-node:20 built from this machine's node by docker/build-images.sh).
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { parse as parseYaml } from 'yaml';
import { parseDotEnv } from '../../src/config/dotenv.ts';
import { freePort, waitFor } from '../support/app-harness.ts';
import type { GitHubStandin } from '../support/github-standin/index.ts';
import type { ModelServer } from '../support/model-server.ts';
import { OWNER, registerThroughBrowser, setupLinkIn, startNewOrg } from '../support/new-org.ts';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const COMPOSE_FILE = path.join(ROOT, 'docker/compose.yml');
const HOST_NETWORK = path.join(ROOT, 'test/compose/host-network.yml');
const PROJECT = `lilypad-compose-test-${process.pid}`;
const APP_IMAGE = 'lilypad:compose-test';

/** The Compose command: LILYPAD_COMPOSE, else the v2 plugin where it answers, else docker-compose. */
function composeCommand(): string[] {
  const chosen = process.env['LILYPAD_COMPOSE']?.trim();
  if (chosen) return chosen.split(/\s+/);
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  if (spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0) return ['docker-compose'];
  throw new Error('neither `docker compose` (v2) nor `docker-compose` (apt-get install docker-compose) is installed; set LILYPAD_COMPOSE to your Compose command');
}

const timings: Array<[string, number]> = [];
async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await fn();
  } finally {
    timings.push([what, (Date.now() - started) / 1000]);
  }
}

describe('docker/compose.yml', () => {
  const compose = composeCommand();
  const composeEnv: NodeJS.ProcessEnv = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? os.tmpdir() };
  /** The stack's file: docker/compose.yml with test/compose/host-network.yml, resolved (see before()). */
  let stackFile = '';
  const dc = async (args: string[], opts: { files?: string[]; timeoutMs?: number } = {}) => {
    const files = (opts.files ?? [stackFile]).flatMap((f) => ['-f', f]);
    const [cmd, ...pre] = compose;
    try {
      return await run(cmd!, [...pre, '-p', PROJECT, ...files, ...args.filter((a) => a !== '')], { cwd: ROOT, env: composeEnv, timeout: opts.timeoutMs ?? 600_000, maxBuffer: 64 * 1024 * 1024 });
    } catch (err) {
      const e = err as Error & { stdout?: string; stderr?: string };
      throw new Error(`${compose.join(' ')} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
    }
  };
  const logs = async (service: string) => (await dc(['logs', '--no-color', service]).catch((e: Error) => ({ stdout: e.message }))).stdout;

  test('validates, with no top-level name; the worker waits for the images and reaches the host', async () => {
    const { stdout } = await dc(['config'], { files: [COMPOSE_FILE] });
    const config = parseYaml(stdout) as { services: Record<string, Record<string, unknown>> };
    const raw = parseYaml((await import('node:fs')).readFileSync(COMPOSE_FILE, 'utf8')) as Record<string, unknown>;
    assert.equal(raw['name'], undefined, 'Compose 1.29 refuses a top-level name');
    const worker = config.services['worker']!;
    assert.deepEqual(worker['depends_on'], {
      redis: { condition: 'service_healthy' },
      web: { condition: 'service_started' },
      'sandbox-image': { condition: 'service_completed_successfully' },
      'egress-image': { condition: 'service_completed_successfully' },
    });
    assert.equal(config.services['sandbox-image']!['image'], 'lilypad-sandbox:latest');
    assert.equal(config.services['egress-image']!['image'], 'lilypad-egress:latest');
    const hosts = worker['extra_hosts'] as Record<string, string> | string[];
    assert.ok(JSON.stringify(hosts).includes('host.docker.internal') && JSON.stringify(hosts).includes('host-gateway'), JSON.stringify(hosts));
    const env = worker['environment'] as Record<string, string>;
    assert.equal(env['OPENAI_BASE_URL'], 'http://host.docker.internal:30000/v1');
    assert.equal(env['LILYPAD_ENV_FILE'], '/config/.env');
    const args = ((config.services['web']!['build'] as { args: Record<string, string> }).args);
    assert.equal(args['NODE_IMAGE'], 'node:20-bookworm-slim');
  });

  describe('the stack: register, label an issue, get a draft pull request, down', () => {
    let gh: GitHubStandin;
    let model: ModelServer;
    let webPort: number;
    let started = false;
    const base = () => `http://127.0.0.1:${webPort}`;
    const prFor = (n: number) => gh.pulls(OWNER, 'calc').find((p) => p.head.ref === `lilypad/issue-${n}`);

    before(async () => {
      ({ gh, model } = await startNewOrg());
      webPort = await freePort();
      let nodeImage = process.env['LILYPAD_NODE_IMAGE'];
      if (!nodeImage) {
        const official = spawnSync('docker', ['image', 'inspect', 'node:20-bookworm-slim'], { stdio: 'ignore' }).status === 0;
        nodeImage = official ? 'node:20-bookworm-slim' : 'lilypad-node:20';
        if (!official) await timed('node base (build-images.sh --node-base --if-missing)', () => run('bash', [path.join(ROOT, 'docker/build-images.sh'), '--if-missing', '--node-base'], { cwd: ROOT, timeout: 900_000 }));
      }
      Object.assign(composeEnv, {
        LILYPAD_APP_IMAGE: APP_IMAGE,
        LILYPAD_NODE_IMAGE: nodeImage,
        LILYPAD_WEB_PORT: String(await freePort()),
        LILYPAD_TEST_WEB_PORT: String(webPort),
        LILYPAD_TEST_REDIS_PORT: String(await freePort()),
        LILYPAD_TEST_METRICS_PORT: String(await freePort()),
        // Sandboxes are labelled with it; the host's name (a host-network container's) is shared with other runs.
        LILYPAD_TEST_WORKER_ID: PROJECT,
        // What an operator sets: the GitHub host, the model server, the public URL. Nothing else.
        GHE_HOST: gh.host,
        GHE_PROTOCOL: 'http',
        OPENAI_BASE_URL: model.url,
        LILYPAD_PUBLIC_URL: base(),
        LOG_LEVEL: 'info',
      });
      // Compose merges `ports` lists and has no way to drop one in an override, and Docker refuses
      // published ports on the host network: the resolved file (absolute paths, this test's values)
      // minus the web service's published port is what runs. Everything else is as written.
      const { stdout } = await dc(['config'], { files: [COMPOSE_FILE, HOST_NETWORK] });
      const resolved = parseYaml(stdout) as { services: Record<string, Record<string, unknown>> };
      assert.ok(resolved.services['web']!['ports'], 'docker/compose.yml publishes the web port');
      delete resolved.services['web']!['ports'];
      stackFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'lilypad-compose-')), 'stack.json');
      writeFileSync(stackFile, JSON.stringify(resolved, null, 2)); // JSON is YAML to every Compose, with no 1.1-vs-1.2 booleans
    });

    /** Keeps every service's output for a look afterwards; `down` removes the containers and their logs. */
    const saveLogs = async () => {
      const logFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'lilypad-compose-logs-')), 'stack.log');
      writeFileSync(logFile, await logs(''));
      process.stdout.write(`# stack logs: ${logFile}\n`);
    };

    after(async () => {
      if (started) {
        await saveLogs();
        await dc(['down', '--volumes', '--remove-orphans', '--timeout', '30']).catch((e: Error) => process.stderr.write(`${e.message}\n`));
      }
      await model?.close();
      await gh?.close();
      process.stdout.write(`# compose timings (s): ${timings.map(([w, s]) => `${w} ${s.toFixed(1)}`).join('; ')}\n`);
    });

    test('up, registration through the web service, a draft pull request from the worker container, down -v', async () => {
      await timed('build (app image)', () => dc(['build', 'web'], { timeoutMs: 900_000 }));
      started = true;
      await timed('up -d', () => dc(['up', '-d'], { timeoutMs: 900_000 }));

      // The worker waits for credentials instead of exiting over and over.
      await timed('registration page', () =>
        waitFor(async () => /no GitHub App credentials: open .*\/setup/.test(await logs('web')), 'the registration message', 120_000),
      );
      await waitFor(async () => /waiting for the GitHub App's credentials/.test(await logs('worker')), 'the worker waiting for registration', 60_000);

      const link = setupLinkIn(await logs('web'));
      assert.ok(link?.startsWith(`${base()}/setup?token=`), 'the web service logs the setup link');
      const { manifest } = await registerThroughBrowser(gh, link!);
      assert.equal(manifest.hook_attributes.url, `${base()}/api/github/webhooks`);

      // The credentials are in the settings file on the config volume, private to the container's user.
      const { stdout: envText } = await dc(['exec', '-T', 'web', 'sh', '-c', 'stat -c %a /config/.env && cat /config/.env']);
      const [mode, ...rest] = envText.split('\n');
      assert.equal(mode, '600');
      const saved = parseDotEnv(rest.join('\n'));
      assert.equal(saved.get('APP_ID'), String(gh.appId));
      assert.equal(saved.get('WEBHOOK_SECRET'), gh.webhookSecret);

      await timed('worker started after registration', () =>
        waitFor(async () => (await logs('worker')).includes('worker started') && (await logs('web')).includes('webhook server listening'), 'the worker and webhook server', 120_000),
      );

      const issue = gh.createIssue(OWNER, 'calc', { title: 'add() subtracts', body: 'add(2, 3) gives -1.', author: 'alice' });
      const res = await gh.sendWebhook(manifest.hook_attributes.url, 'issues', gh.labelIssue(OWNER, 'calc', issue.number, 'lilypad', 'alice'));
      assert.equal(res.status, 200);
      await timed('labelled issue to draft pull request', () => waitFor(() => prFor(issue.number) !== undefined, 'the draft pull request', 300_000));
      assert.equal(prFor(issue.number)!.draft, true);
      assert.equal(gh.readFile(OWNER, 'calc', `lilypad/issue-${issue.number}`, 'calc.py'), 'def add(a, b):\n    return a + b\n');

      await saveLogs();
      // Anonymous volumes (each worker's /data) carry no project label: note them by container.
      const { stdout: ids } = await run('docker', ['ps', '-a', '-q', '--filter', `label=com.docker.compose.project=${PROJECT}`]);
      const { stdout: mounts } = await run('docker', ['inspect', '--format', '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}', ...ids.split(/\s+/).filter(Boolean)]);
      const volumes = mounts.split(/\s+/).filter(Boolean);
      assert.ok(volumes.some((v) => /^[0-9a-f]{64}$/.test(v)), `the worker's /data is an anonymous volume: ${volumes.join(', ')}`);
      // SIGTERM to the worker (as `down` sends it), right after its pull request: it must finish or
      // hand back its job and remove its sandboxes by itself, inside the grace period.
      await timed('stop worker', () => dc(['stop', '--timeout', '30', 'worker']));
      await saveLogs();
      const { stdout: workerIds } = await run('docker', ['ps', '-a', '-q', '--filter', `label=com.docker.compose.project=${PROJECT}`, '--filter', 'label=com.docker.compose.service=worker']);
      const { stdout: exitCodes } = await run('docker', ['inspect', '--format', '{{.State.ExitCode}}', ...workerIds.split(/\s+/).filter(Boolean)]);
      assert.deepEqual(exitCodes.trim().split(/\s+/), ['0'], 'the worker exits by itself on SIGTERM (137: it was killed at the end of the grace period)');
      const { stdout: leftAfterStop } = await run('docker', ['ps', '-a', '-q', '--filter', `label=dev.lilypad.worker=${PROJECT}`]);
      assert.equal(leftAfterStop.trim(), '', 'a stopped worker leaves no sandbox or egress container behind');
      await timed('down -v', () => dc(['down', '--volumes', '--remove-orphans', '--timeout', '30']));
      started = false;
      const label = `label=com.docker.compose.project=${PROJECT}`;
      for (const kind of [['ps', '-a'], ['volume', 'ls'], ['network', 'ls']]) {
        const { stdout } = await run('docker', [...kind, '-q', '--filter', label]);
        assert.equal(stdout.trim(), '', `docker ${kind.join(' ')} still lists the project's ${kind[0]}`);
      }
      const { stdout: left } = await run('docker', ['volume', 'ls', '-q']);
      const still = volumes.filter((v) => left.split(/\s+/).includes(v));
      assert.deepEqual(still, [], 'down -v removes every volume of the stack, anonymous ones too');
      const { stdout: sandboxes } = await run('docker', ['ps', '-a', '-q', '--filter', `label=dev.lilypad.worker=${PROJECT}`]);
      assert.equal(sandboxes.trim(), '', 'a sandbox or egress container of the worker was left behind');
    });
  });
});
