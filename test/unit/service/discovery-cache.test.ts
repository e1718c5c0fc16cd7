import { describe, expect, it } from 'vitest';
import { DiscoveryCache, FAILURE_KEPT_MS, KEPT_MS, MAX_ENTRIES } from '../../../src/service/sso/discovery-cache.js';

/** The cache of what identity providers published (sso/discovery-cache.ts), on a clock the test moves. */
describe('DiscoveryCache', () => {
  let now = 1_000_000;
  const clock = () => now;

  it('keeps an answer KEPT_MS, shares one fetch among those that wait for it, then fetches again', async () => {
    const cache = new DiscoveryCache<string>(clock);
    let fetches = 0;
    const fetch = async () => `answer ${++fetches}`;
    expect(await Promise.all([cache.get('k', fetch), cache.get('k', fetch), cache.get('k', fetch)])).toEqual(Array(3).fill('answer 1'));
    now += KEPT_MS - 1;
    expect(await cache.get('k', fetch)).toBe('answer 1');
    now += 1;
    expect(await cache.get('k', fetch)).toBe('answer 2');
    expect(await cache.get('other', fetch)).toBe('answer 3');
  });

  it('keeps a failure FAILURE_KEPT_MS only, so a dead IdP is asked twice a minute and a live one again soon', async () => {
    const cache = new DiscoveryCache<string>(clock);
    let fetches = 0;
    const failing = async () => {
      fetches++;
      throw new Error('IdP down');
    };
    await expect(cache.get('k', failing)).rejects.toThrow('IdP down');
    now += FAILURE_KEPT_MS - 1;
    await expect(cache.get('k', failing)).rejects.toThrow('IdP down');
    expect(fetches).toBe(1);
    now += 1;
    expect(await cache.get('k', async () => 'back')).toBe('back');
  });

  it('holds at most MAX_ENTRIES, dropping the least recently used', async () => {
    const cache = new DiscoveryCache<number>(clock);
    for (let i = 0; i < MAX_ENTRIES; i++) await cache.get(`k${i}`, async () => i);
    expect(await cache.get('k0', async () => -1)).toBe(0); // used again: now the most recent
    await cache.get(`k${MAX_ENTRIES}`, async () => MAX_ENTRIES);
    expect(cache.size).toBe(MAX_ENTRIES);
    expect(await cache.get('k0', async () => -1)).toBe(0);
    expect(await cache.get('k1', async () => -1)).toBe(-1);
  });
});
