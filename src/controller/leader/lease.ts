import { advertisedUrl, type Advertise, type LeaderElector } from './types.js';
import type { Lease, LeaseApi } from './kube-api.js';
import { LeaderElectionError, LostListeners, abortError, jitter, sleep } from './shared.js';

/** RFC 3339 with exactly six fractional digits: the API server parses MicroTime with that layout. */
export const microTime = (date: Date) => date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

/**
 * True when nobody holds the lease, or its renewTime is older than its duration by our clock.
 * Only a hint (for finding the leader to forward webhooks to): taking a lease over never trusts
 * another node's clock, see LeaseElector.
 */
export function leaseExpired(spec: Lease['spec'], now: number): boolean {
  if (!spec?.holderIdentity) return true;
  const renewed = spec.renewTime ? Date.parse(spec.renewTime) : NaN;
  if (Number.isNaN(renewed)) return true;
  return renewed + (spec.leaseDurationSeconds ?? 0) * 1000 < now;
}

/** The Lease annotation where the leader publishes the URL of its status listener (standbys forward webhooks there). */
export const LEADER_URL_ANNOTATION = 'dpctl.dev/leader-url';

/** `metadata` with the leader URL annotation set to `url`, or removed when undefined (other annotations kept). */
function withLeaderUrl(metadata: Lease['metadata'], url: string | undefined): Lease['metadata'] {
  const { [LEADER_URL_ANNOTATION]: _previous, ...others } = metadata.annotations ?? {};
  const annotations = url ? { ...others, [LEADER_URL_ANNOTATION]: url } : others;
  const { annotations: _old, ...rest } = metadata;
  return Object.keys(annotations).length ? { ...rest, annotations } : rest;
}

/** Notes for logs: takeovers, losses, retried failures. Never holds secrets. */
export type ElectorLog = (message: string) => void;

/**
 * Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics: read the
 * Lease, create it when missing, renew every leaseSeconds/3, and take it over when nobody holds
 * it or when it has not changed for leaseDurationSeconds *as measured on our own clock* since we
 * first saw its current version. Like client-go we never compare the holder's renewTime with
 * our clock, so clock skew between nodes cannot make a standby take a live lease; the cost is
 * that a standby starting next to a dead leader's lease waits one full duration. Every write
 * carries the resourceVersion we read, so when two replicas race, the API server accepts one and
 * answers 409 to the other. A leader that cannot renew for 2/3 of the lease steps down (onLost)
 * before a standby may take over, so two replicas never reconcile at once.
 */
export class LeaseElector implements LeaderElector {
  readonly description: string;
  private readonly leaseMs: number;
  private readonly renewMs: number;
  private readonly renewDeadlineMs: number;
  private readonly lost = new LostListeners();
  /** The Lease as we last read or wrote it: its resourceVersion guards our next write. */
  private observed: Lease | undefined;
  /** The version of the Lease we last read and when (our clock) we first saw that version. */
  private seen: { version: string | undefined; at: number } | undefined;
  private leader = false;
  /** When our last successful renewal started (the renewTime others see). */
  private renewedAt = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | undefined;
  private released = new AbortController();

  constructor(
    private readonly api: LeaseApi,
    readonly identity: string,
    private readonly leaseSeconds = 15,
    private readonly log: ElectorLog = () => {},
    private readonly advertise?: Advertise,
  ) {
    if (!Number.isInteger(leaseSeconds) || leaseSeconds < 1) {
      throw new LeaderElectionError(
        `the lease duration must be a whole number of seconds >= 1 (Lease.spec.leaseDurationSeconds), got ${leaseSeconds}`,
      );
    }
    this.description = `lease ${api.namespace}/${api.name}`;
    this.leaseMs = leaseSeconds * 1000;
    this.renewMs = this.leaseMs / 3;
    this.renewDeadlineMs = (this.leaseMs * 2) / 3;
  }

  async acquire(signal: AbortSignal): Promise<void> {
    if (this.leader) return;
    this.released = new AbortController();
    const stop = AbortSignal.any([signal, this.released.signal]);
    for (;;) {
      if (stop.aborted) throw abortError(stop);
      const startedAt = Date.now();
      let held = false;
      try {
        held = await this.tryAcquireOrRenew(startedAt);
      } catch (err) {
        // Wrong permissions or a missing token will not heal by retrying: fail loudly.
        if (err instanceof LeaderElectionError) throw err;
        this.log(`leader election: ${(err as Error).message}; retrying`);
      }
      if (held) {
        if (stop.aborted) {
          await this.giveUp();
          throw abortError(stop);
        }
        this.leader = true;
        this.renewedAt = startedAt;
        this.scheduleRenewal();
        return;
      }
      await sleep(jitter(this.renewMs), stop);
    }
  }

  isLeader(): boolean {
    // Past the lease without a renewal (event loop stalled), a standby may already lead.
    return this.leader && Date.now() < this.renewedAt + this.leaseMs;
  }

  onLost(listener: () => void): void {
    this.lost.add(listener);
  }

