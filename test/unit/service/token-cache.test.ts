import { afterEach, describe, expect, it, vi } from 'vitest';
import { TtlCache } from '../../../src/service/auth/ttl-cache.js';
import { TOKEN_CACHE_TTL_MS, TokenCache, type CachedToken } from '../../../src/service/auth/token-cache.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00Z');

const token = (sessionId: string, userId = 'user_1', expiresAtMs = T0 + HOUR, tenantId = 'tnt_1'): CachedToken => ({
  actor: { type: 'user', id: userId, name: `${userId}@example.test`, tenantId, level: 'admin', sessionId },
  expiresAtMs,
});

describe('bounded TTL cache with tombstones (ttl-cache.ts)', () => {
  afterEach(() => vi.useRealTimers());

  const cache = (bounds: { ttlMs?: number; maxEntries?: number; tombstoneMs?: number; maxTombstones?: number } = {}) =>
    new TtlCache<{ id: string; group: string }>({ ...bounds, marks: (v) => [`id:${v.id}`, `group:${v.group}`] });

  it('answers for ttlMs of real time (performance.now), per tenant and hash, then forgets', () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const c = cache({ ttlMs: 500 });
    c.set('tnt_1', 'h1', { id: 'a', group: 'g' });
    expect(c.get('tnt_1', 'h1')?.id).toBe('a');
    expect(c.get('tnt_2', 'h1')).toBeUndefined();
    expect(c.get('tnt_1', 'h2')).toBeUndefined();
    vi.advanceTimersByTime(499);
    expect(c.get('tnt_1', 'h1')?.id).toBe('a');
    vi.advanceTimersByTime(1);
    expect(c.get('tnt_1', 'h1')).toBeUndefined();
  });

  it('holds at most maxEntries, dropping the oldest (a value set again counts as new)', () => {
    const c = cache({ maxEntries: 3 });
    for (const h of ['h1', 'h2', 'h3']) c.set('tnt_1', h, { id: h, group: 'g' });
    c.set('tnt_1', 'h1', { id: 'h1', group: 'g' });
    c.set('tnt_1', 'h4', { id: 'h4', group: 'g' });
    expect(c.get('tnt_1', 'h2')).toBeUndefined();
    expect(['h1', 'h3', 'h4'].map((h) => c.get('tnt_1', h)?.id)).toEqual(['h1', 'h3', 'h4']);
  });

  it('getOrLoad: misses of one slot during a load share it; after a revocation they load again; a failed load is not remembered', async () => {
    const c = cache();
    let loads = 0;
    let release!: (v: { id: string; group: string }) => void;
    const load = () => {
      loads++;
      return new Promise<{ id: string; group: string }>((resolve) => (release = resolve));
    };
    const burst = Array.from({ length: 10 }, () => c.getOrLoad('tnt_1', 'h1', load));
    expect(loads).toBe(1);
    release({ id: 'a', group: 'g' });
    expect((await Promise.all(burst)).map((v) => v.id)).toEqual(Array(10).fill('a'));
    expect(c.get('tnt_1', 'h1')?.id).toBe('a');
    expect(await c.getOrLoad('tnt_1', 'h1', load)).toMatchObject({ id: 'a' });
    expect(loads).toBe(1);

    const first = c.getOrLoad('tnt_1', 'h2', load);
    const firstRelease = release;
    c.forget('group:other'); // any revocation: a request arriving after it does not join the load begun before
    const second = c.getOrLoad('tnt_1', 'h2', load);
    expect(loads).toBe(3);
    firstRelease({ id: 'b', group: 'g' });
    release({ id: 'b', group: 'g' });
    expect([(await first).id, (await second).id]).toEqual(['b', 'b']);

    const failing = () => {
      loads++;
      return Promise.reject(new Error('revoked'));
    };
    const failures = await Promise.allSettled([c.getOrLoad('tnt_1', 'h3', failing), c.getOrLoad('tnt_1', 'h3', failing)]);
    expect(failures.map((f) => f.status)).toEqual(['rejected', 'rejected']);
    expect(loads).toBe(4);
    expect(c.get('tnt_1', 'h3')).toBeUndefined();
  });

  it('forget(mark) drops every value under the mark at once, and a lookup in flight cannot put one back', () => {
    const c = cache();
    c.set('tnt_1', 'h1', { id: 'a', group: 'g1' });
    c.set('tnt_1', 'h2', { id: 'b', group: 'g1' });
    c.set('tnt_1', 'h3', { id: 'c', group: 'g2' });
    c.forget('group:g1');
    expect(c.get('tnt_1', 'h1')).toBeUndefined();
    expect(c.get('tnt_1', 'h2')).toBeUndefined();
    // A lookup that read the row before the revoking transaction committed.
    c.set('tnt_1', 'h1', { id: 'a', group: 'g1' });
    expect(c.get('tnt_1', 'h1')).toBeUndefined();
    expect(c.get('tnt_1', 'h3')?.id).toBe('c');
  });

  it('a tombstone lives tombstoneMs of real time, and at most maxTombstones are kept (oldest first out)', () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const c = cache({ tombstoneMs: 10_000, maxTombstones: 2 });
    c.forget('id:a');
    vi.advanceTimersByTime(9_999);
    c.set('tnt_1', 'h1', { id: 'a', group: 'g' });
    expect(c.get('tnt_1', 'h1')).toBeUndefined();
    vi.advanceTimersByTime(1);
    c.set('tnt_1', 'h1', { id: 'a', group: 'g' });
    expect(c.get('tnt_1', 'h1')?.id).toBe('a');

    c.forget('id:x');
    c.forget('id:y');
    c.forget('id:z');
    c.set('tnt_1', 'hx', { id: 'x', group: 'g' });
    c.set('tnt_1', 'hz', { id: 'z', group: 'g' });
    expect(c.get('tnt_1', 'hx')?.id).toBe('x');
    expect(c.get('tnt_1', 'hz')).toBeUndefined();
  });

  it('live() is checked on every answer and on every store', () => {
    let alive = true;
    const c = new TtlCache<{ id: string }>({ marks: (v) => [v.id], live: () => alive });
    c.set('tnt_1', 'h1', { id: 'a' });
    expect(c.get('tnt_1', 'h1')?.id).toBe('a');
    alive = false;
    expect(c.get('tnt_1', 'h1')).toBeUndefined();
    c.set('tnt_1', 'h1', { id: 'a' });
    alive = true;
    expect(c.get('tnt_1', 'h1')).toBeUndefined();
  });
});

