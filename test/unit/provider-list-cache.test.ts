import { describe, expect, it } from 'vitest';
import type { DynamicResourceClient } from '../../src/client/index.js';
import { LIST_CACHE_IDLE_MS, LIST_CACHE_MAX_AGE_MS, ListCache } from '../../src/provider/list-cache.js';

/** A collection that counts its listings. */
function collection(ids: string[]) {
  const api = {
    kind: 'notification_channel',
    descriptor: { operations: ['list', 'get', 'create', 'update', 'delete'] },
    lists: 0,
    listAll: async () => {
      api.lists++;
      return ids.map((id) => ({ id, name: id }));
    },
  };
  return api as typeof api & DynamicResourceClient;
}

describe('ListCache: one listing serves the reads of a refresh', () => {
  it('asks for a GET on the first read, lists on the second, serves the rest from the listing', async () => {
    let now = 0;
    const cache = new ListCache(LIST_CACHE_IDLE_MS, () => now);
    const api = collection(['a', 'b', 'c']);
    expect(await cache.byId(api, 'p1', 'a')).toBeNull();
    expect(await cache.byId(api, 'p1', 'b')).toEqual({ id: 'b', name: 'b' });
    now += 1000;
    expect(await cache.byId(api, 'p1', 'c')).toEqual({ id: 'c', name: 'c' });
    expect(await cache.byId(api, 'p1', 'gone')).toBeUndefined();
    expect(api.lists).toBe(1);
    // Another project is another collection.
    expect(await cache.byId(api, 'p2', 'a')).toBeNull();
  });

  it('keeps the listing while reads keep coming, longer than the idle window in all', async () => {
    let now = 0;
    const cache = new ListCache(LIST_CACHE_IDLE_MS, () => now);
    const api = collection(['a']);
    await cache.byId(api, null, 'a');
    await cache.byId(api, null, 'a');
    // A refresh of thousands of resources: reads of this collection every 4 s for 60 s.
    for (let t = 0; t < 15; t++) {
      now += LIST_CACHE_IDLE_MS - 1000;
      expect(await cache.byId(api, null, 'a')).toEqual({ id: 'a', name: 'a' });
    }
    expect(api.lists).toBe(1);
  });

  it('starts again after a pause longer than the idle window, or when the listing is too old', async () => {
    let now = 0;
    const cache = new ListCache(LIST_CACHE_IDLE_MS, () => now);
    const api = collection(['a']);
    await cache.byId(api, null, 'a');
    await cache.byId(api, null, 'a');
    now += LIST_CACHE_IDLE_MS + 1;
    expect(await cache.byId(api, null, 'a')).toBeNull();
    expect(await cache.byId(api, null, 'a')).toEqual({ id: 'a', name: 'a' });
    expect(api.lists).toBe(2);
    for (let t = 0; t * 1000 <= LIST_CACHE_MAX_AGE_MS + 1000; t++) {
      now += 1000;
      await cache.byId(api, null, 'a');
    }
    // Past the maximum age the next read is a GET again, then a new listing.
    expect(api.lists).toBe(3);
  });

  it('drops the listing on invalidate (a write of that kind by this process)', async () => {
    const cache = new ListCache(LIST_CACHE_IDLE_MS, () => 0);
    const api = collection(['a']);
    await cache.byId(api, 'p1', 'a');
    await cache.byId(api, 'p1', 'a');
    cache.invalidate('notification_channel', 'p1');
    expect(await cache.byId(api, 'p1', 'a')).toBeNull();
    expect(api.lists).toBe(1);
  });
});
