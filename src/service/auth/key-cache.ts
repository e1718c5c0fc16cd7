import type { Actor } from './actor.js';
import { CACHE_TTL_MS, TtlCache } from './ttl-cache.js';

/**
 * How long a replica answers for an API key it has looked up without asking the database again.
 * The bound of docs/security.md ("API key lookups"): a key revoked through another replica, or whose
 * project was deleted there, can still READ on this one for at most this long. Writes are not
 * affected: they check the key again inside their transaction (AuthService.stillValid).
 */
export const KEY_CACHE_TTL_MS = CACHE_TTL_MS;

type KeyActor = Actor & { type: 'api_key' };

const keyMark = (keyId: string) => `key\0${keyId}`;
const projectMark = (tenantId: string, projectId: string) => `project\0${tenantId}\0${projectId}`;

/**
 * A replica's short-lived memory of API key lookups (each list or read otherwise costs a database round
 * trip before its own query): a TtlCache of the key's actor, at most 10,000 keys. Revocations on this
 * replica take effect at once: forgetKey() and forgetProject() drop the key and keep it out.
 */
export class KeyCache extends TtlCache<KeyActor> {
  constructor() {
    super({ ttlMs: KEY_CACHE_TTL_MS, marks: (actor) => [keyMark(actor.id), projectMark(actor.tenantId, actor.projectId ?? '')] });
  }

  /** The key was revoked (or is being revoked) on this replica. */
  forgetKey(keyId: string): void {
    this.forget(keyMark(keyId));
  }

  /** Every key of the project was revoked (or is being revoked) on this replica: the project is deleted. */
  forgetProject(tenantId: string, projectId: string): void {
    this.forget(projectMark(tenantId, projectId));
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
