import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqlite } from '../../../src/service/store/sqlite.js';
import { migrate } from '../../../src/service/store/migrations.js';
import type { Db } from '../../../src/service/store/db.js';
import { RateLimiter } from '../../../src/service/rate-limit.js';
import { ApiError } from '../../../src/service/errors.js';

/** The database with its writes counted: the limiter must not write once per request. */
function counting(db: Db): { db: Db; writes: () => number } {
  let writes = 0;
  return {
    db: { ...db, write: (sql, params) => (writes++, db.write(sql, params)) } as Db,
    writes: () => writes,
  };
}

/** Admitted (true) or refused with a 429 (false); anything else fails the test. */
async function admitted(limiter: RateLimiter, tenant = 't1', endpoint = 'GET /projects'): Promise<boolean> {
  try {
    await limiter.hit(tenant, endpoint);
    return true;
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe('rate_limited');
    return false;
  }
}

describe('RateLimiter (per-replica reservations of one shared quota)', () => {
  let dir: string;
  let raw: Db;
  let now: number;
  const clock = () => now;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'dp-unit-'));
    raw = openSqlite(join(dir, 'x.sqlite'));
    await migrate(raw);
    now = Date.UTC(2030, 0, 1, 12, 0, 10);
  });
  afterEach(async () => {
    await raw.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one replica admits exactly the quota, then refuses without writing again, and the next window starts afresh', async () => {
    const { db, writes } = counting(raw);
    const limiter = new RateLimiter(db, 1000, clock);
    let ok = 0;
    for (let i = 0; i < 1000; i++) if (await admitted(limiter)) ok++;
    expect(ok).toBe(1000);
    expect(await admitted(limiter)).toBe(false);
    // Batches 1, 2, 4, ... up to 1000/32 = 31: about 36 writes for 1,000 requests, not 1,000.
    const afterQuota = writes();
    expect(afterQuota).toBeLessThan(45);
    for (let i = 0; i < 500; i++) expect(await admitted(limiter)).toBe(false);
    expect(writes() - afterQuota).toBeLessThanOrEqual(1);
    // Another endpoint and another tenant have their own quota.
    expect(await admitted(limiter, 't1', 'GET /users')).toBe(true);
    expect(await admitted(limiter, 't2')).toBe(true);
    now += 60_000;
    expect(await admitted(limiter)).toBe(true);
  });

  it('a busy endpoint costs a bounded number of writes a minute, whatever its rate', async () => {
    const { db, writes } = counting(raw);
    const limiter = new RateLimiter(db, 10_000_000, clock);
    for (let i = 0; i < 50_000; i++) await limiter.hit('t1', 'GET /projects');
    // 1 + 2 + ... + 2^15 = 65,535 permits in 16 writes.
    expect(writes()).toBeLessThanOrEqual(16);
  });

  it('concurrent requests share one reservation in flight instead of writing each', async () => {
    const { db, writes } = counting(raw);
    const limiter = new RateLimiter(db, 320, clock);
    const results = await Promise.all(Array.from({ length: 400 }, () => admitted(limiter)));
    expect(results.filter(Boolean).length).toBe(320);
    // Batches 1, 2, 4, 8, then 320/32 = 10 each: 35 reservations and one refused, not 400 writes.
    expect(writes()).toBeLessThanOrEqual(36);
  });

  it('replicas on one database never admit more than the quota together, and hold back at most 1/32 of it each', async () => {
    const replicas = [new RateLimiter(raw, 640, clock), new RateLimiter(raw, 640, clock), new RateLimiter(raw, 640, clock)];
    let ok = 0;
    // Interleaved, concurrent, as a load balancer spreads them.
    for (let round = 0; round < 300; round++) {
      const results = await Promise.all(replicas.map((r) => admitted(r)));
      ok += results.filter(Boolean).length;
    }
    expect(ok).toBeLessThanOrEqual(640);
    // Two other replicas can each hold back at most 640/32 = 20 unspent permits.
    expect(ok).toBeGreaterThanOrEqual(640 - 2 * 20);
  });

  it('a quota of a few requests is exact across replicas (batches never exceed 1/32 of it, so they stay at 1)', async () => {
    const a = new RateLimiter(raw, 4, clock);
    const b = new RateLimiter(raw, 4, clock);
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push(await admitted(i % 2 ? b : a));
    expect(statuses).toEqual([true, true, true, true, false, false]);
  });

  it('the 429 says when to retry: the end of the window', async () => {
    const limiter = new RateLimiter(raw, 1, clock, ' from this address');
    await limiter.hit('address:10.0.0.1', 'POST /auth/login');
    const err = await limiter.hit('address:10.0.0.1', 'POST /auth/login').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).headers).toEqual({
      'Retry-After': '50',
      'RateLimit-Limit': '1',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '50',
    });
    expect((err as ApiError).message).toContain('from this address');
  });
});
