import type { TestRunner } from '../test-results/types.ts';
import { commandHints, makeTestTarget, classifyCommand } from './hints.ts';
import type { Candidate, Ecosystem, RepoView } from './types.ts';

/** Rust: dependencies fetched while the network is there, tests without it. */
export async function inferRust(repo: RepoView): Promise<Candidate> {
  const manifest = (await repo.read('Cargo.toml')) ?? '';
  const notes: string[] = [];
  if (/^\[workspace\]/m.test(manifest) && !/^\[package\]/m.test(manifest)) notes.push('Cargo.toml is a virtual workspace: cargo test runs every member\'s tests');
  const toolchain = repo.first('rust-toolchain.toml', 'rust-toolchain');
  if (toolchain) notes.push(`${toolchain} pins a toolchain; the sandbox image's cargo is used as it is`);
  return withHint(repo, { ecosystem: 'rust', setup: ['cargo fetch'], setupFrom: ['Cargo.toml', ...(repo.has('Cargo.lock') ? ['Cargo.lock'] : [])], test: 'cargo test --offline', testFrom: ['Cargo.toml'], runner: 'cargo', envPath: [], notes }, 'cargo');
}

/** Go: modules downloaded in setup (unless vendored), `go test ./...`. */
export async function inferGo(repo: RepoView): Promise<Candidate> {
  const vendored = repo.has('vendor/modules.txt');
  return withHint(
    repo,
    { ecosystem: 'go', setup: vendored ? [] : ['go mod download'], setupFrom: vendored ? ['vendor/modules.txt'] : ['go.mod'], test: 'go test ./...', testFrom: ['go.mod'], runner: 'go', envPath: [], notes: vendored ? ['dependencies are vendored: nothing to download'] : [] },
    'go',
  );
}

/** Maven (or its wrapper) and Gradle (its wrapper, else gradle): dependencies resolved in setup, tests offline. */
export async function inferJava(repo: RepoView): Promise<Candidate> {
  const notes: string[] = [];
  if (repo.has('pom.xml')) {
    const mvn = repo.has('mvnw') ? 'sh ./mvnw' : 'mvn';
    const from = ['pom.xml', ...(repo.has('mvnw') ? ['mvnw'] : [])];
    // test-compile as well as go-offline: plugins resolved late (surefire's providers) are fetched too.
    return withHint(repo, { ecosystem: 'java', setup: [`${mvn} -B -q dependency:go-offline`, `${mvn} -B -q -DskipTests test-compile`], setupFrom: from, test: `${mvn} -B -o test`, testFrom: from, runner: 'maven', envPath: [], notes }, 'maven');
  }
  const build = repo.first('build.gradle.kts', 'build.gradle', 'settings.gradle.kts', 'settings.gradle')!;
  const wrapper = repo.has('gradlew');
  const gradle = wrapper ? 'sh ./gradlew' : 'gradle';
  if (!wrapper) notes.push('no Gradle wrapper (gradlew): the image\'s gradle is used, whatever its version');
  const from = [build, ...(wrapper ? ['gradlew'] : [])];
  return withHint(repo, { ecosystem: 'java', setup: [`${gradle} --no-daemon -q testClasses`], setupFrom: from, test: `${gradle} --no-daemon --offline test`, testFrom: from, runner: 'gradle', envPath: [], notes }, 'gradle');
}

/**
 * The repository's own test command for this runner (the Makefile's test recipe when it is one
 * such line, else a workflow's or CONTRIBUTING's), made to run offline where the runner needs it.
 */
async function withHint(repo: RepoView, c: Candidate, runner: TestRunner): Promise<Candidate> {
  const make = await makeTestTarget(repo);
  const offline = (command: string) => (runner === 'cargo' && !/--offline\b/.test(command) ? command.replace(/^cargo\s+test\b/, 'cargo test --offline') : runner === 'maven' && !/(^|\s)(-o|--offline)\b/.test(command) ? command.replace(/^(mvn|\.\/mvnw)\b/, '$1 -o') : runner === 'gradle' && !/--offline\b/.test(command) ? `${command} --offline` : command);
  // Maven and Gradle command lines in CI carry profiles, deploy steps and debug flags: the plain test goal is surer.
  if (runner === 'maven' || runner === 'gradle') return c;
  if (make && make.prerequisites.length === 0 && make.recipe.length === 1 && classifyCommand(make.recipe[0]!) === runner && make.exports !== null) {
    return { ...c, test: `${make.exports.map((e) => `${e} `).join('')}${offline(make.recipe[0]!)}`, testFrom: [make.file] };
  }
  if (make && make.recipe.length > 0 && make.prerequisites.length === 0 && make.recipe.every((l) => classifyCommand(l) !== null)) {
    return { ...c, test: `make ${make.target}`, testFrom: [make.file], runner: 'make' };
  }
  const hint = (await commandHints(repo)).find((h) => h.runner === runner);
  if (hint) return { ...c, test: offline(hint.command), testFrom: [hint.from] };
  return c;
}

export function compiledEcosystem(repo: RepoView): Ecosystem | null {
  if (repo.has('Cargo.toml')) return 'rust';
  if (repo.has('go.mod')) return 'go';
  if (repo.has('pom.xml') || repo.has('build.gradle') || repo.has('build.gradle.kts')) return 'java';
  return null;
}
