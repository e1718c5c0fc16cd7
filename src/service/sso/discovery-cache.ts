/**
 * What an identity provider published (its OpenID configuration, with the keys openid-client keeps
 * in it), kept for a while per provider, so anonymous sign-ins are not each a request to the IdP.
 *
 * Anyone can start a sign-in with any tenant's provider, and every start and callback fetched the
 * discovery document again (up to 256 KiB, up to 30 s): a flood of sign-in starts was a flood of
 * requests from the service to the tenant's IdP. Now (on the service's clock):
 * - an answer is kept KEPT_MS (10 minutes, about what IdPs allow to cache their discovery document:
 *   a changed endpoint or a new signing key is seen within that; openid-client fetches the keys
 *   again by itself when a token names a key it does not have);
 * - a failure is kept FAILURE_KEPT_MS (30 s), so a dead or slow IdP is asked at most twice a minute
 *   per provider, and a transient outage blocks sign-in for at most that long;
 * - starts that arrive while the document is being fetched wait for that one fetch;
 * - at most MAX_ENTRIES are kept (the least recently used goes first), so tenants cannot grow it
 *   without end.
 * The key is everything the answer depends on (the provider's settings, secrets included): an edited
 * provider is fetched again at once.
 */
export const KEPT_MS = 10 * 60_000;
export const FAILURE_KEPT_MS = 30_000;
export const MAX_ENTRIES = 1_000;

interface Entry<T> {
  value: Promise<T>;
  /** When it stops being used (the clock's ms); until settled, never. */
  until: number;
}

export class DiscoveryCache<T> {
  private readonly entries = new Map<string, Entry<T>>();

  constructor(private readonly now: () => number = Date.now) {}

  get(key: string, fetch: () => Promise<T>): Promise<T> {
    const found = this.entries.get(key);
    this.entries.delete(key);
    if (found && found.until > this.now()) {
      this.entries.set(key, found); // the last used goes last: what is dropped when full is the least recently used
      return found.value;
    }
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    const entry: Entry<T> = { value: fetch(), until: Infinity };
    this.entries.set(key, entry);
    entry.value.then(
      () => (entry.until = this.now() + KEPT_MS),
      () => (entry.until = this.now() + FAILURE_KEPT_MS),
    );
    return entry.value;
  }

  get size(): number {
    return this.entries.size;
  }
}
