import { afterEach, describe, expect, it, vi } from 'vitest';
import { KEY_CACHE_TTL_MS, KeyCache, keyCacheOf } from '../../../src/service/auth/key-cache.js';
import type { Actor } from '../../../src/service/auth/actor.js';

const key = (id: string, projectId = 'prj_a', tenantId = 'tnt_1'): Actor & { type: 'api_key' } => ({
  type: 'api_key',
  id,
  name: id,
  tenantId,
  level: 'read-only',
  projectId,
});

describe('API key lookup cache', () => {
  afterEach(() => vi.useRealTimers());

  it('answers a found key for KEY_CACHE_TTL_MS of real time, then asks again', () => {
    vi.useFakeTimers();
    const cache = new KeyCache();
    cache.set('tnt_1', 'h1', key('key_1'));
    expect(cache.get('tnt_1', 'h1')?.id).toBe('key_1');
    expect(cache.get('tnt_2', 'h1')).toBeUndefined();
    vi.advanceTimersByTime(KEY_CACHE_TTL_MS + 1);
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
  });

  it('a key revoked on this replica is refused at once, and a lookup that read it before the commit cannot bring it back', () => {
    const cache = new KeyCache();
    cache.set('tnt_1', 'h1', key('key_1'));
    cache.forgetKey('key_1');
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    // A lookup in flight during the revoking transaction saw the row still there.
    cache.set('tnt_1', 'h1', key('key_1'));
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    cache.set('tnt_1', 'h2', key('key_2'));
    expect(cache.get('tnt_1', 'h2')?.id).toBe('key_2');
  });

  it('deleting a project forgets its keys only', () => {
    const cache = new KeyCache();
    cache.set('tnt_1', 'h1', key('key_1', 'prj_a'));
    cache.set('tnt_1', 'h2', key('key_2', 'prj_b'));
    cache.set('tnt_2', 'h3', key('key_3', 'prj_a', 'tnt_2'));
    cache.forgetProject('tnt_1', 'prj_a');
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    cache.set('tnt_1', 'h1', key('key_1', 'prj_a'));
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    expect(cache.get('tnt_1', 'h2')?.id).toBe('key_2');
    expect(cache.get('tnt_2', 'h3')?.id).toBe('key_3');
  });

  it('holds at most 10,000 keys, dropping the oldest', () => {
    const cache = new KeyCache();
    for (let i = 0; i <= 10_000; i++) cache.set('tnt_1', `h${i}`, key(`key_${i}`));
    expect(cache.get('tnt_1', 'h0')).toBeUndefined();
    expect(cache.get('tnt_1', 'h1')?.id).toBe('key_1');
    expect(cache.get('tnt_1', 'h10000')?.id).toBe('key_10000');
  });

  it('is one per database handle', () => {
    const a = {};
    expect(keyCacheOf(a)).toBe(keyCacheOf(a));
    expect(keyCacheOf(a)).not.toBe(keyCacheOf({}));
  });
});
