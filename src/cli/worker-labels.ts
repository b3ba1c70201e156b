/**
 * Docker labels a worker puts on every container and network it makes (beside sandbox/'s own
 * LABEL_RUN and LABEL_WORKER). The sweeps in worker-sweeps.ts find leftovers by them.
 */
export const LABEL_INSTANCE = 'dev.lilypad.instance';
/** The queue job a sandbox or setup network belongs to. */
export const LABEL_JOB = 'dev.lilypad.job';
/** The queue prefix an instance served (informational: two installations may share a prefix). */
export const LABEL_PREFIX = 'dev.lilypad.prefix';
/**
 * The installation a container or network belongs to. Worker ids default to the host name and
 * prefixes to `lilypad`, so two installations (staging and production, two test runs) with their
 * own Redis on one Docker engine share both: every sweep only touches what carries its own id.
 */
export const LABEL_INSTALLATION = 'dev.lilypad.installation';
