import type Docker from 'dockerode';
import type { Env } from '../config/env.ts';
import type { SetupNetworkProvider } from '../pipeline/sandbox-session.ts';
import { EgressProxy, parseEgressPolicy, parsePrivateAllow, readEgressHostsFile, type SetupNetwork } from '../sandbox/egress.ts';

/**
 * The egress proxy for the setup commands of `lilypad run` and `lilypad eval`: the same proxy and
 * allowlist a worker starts for the app (LILYPAD_SETUP_EGRESS, LILYPAD_SETUP_EGRESS_PRIVATE),
 * started only when a run has setup commands to run (from the command line or the repository's
 * configuration), with the names LILYPAD_SETUP_EGRESS_HOSTS pins. The settings are read and checked
 * here, before the run starts. Null when the policy is `none`: setup then runs without any network.
 */
export function lazySetupProxy(env: Env, docker: Docker, sandboxImage: string, labels: Record<string, string>, onStart?: () => void): (SetupNetworkProvider & { stop(): Promise<void> }) | null {
  const policy = parseEgressPolicy(env.LILYPAD_SETUP_EGRESS, { githubHost: env.GHE_HOST ?? 'github.com' });
  const privateAllow = parsePrivateAllow(env.LILYPAD_SETUP_EGRESS_PRIVATE);
  const hostsFile = readEgressHostsFile(env.LILYPAD_SETUP_EGRESS_HOSTS, privateAllow);
  if (policy.mode === 'none') return null;
  let proxy: Promise<EgressProxy> | null = null;
  return {
    open(runId: string, runLabels: Record<string, string>): Promise<SetupNetwork> {
      proxy ??= (async () => {
        onStart?.();
        return EgressProxy.start(docker, { image: env.LILYPAD_EGRESS_IMAGE, policy, privateAllow, labels, sandboxImage, hostsFile });
      })();
      return proxy.then((p) => p.open(runId, runLabels));
    },
    async stop() {
      const started = await proxy?.catch(() => null);
      await started?.stop();
    },
  };
}
