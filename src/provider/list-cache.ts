import type { DynamicResourceClient } from '../client/index.js';

type Item = Record<string, unknown> & { id: string };

interface Entry {
  /** When the entry was made (its listing, if any, is at most this old). */
  at: number;
  /** The last read the entry served. */
  last: number;
  /** Reads of this collection seen in the window (the first is a plain GET). */
  reads: number;
  list?: Promise<Item[]>;
}

/**
 * How long after the last read a listing keeps serving reads. Terraform reads a block's instances
 * together (`-parallelism` at a time), but on a busy machine or against a slow service they can
 * take longer than this in all; a window counted from the listing would list them again.
 */
export const LIST_CACHE_IDLE_MS = 5_000;
/** The oldest a listing may be and still serve a read. */
export const LIST_CACHE_MAX_AGE_MS = 120_000;

/**
 * Lets one list call serve many reads of one run. Terraform starts a provider process per
 * command and refreshes every resource with its own ReadResource call; per (kind, project)
 * the first read is a plain GET (a single resource costs one call, not a whole listing), and
 * once a second read comes within the window the collection is listed (pages of 100) and
 * serves every further read and lookup by name while reads keep coming (each within
 * LIST_CACHE_IDLE_MS of the one before, up to LIST_CACHE_MAX_AGE_MS after the entry was made).
 * Any write of that kind by this process drops the entry, so a read never sees
 * a list older than our own change.
 */
export class ListCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly idleMs = LIST_CACHE_IDLE_MS,
    private readonly now: () => number = Date.now,
    private readonly maxAgeMs = LIST_CACHE_MAX_AGE_MS,
  ) {}

  private key(kind: string, projectId: string | null) {
    return `${kind}\u0000${projectId ?? ''}`;
  }

  private entry(kind: string, projectId: string | null): Entry {
    const key = this.key(kind, projectId);
    const now = this.now();
    let e = this.entries.get(key);
    if (!e || now - e.last > this.idleMs || now - e.at > this.maxAgeMs) this.entries.set(key, (e = { at: now, last: now, reads: 0 }));
    e.last = now;
    return e;
  }

  private listed(e: Entry, api: DynamicResourceClient): Promise<Item[]> {
    if (!e.list) {
      e.list = api.listAll() as Promise<Item[]>;
      // A failed listing is not kept: the next read tries again (or falls back to a GET).
      e.list.catch(() => (e.list = undefined));
    }
    return e.list;
  }

  /**
   * The object with that id, or undefined when the list does not hold it; `null` means
   * "ask with a GET" (the first read of a window, or a kind that cannot be listed).
   */
  async byId(api: DynamicResourceClient, projectId: string | null, id: string): Promise<Item | undefined | null> {
    if (!api.descriptor.operations.includes('list')) return null;
    const e = this.entry(api.kind, projectId);
    if (++e.reads === 1 && !e.list) return null;
    const items = await this.listed(e, api);
    return items.find((i) => i.id === id);
  }

  /** Every object of the collection, listed at most once per window. */
  all(api: DynamicResourceClient, projectId: string | null): Promise<Item[]> {
    const e = this.entry(api.kind, projectId);
    e.reads++;
    return this.listed(e, api);
  }

  /** Drops what is known of a kind (in one project, or everywhere for tenant kinds). */
  invalidate(kind: string, projectId: string | null) {
    this.entries.delete(this.key(kind, projectId));
  }
}