  async leaderUrl(): Promise<string | undefined> {
    const lease = await this.api.get();
    // An expired or released Lease has no leader, whatever an annotation still says.
    if (!lease || leaseExpired(lease.spec, Date.now())) return undefined;
    const url = lease.metadata.annotations?.[LEADER_URL_ANNOTATION];
    return url || undefined;
  }

  async release(): Promise<void> {
    this.released.abort();
    clearTimeout(this.renewTimer);
    this.renewTimer = undefined;
    await this.renewing;
    if (!this.leader) return;
    this.leader = false;
    await this.giveUp();
  }

  /** client-go's release: keep the record, clear the holder, shorten the lease so a standby takes over at once. */
  private async giveUp() {
    let lease = this.observed;
    if (!lease || lease.spec?.holderIdentity !== this.identity) return;
    const now = microTime(new Date());
    try {
      const clear = (l: Lease) =>
        this.api.replace({
          ...l,
          metadata: withLeaderUrl(l.metadata, undefined),
          spec: { ...l.spec, holderIdentity: null, leaseDurationSeconds: 1, acquireTime: now, renewTime: now },
        });
      let res = await clear(lease);
      if (!res.ok) {
        // Written since our last renewal (the suspension annotation, suspension.ts): read again, still ours, clear it.
        lease = await this.api.get();
        if (lease?.spec?.holderIdentity === this.identity) res = await clear(lease);
      }
      if (res.ok) this.observed = res.lease;
    } catch (err) {
      // The lease expires on its own; a standby then takes over after leaseSeconds.
      this.log(`leader election: releasing ${this.description} failed: ${(err as Error).message}`);
    }
  }

  /** One round: true when we hold the lease afterwards (created, taken over or renewed). */
  private async tryAcquireOrRenew(nowMs: number): Promise<boolean> {
    const now = microTime(new Date(nowMs));
    const current = await this.api.get();
    if (!current) {
      const created = await this.api.create({
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: withLeaderUrl({ name: this.api.name, namespace: this.api.namespace }, advertisedUrl(this.advertise)),
        spec: {
          holderIdentity: this.identity,
          leaseDurationSeconds: this.leaseSeconds,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: 0,
        },
      });
      if (created.ok) this.observed = created.lease;
      return created.ok;
    }
    this.observed = current;
    const version = current.metadata.resourceVersion;
    const previous = this.seen;
    const seen = previous && previous.version === version ? previous : { version, at: nowMs };
    this.seen = seen;
    const spec = current.spec ?? {};
    const ours = spec.holderIdentity === this.identity;
    const unchangedForLease = nowMs - seen.at >= (spec.leaseDurationSeconds ?? 0) * 1000;
    if (!ours && spec.holderIdentity && !unchangedForLease) return false;
    const takeover = !ours;
    const updated = await this.api.replace({
      ...current,
      metadata: withLeaderUrl(current.metadata, advertisedUrl(this.advertise)),
      spec: {
        ...spec,
        holderIdentity: this.identity,
        leaseDurationSeconds: this.leaseSeconds,
        acquireTime: takeover ? now : (spec.acquireTime ?? now),
        renewTime: now,
        leaseTransitions: (spec.leaseTransitions ?? 0) + (takeover ? 1 : 0),
      },
    });
    if (!updated.ok) return false;
    this.observed = updated.lease;
    if (takeover && spec.holderIdentity)
      this.log(
        `leader election: took over ${this.description} from ${spec.holderIdentity} (not renewed for ${spec.leaseDurationSeconds} s)`,
      );
    return true;
  }

  private scheduleRenewal(delayMs = this.renewMs) {
    this.renewTimer = setTimeout(() => {
      this.renewing = this.renew().finally(() => {
        this.renewing = undefined;
      });
    }, delayMs);
  }

  private async renew() {
    if (!this.leader || this.released.signal.aborted) return;
    const startedAt = Date.now();
    let held = false;
    try {
      held = await this.tryAcquireOrRenew(startedAt);
    } catch (err) {
      this.log(`leader election: renewing ${this.description} failed: ${(err as Error).message}`);
    }
    if (this.released.signal.aborted) return;
    if (held) {
      this.renewedAt = startedAt;
      this.scheduleRenewal();
      return;
    }
    const holder = this.observed?.spec?.holderIdentity;
    const takenOver = !!holder && holder !== this.identity;
    if (takenOver || Date.now() - this.renewedAt >= this.renewDeadlineMs) {
      this.leader = false;
      this.log(
        takenOver
          ? `leader election: ${this.description} is now held by ${holder}; stepping down`
          : `leader election: could not renew ${this.description} for ${Math.round((Date.now() - this.renewedAt) / 1000)} s; stepping down`,
      );
      this.lost.fire();
      return;
    }
    // Retry sooner than a full period, so a short hiccup does not cost the lease.
    const left = this.renewDeadlineMs - (Date.now() - this.renewedAt);
    this.scheduleRenewal(Math.max(100, Math.min(this.renewMs / 2, left)));
  }
}
