import type { Actor } from './actor.js';

/**
 * How long a replica answers for an API key it has looked up without asking the database again.
 * The bound of docs/security.md ("API key lookups"): a key revoked through another replica, or whose
 * project was deleted there, can still READ on this one for at most this long. Writes are not
 * affected: they check the key again inside their transaction (AuthService.stillValid).
 */
export const KEY_CACHE_TTL_MS = 1_000;
/** Keys held at once; the oldest entry goes first beyond it. */
const MAX_ENTRIES = 10_000;
/**
 * How long a revocation on this replica keeps its key (or project) out of the cache: longer than any
 * transaction that revokes, so a lookup that read the row before that transaction committed cannot
 * put the key back. Bounded in count as well.
 */
const TOMBSTONE_MS = 60_000;
const MAX_TOMBSTONES = 10_000;

type KeyActor = Actor & { type: 'api_key' };

/** Real elapsed time, never the service's (possibly simulated) clock: the bound is in real seconds. */
const now = () => performance.now();

/**
 * A replica's short-lived memory of API key lookups (each list or read otherwise costs a database round
 * trip before its own query). Entries are keyed by tenant and key hash, never by the key itself.
 * Revocations on this replica take effect at once: forget() drops the entry and marks the key so no
 * lookup in flight can cache it again.
 */
export class KeyCache {
  private readonly entries = new Map<string, { actor: KeyActor; until: number }>();
  private readonly revokedKeys = new Map<string, number>();
  private readonly revokedProjects = new Map<string, number>();

  private static slot(tenantId: string, hash: string) {
    return `${tenantId}\0${hash}`;
  }

  private static project(tenantId: string, projectId: string) {
    return `${tenantId}\0${projectId}`;
  }

  private revoked(actor: KeyActor, at: number): boolean {
    const key = this.revokedKeys.get(actor.id);
    const project = this.revokedProjects.get(KeyCache.project(actor.tenantId, actor.projectId ?? ''));
    return (key !== undefined && key > at) || (project !== undefined && project > at);
  }

  get(tenantId: string, hash: string): KeyActor | undefined {
    const slot = KeyCache.slot(tenantId, hash);
    const entry = this.entries.get(slot);
    if (!entry) return undefined;
    const at = now();
    if (entry.until > at && !this.revoked(entry.actor, at)) return entry.actor;
    this.entries.delete(slot);
    return undefined;
  }

  set(tenantId: string, hash: string, actor: KeyActor): void {
    const at = now();
    if (this.revoked(actor, at)) return;
    const slot = KeyCache.slot(tenantId, hash);
    // Re-inserted at the end, so Map order stays oldest first for eviction.
    this.entries.delete(slot);
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(slot, { actor, until: at + KEY_CACHE_TTL_MS });
  }

  /** The key was revoked (or is being revoked) on this replica. */
  forgetKey(keyId: string): void {
    this.mark(this.revokedKeys, keyId);
    for (const [slot, entry] of this.entries) if (entry.actor.id === keyId) this.entries.delete(slot);
  }

  /** Every key of the project was revoked (or is being revoked) on this replica: the project is deleted. */
  forgetProject(tenantId: string, projectId: string): void {
    this.mark(this.revokedProjects, KeyCache.project(tenantId, projectId));
    for (const [slot, entry] of this.entries)
      if (entry.actor.tenantId === tenantId && entry.actor.projectId === projectId) this.entries.delete(slot);
  }

  private mark(tombstones: Map<string, number>, id: string): void {
    const at = now();
    // Oldest first (all live equally long): drop the expired ones, and the oldest beyond the bound.
    for (const [old, until] of tombstones) {
      if (until > at && tombstones.size < MAX_TOMBSTONES) break;
      tombstones.delete(old);
    }
    tombstones.delete(id);
    tombstones.set(id, at + TOMBSTONE_MS);
  }
}

/**
 * One cache per database handle, that is per service instance: the auth service fills it and the
 * store's project deletion clears it through the hook server.ts wires (StoreHooks in
 * store/resources.ts), without either holding the other.
 */
const caches = new WeakMap<object, KeyCache>();
export function keyCacheOf(db: object): KeyCache {
  let cache = caches.get(db);
  if (!cache) caches.set(db, (cache = new KeyCache()));
  return cache;
}