describe('access token lookup cache (token-cache.ts)', () => {
  afterEach(() => vi.useRealTimers());

  it('answers an accepted token for TOKEN_CACHE_TTL_MS (1 s) of real time, whatever the service clock says before expiry', () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const cache = new TokenCache(() => T0);
    expect(TOKEN_CACHE_TTL_MS).toBe(1_000);
    cache.set('tnt_1', 'h1', token('ses_1'));
    vi.advanceTimersByTime(TOKEN_CACHE_TTL_MS - 1);
    expect(cache.get('tnt_1', 'h1')?.actor.sessionId).toBe('ses_1');
    vi.advanceTimersByTime(1);
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
  });

  it('never answers past the token expires_at on the service clock, even within the second', () => {
    let clock = T0;
    const cache = new TokenCache(() => clock);
    cache.set('tnt_1', 'h1', token('ses_1', 'user_1', T0 + 500));
    expect(cache.get('tnt_1', 'h1')).toBeDefined();
    clock = T0 + 500;
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    clock = T0;
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    // An already expired token is not stored at all.
    cache.set('tnt_1', 'h2', token('ses_2', 'user_1', T0));
    expect(cache.get('tnt_1', 'h2')).toBeUndefined();
  });

  it('forgetSession drops that session only, and keeps it out', () => {
    const cache = new TokenCache(() => T0);
    cache.set('tnt_1', 'h1', token('ses_1'));
    cache.set('tnt_1', 'h2', token('ses_1'));
    cache.set('tnt_1', 'h3', token('ses_2'));
    cache.forgetSession('ses_1');
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    expect(cache.get('tnt_1', 'h2')).toBeUndefined();
    cache.set('tnt_1', 'h1', token('ses_1'));
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    expect(cache.get('tnt_1', 'h3')?.actor.sessionId).toBe('ses_2');
  });

  it('forgetUser drops every session of the user, and keeps them out; other users stay', () => {
    const cache = new TokenCache(() => T0);
    cache.set('tnt_1', 'h1', token('ses_1', 'user_1'));
    cache.set('tnt_1', 'h2', token('ses_2', 'user_1'));
    cache.set('tnt_1', 'h3', token('ses_3', 'user_2'));
    cache.forgetUser('user_1');
    expect(cache.get('tnt_1', 'h1')).toBeUndefined();
    expect(cache.get('tnt_1', 'h2')).toBeUndefined();
    cache.set('tnt_1', 'h4', token('ses_4', 'user_1'));
    expect(cache.get('tnt_1', 'h4')).toBeUndefined();
    expect(cache.get('tnt_1', 'h3')?.actor.id).toBe('user_2');
  });

  it('holds at most 10,000 tokens, dropping the oldest', () => {
    const cache = new TokenCache(() => T0);
    for (let i = 0; i <= 10_000; i++) cache.set('tnt_1', `h${i}`, token(`ses_${i}`, `user_${i}`));
    expect(cache.get('tnt_1', 'h0')).toBeUndefined();
    expect(cache.get('tnt_1', 'h1')?.actor.sessionId).toBe('ses_1');
    expect(cache.get('tnt_1', 'h10000')?.actor.sessionId).toBe('ses_10000');
  });
});
