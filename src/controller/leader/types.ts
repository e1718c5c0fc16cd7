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
  /**
   * The URL the current leader advertised (its status listener), read from where the leader
   * publishes it (the Lease's `dpctl.dev/leader-url` annotation, the lock's JSON file);
   * undefined when nobody holds leadership or the holder advertised nothing. A standby
   * forwards webhooks there.
   */
  leaderUrl(): Promise<string | undefined>;
}

/**
 * This replica's URL for the others, published while it leads. A function is read at every
 * publication, so a listener on port 0 can be advertised once it listens.
 */
export type Advertise = string | (() => string | undefined);

/** Reads an Advertise option (undefined or empty: nothing to publish). */
export const advertisedUrl = (advertise: Advertise | undefined): string | undefined =>
  (typeof advertise === 'function' ? advertise() : advertise) || undefined;

export type ElectorOptions =
  | { kind: 'none' }
  | { kind: 'lock'; path: string; identity?: string; leaseSeconds?: number; advertise?: Advertise }
  | { kind: 'lease'; namespace: string; name: string; identity?: string; leaseSeconds?: number; advertise?: Advertise };
