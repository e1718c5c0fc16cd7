import type { ElectorOptions, LeaderElector } from './types.js';
import { LockElector } from './lock.js';
import { LeaseElector, type ElectorLog } from './lease.js';
import { LeaseApi, type KubeApiOptions } from './kube-api.js';
import { defaultIdentity } from './shared.js';

export type { ElectorOptions, LeaderElector } from './types.js';
export { LeaderElectionError } from './shared.js';
export { LockElector } from './lock.js';
export { LeaseElector, LEADER_URL_ANNOTATION, type ElectorLog } from './lease.js';
export type { Advertise } from './types.js';
export { LeaseApi, type KubeApiOptions } from './kube-api.js';

/** Leadership without contention: a single replica, or leader election switched off. */
class AlwaysLeader implements LeaderElector {
  readonly description = 'none (always leader)';
  readonly identity = defaultIdentity();
  async acquire(signal: AbortSignal) {
    signal.throwIfAborted();
  }
  isLeader() {
    return true;
  }
  onLost() {}
  async release() {}
  /** Never asked: this replica always leads, so it never forwards. */
  async leaderUrl() {
    return undefined;
  }
}

export interface ElectorDeps {
  /** Takeovers, step-downs and retried API failures, for the controller's log. */
  log?: ElectorLog;
  /** Where the Kubernetes API is (default: in-cluster environment and service account files). */
  kubeApi?: KubeApiOptions;
}

/** The elector for `--leader-election none|lock|lease`. */
export function createElector(options: ElectorOptions, deps: ElectorDeps = {}): LeaderElector {
  switch (options.kind) {
    case 'none':
      return new AlwaysLeader();
    case 'lock':
      return new LockElector(options.path, options.identity ?? defaultIdentity(), options.leaseSeconds, options.advertise);
    case 'lease':
      return new LeaseElector(
        new LeaseApi(options.namespace, options.name, deps.kubeApi),
        options.identity ?? defaultIdentity(),
        options.leaseSeconds,
        deps.log,
        options.advertise,
      );
  }
}
