// The app on a repository nobody configured: `lilypad start` against the GitHub stand-in, a Go
// repository without .github/lilypad.yml, labelled by a maintainer. The draft pull request says
// what was inferred and from which files, names the fixed test, carries the evidence and the
// lilypad:verified label; the status comment ends with the same origin line.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { createDockerClient } from '../../src/sandbox/sandbox.ts';
import { LABEL_ENV_OWNER } from '../../src/sandbox/env-cache/image.ts';
import { keys } from '../../src/store/keys.ts';
import { startApp, waitFor, type AppHarness } from '../support/app-harness.ts';
import { fixtureFiles, GO_CASE } from '../support/zero-config-fixtures.ts';

const OWNER = 'acme';
const REPO = 'wordwrap';
const ORIGIN = 'Setup inferred from `go.mod`; tests inferred from `go.mod`; write `.github/lilypad.yml` to change it.';

describe('zero-config through the GitHub App', () => {
  const docker = createDockerClient();
  let app: AppHarness;

  before(async () => {
    app = await startApp({ book: { [GO_CASE.title]: GO_CASE.script } });
    app.gh.createInstallation({ login: OWNER, type: 'Organization' });
    app.gh.createUser('alice');
    const files = fixtureFiles('go');
    assert.ok(!Object.keys(files).some((f) => f.startsWith('.github/')), 'the repository has no configuration');
    app.gh.createRepo(OWNER, REPO, { files });
    app.gh.addCollaborator(OWNER, REPO, 'alice', 'maintain');
  });
  after(async () => {
    // The environment this installation kept (and only this installation's).
    const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 3 });
    const installation = app ? await redis.get(keys.installation(app.prefix)).catch(() => null) : null;
    redis.disconnect();
    await app?.stop();
    if (installation) {
      const images = await docker.listImages({ filters: { label: [`${LABEL_ENV_OWNER}=${installation}`] } });
      for (const image of images) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
    }
  });

  test('a labelled issue on a Go repository without .github/lilypad.yml: the pull request says what was inferred, names the fixed test, is verified', async () => {
    const issue = app.gh.createIssue(OWNER, REPO, { title: GO_CASE.title, body: GO_CASE.body, author: 'alice' });
    const res = await app.send('issues', app.gh.labelIssue(OWNER, REPO, issue.number, 'lilypad', 'alice'));
    assert.equal(res.status, 200);
    const status = () => app.gh.comments(OWNER, REPO, issue.number).find((c) => c.body.startsWith('<!-- lilypad:status -->'));
    await waitFor(() => /Done/.test(status()?.body ?? ''), 'the status comment to say Done', 180_000);

    const [pr] = app.gh.pulls(OWNER, REPO).filter((p) => p.head.ref === `lilypad/issue-${issue.number}`);
    assert.ok(pr, `a pull request was opened; status: ${status()?.body}`);
    const body = pr.body ?? '';
    // The Tests section opens with where setup and the tests came from, and how to change them.
    assert.ok(body.includes(`### Tests\n\n_${ORIGIN}_\n\nCommand: \`go test ./...\``), body);
    assert.match(body, /- \*\*Fixed\*\* \(failed before, pass after\): `example\.test\/wordwrap::TestExactWidth`/);
    assert.match(body, /- \*\*Broken\*\* \(passed before, fail after\): none/);
    assert.match(body, /\*\*Before the change:\*\* ❌ failed/);
    assert.match(body, /\*\*After the change:\*\* ✅ passed/);
    assert.match(body, /### Evidence\n\n✅ \*\*Verified\*\*/);
    assert.match(body, /- \*\*Reproduction\*\* \(the change's tests fail on the base code, pass with the change\): `example\.test\/wordwrap::TestTwoShortWordsFit`/);
    assert.deepEqual(pr.labels.map((l) => l.name).sort(), ['lilypad', 'lilypad:verified', 'needs-human-review']);
    assert.match(app.gh.readFile(OWNER, REPO, `lilypad/issue-${issue.number}`, 'wrap.go') ?? '', /len\(line\)\+1\+len\(word\) > width/);
    assert.ok(app.gh.readFile(OWNER, REPO, `lilypad/issue-${issue.number}`, 'fit_test.go'));

    // The status comment's final text carries the same origin line.
    const final = status()!.body;
    assert.ok(final.includes(ORIGIN), final);
    assert.match(final, new RegExp(`draft pull request #${pr.number}`));
  });
});
