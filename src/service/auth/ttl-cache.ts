/** Real elapsed time, never the service's (possibly simulated) clock: the bound is in real seconds. */
const now = () => performance.now();

/**
 * What a cache remembers and for how long. The bounds of docs/security.md ("API key lookups", "Access
 * token lookups") are the defaults below.
 */
export interface TtlCachePolicy<V> {
  /**
   * The revocation marks a value falls under (its key, its project, its session, its user): forget(mark)
   * drops every value under that mark and keeps them out while the mark lives.
   */
  marks(value: V): readonly string[];
  /** The value's own terms, checked on every answer (an access token's expires_at on the service clock). */
  live?(value: V): boolean;
  /** How long a value is answered from memory, in real milliseconds. */
  ttlMs?: number;
  /** Values held at once; the oldest goes first beyond it. */
  maxEntries?: number;
  /**
   * How long a forgotten mark keeps its values out: longer than any transaction that revokes, so a lookup
   * that read the row before that transaction committed cannot put the value back.
   */
  tombstoneMs?: number;
  /** Marks held at once; the oldest goes first beyond it. */
  maxTombstones?: number;
}

export const CACHE_TTL_MS = 1_000;
export const CACHE_MAX_ENTRIES = 10_000;
const TOMBSTONE_MS = 60_000;
const MAX_TOMBSTONES = 10_000;

interface Entry<V> {
  value: V;
  marks: readonly string[];
  until: number;
}

/**
 * A replica's short-lived memory of credential lookups, keyed by tenant and the credential's hash (never
 * the credential itself). Bounded in time (ttlMs of real time, and the value's own live()), in count
 * (maxEntries, oldest first out), and by revocation: forget() drops the values under a mark at once and
 * tombstones the mark, so no lookup in flight can cache them again.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly tombstones = new Map<string, number>();
  /** Loads under way by slot (getOrLoad), with the revocation count when each began. */
  private readonly loading = new Map<string, { revocations: number; value: Promise<V> }>();
  /** forget() calls so far: a load that began before one is not shared with requests that come after it. */
  private revocations = 0;
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly tombstoneMs: number;
  private readonly maxTombstones: number;

  constructor(private readonly policy: TtlCachePolicy<V>) {
    this.ttlMs = policy.ttlMs ?? CACHE_TTL_MS;
    this.maxEntries = policy.maxEntries ?? CACHE_MAX_ENTRIES;
    this.tombstoneMs = policy.tombstoneMs ?? TOMBSTONE_MS;
    this.maxTombstones = policy.maxTombstones ?? MAX_TOMBSTONES;
  }

  private static slot(tenantId: string, hash: string) {
    return `${tenantId}\0${hash}`;
  }

  private revoked(marks: readonly string[], at: number): boolean {
    return marks.some((mark) => (this.tombstones.get(mark) ?? 0) > at);
  }

  get(tenantId: string, hash: string): V | undefined {
    const slot = TtlCache.slot(tenantId, hash);
    const entry = this.entries.get(slot);
    if (!entry) return undefined;
    const at = now();
    if (entry.until > at && !this.revoked(entry.marks, at) && (this.policy.live?.(entry.value) ?? true)) return entry.value;
    this.entries.delete(slot);
    return undefined;
  }

  set(tenantId: string, hash: string, value: V): void {
    const at = now();
    const marks = this.policy.marks(value);
    if (this.revoked(marks, at) || !(this.policy.live?.(value) ?? true)) return;
    const slot = TtlCache.slot(tenantId, hash);
    // Re-inserted at the end, so Map order stays oldest first for eviction.
    this.entries.delete(slot);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(slot, { value, marks, until: at + this.ttlMs });
  }

  /**
   * The value from memory, else from `load` (then remembered, as set() allows). Misses of one slot
   * while a load is under way wait for that load instead of starting their own (a burst of requests
   * with a credential not yet remembered makes one query), unless something was revoked since it
   * began. A load that throws throws for each of them, and nothing is remembered.
   */
  getOrLoad(tenantId: string, hash: string, load: () => Promise<V>): Promise<V> {
    const hit = this.get(tenantId, hash);
    if (hit !== undefined) return Promise.resolve(hit);
    const slot = TtlCache.slot(tenantId, hash);
    const under = this.loading.get(slot);
    if (under && under.revocations === this.revocations) return under.value;
    const value = load().then((v) => {
      this.set(tenantId, hash, v);
      return v;
    });
    const entry = { revocations: this.revocations, value };
    this.loading.set(slot, entry);
    const done = () => {
      if (this.loading.get(slot) === entry) this.loading.delete(slot);
    };
    value.then(done, done);
    return value;
  }

  /** Everything under the mark was revoked (or is being revoked) on this replica. */
  forget(mark: string): void {
    this.revocations++;
    this.tombstone(mark);
    for (const [slot, entry] of this.entries) if (entry.marks.includes(mark)) this.entries.delete(slot);
  }

  private tombstone(mark: string): void {
    const at = now();
    // Oldest first (all live equally long): drop the expired ones, and the oldest beyond the bound.
    for (const [old, until] of this.tombstones) {
      if (until > at && this.tombstones.size < this.maxTombstones) break;
      this.tombstones.delete(old);
    }
    this.tombstones.delete(mark);
    this.tombstones.set(mark, at + this.tombstoneMs);
  }
}
