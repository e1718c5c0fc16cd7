/**
 * Leader election for `dpctl controller`: only one replica reconciles at a time.
 * Implementations: a Kubernetes Lease (in a cluster) and a local lock (local runs);
 * `createElector` in ./index.ts picks one from the options.
 */
export interface LeaderElector {
  /** A name for logs and /status, e.g. `lease default/dpctl-controller` or `lock /path`. */
  readonly description: string;
  /** This replica's identity (pod name or host:pid). */
  readonly identity: string;
  /**
   * Resolves once this replica holds leadership, then keeps renewing it in the background.
   * Rejects with an AbortError when `signal` aborts first.
   */
  acquire(signal: AbortSignal): Promise<void>;
  /** True while leadership is held (renewals succeeding). */
  isLeader(): boolean;
  /** Called once when held leadership is lost (renewal failed or taken over): stop reconciling. */
  onLost(listener: () => void): void;
  /** Gives leadership up at once (on shutdown), so a standby can take over without waiting. */
  release(): Promise<void>;
}

export type ElectorOptions =
  | { kind: 'none' }
  | { kind: 'lock'; path: string; identity?: string; leaseSeconds?: number }
  | { kind: 'lease'; namespace: string; name: string; identity?: string; leaseSeconds?: number };
