// The repository's .git is writable by the agent: neutralise everything in it that could run a
// program or rewrite the diff (hooks, fsmonitor, external diff drivers, textconv, pagers).
export const SANDBOX_GIT = ['git', '-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'core.pager=cat', '-c', 'diff.external=', '-c', 'core.quotepath=false'];
