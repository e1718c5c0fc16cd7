import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openSqlite } from '../../../src/service/store/sqlite.js';
import { migrate } from '../../../src/service/store/migrations.js';
import type { Db } from '../../../src/service/store/db.js';
import {
  LoginThrottle,
  lockMsSql,
  lockSeconds,
  loginThrottlePolicies,
  type ThrottlePolicy,
} from '../../../src/service/auth/login-throttle.js';
import { clientAddress } from '../../../src/service/auth/client-address.js';
import { ApiError } from '../../../src/service/errors.js';
import { DEFAULT_OPTIONS } from '../../../src/service/context.js';

const policy: ThrottlePolicy = { lockAfter: 5, baseSeconds: 1, maxSeconds: 900 };

describe('lockSeconds', () => {
  it('is 0 below the threshold, 1 s at it, doubling, capped', () => {
    expect([1, 4, 5, 6, 7, 14, 15, 100, 1e9].map((n) => lockSeconds(policy, n))).toEqual([0, 0, 1, 2, 4, 512, 900, 900, 900]);
  });

  it('the SQL ladder computes the same locks as lockSeconds', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dp-unit-'));
    const db = openSqlite(join(dir, 'x.sqlite'));
    try {
      for (const p of [policy, { lockAfter: 1, baseSeconds: 1, maxSeconds: 60 }, { lockAfter: 3, baseSeconds: 2, maxSeconds: 7 }]) {
        for (const n of [0, 1, 2, 3, 4, 5, 6, 9, 10, 14, 15, 16, 200]) {
          const row = await db.get<{ ms: number }>(`SELECT ${lockMsSql(p, String(n))} AS ms`);
          expect(row!.ms, `${JSON.stringify(p)} n=${n}`).toBe(lockSeconds(p, n) * 1000);
        }
      }
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('clientAddress', () => {
  it('maps IPv4-mapped IPv6 to IPv4, cuts IPv6 to its /64, and never throws on junk', () => {
    expect(clientAddress('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(clientAddress('127.0.0.2')).toBe('127.0.0.2');
    expect(clientAddress('2001:db8:1:2:aaaa::1')).toBe(clientAddress('2001:db8:1:2:bbbb::9'));
    expect(clientAddress('2001:db8:1:3::1')).not.toBe(clientAddress('2001:db8:1:2::1'));
    expect(clientAddress(undefined)).toBe('unknown');
    expect(clientAddress('not an address')).toBe('unknown');
  });
});

describe('LoginThrottle on SQLite', () => {
  let dir: string;
  let db: Db;
  let now: number;
  let throttle: LoginThrottle;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'dp-unit-'));
    db = openSqlite(join(dir, 'x.sqlite'));
    await migrate(db);
    now = Date.UTC(2030, 0, 1);
    throttle = new LoginThrottle(db, loginThrottlePolicies(DEFAULT_OPTIONS), () => now);
  });
  afterEach(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const retryAfterOf = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(429);
    return Number((err as ApiError).headers['Retry-After']);
  };

  it('a parallel burst cannot race the lock: exactly five of 50 concurrent attempts are admitted', async () => {
    const keys = throttle.loginKeys('tenant', 'a@x.test', '10.0.0.1');
    const outcomes = await Promise.allSettled(Array.from({ length: 50 }, () => throttle.admit(keys)));
    expect(outcomes.filter((o) => o.status === 'fulfilled').length).toBe(5);
  });

  it('below the threshold a key is not locked, even for a request whose clock read a moment earlier', async () => {
    const keys = throttle.loginKeys('tenant', 'a@x.test', '10.0.0.1');
    await throttle.admit(keys);
    now -= 10;
    expect((await throttle.admit(keys)).locks).toEqual([]);
  });

  it('backs off 1 s, 2 s, 4 s; locked attempts are not counted; a success resets the account', async () => {
    const keys = throttle.loginKeys('tenant', 'A@x.test ', '10.0.0.1');
    for (let i = 0; i < 4; i++) expect((await throttle.admit(keys)).locks).toEqual([]);
    expect((await throttle.admit(keys)).locks).toEqual([{ scope: 'account_address', seconds: 1, failures: 5 }]);
    expect(await retryAfterOf(throttle.admit(keys))).toBe(1);
    now += 1000;
    expect((await throttle.admit(keys)).locks[0].seconds).toBe(2);
    now += 1500;
    // Locked attempts do not extend the lock: 0.5 s are left of it.
    for (let i = 0; i < 10; i++) expect(await retryAfterOf(throttle.admit(keys))).toBe(1);
    now += 500;
    const seventh = await throttle.admit(keys);
    expect(seventh.locks[0]).toMatchObject({ seconds: 4, failures: 7 });
    // Another account, and the same account from another address, are not locked.
    await throttle.admit(throttle.loginKeys('tenant', 'b@x.test', '10.0.0.1'));
    const elsewhere = await throttle.admit(throttle.loginKeys('tenant', 'a@x.test', '10.0.0.2'));
    await elsewhere.succeeded();
    // The owner's success reset the account ceiling and its own pair, never the attacking address's pair.
    const rows = await db.all('SELECT key FROM login_throttle');
    expect(rows.length).toBe(5); // a's pair at 10.0.0.1, both address keys, b's pair and b's account
    expect(await retryAfterOf(throttle.admit(keys))).toBe(4);
  });

  it('the address key counts failures across accounts, and successes from a shared address are taken back', async () => {
    const address = '10.0.0.9';
    for (let i = 0; i < 40; i++) await (await throttle.admit(throttle.loginKeys('tenant', `user${i}@x.test`, address))).succeeded();
    for (let i = 0; i < 19; i++) await throttle.admit(throttle.loginKeys('tenant', `guess${i}@x.test`, address));
    const twentieth = await throttle.admit(throttle.loginKeys('tenant', 'guess-last@x.test', address));
    expect(twentieth.locks).toEqual([{ scope: 'address', seconds: 1, failures: 20 }]);
    expect(await retryAfterOf(throttle.admit(throttle.loginKeys('other-tenant', 'someone@y.test', address)))).toBe(1);
  });

  it('expired rows are deleted through the expiry index', async () => {
    for (let i = 0; i < 30; i++) await throttle.admit(throttle.loginKeys('tenant', `u${i}@x.test`, `10.1.0.${i}`));
    expect((await db.all('SELECT key FROM login_throttle')).length).toBe(90);
    now += 3600_000;
    await throttle.admit(throttle.loginKeys('tenant', 'late@x.test', '10.2.0.1'));
    await new Promise((r) => setTimeout(r, 50));
    expect((await db.all('SELECT key FROM login_throttle')).length).toBe(3);
    const plan = await db.all<{ detail: string }>(
      'EXPLAIN QUERY PLAN SELECT key FROM login_throttle WHERE expires_at < ? ORDER BY expires_at LIMIT 500',
      [now],
    );
    expect(plan.map((p) => p.detail).join(' ')).toContain('login_throttle_expiry');
  });

  it('a flood of sign-ins from new addresses cannot outgrow the cleanup: each attempt deletes more expired rows than it adds', async () => {
    const flood = async (wave: number) => {
      for (let i = 0; i < 300; i++)
        await throttle.admit(throttle.loginKeys('tenant', `w${wave}-${i}@x.test`, `10.${wave}.${i >> 8}.${i & 255}`));
    };
    const rows = async () => (await db.all('SELECT key FROM login_throttle')).length;
    await flood(1);
    expect(await rows()).toBe(900);
    now += 3600_000; // the first wave has expired
    await flood(2); // within one minute: the once-a-minute batch (500 rows) runs once
    await new Promise((r) => setTimeout(r, 50));
    // Only the second wave's rows are left; a batch a minute alone leaves 900 - 500 + 900.
    expect(await rows()).toBe(900);
    expect((await db.all('SELECT key FROM login_throttle WHERE expires_at < ?', [now])).length).toBe(0);
  });
});
