import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { hashSecret } from '../../../src/service/ids.js';
import { TOKEN_CACHE_TTL_MS } from '../../../src/service/auth/token-cache.js';
import type { Db, SqlValue } from '../../../src/service/store/db.js';
import { connectorBody, expectError, sleep } from './helpers.js';

/**
 * Access token lookups are remembered per replica for at most 1 s (docs/security.md, "Access token
 * lookups"). The service runs in this process, so performance.now() here and in the cache is one clock:
 * a check started less than TOKEN_CACHE_TTL_MS after the lookup that filled the cache must be answered from
 * memory. On a machine too slow to finish within the second, the attempt is made again with a new login.
 */

let svc: TestService;
let t: TestTenant;
let projectId: string;
/** Access token lookups that reached the database. */
let tokenLookups = 0;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  projectId = (await svc.project(t, 'cached')).id;
  const db = svc.service.ctx.db as Db;
  const get = db.get;
  db.get = <T>(sql: string, params?: SqlValue[]) => {
    if (/FROM access_tokens/.test(sql)) tokenLookups++;
    return get.call(db, sql, params) as Promise<T | undefined>;
  };
});
afterAll(() => svc?.close());

let names = 0;
const read = (token: string, path = `/projects/${projectId}/connectors`) => svc.call(t, 'GET', path, { token });
const write = (token: string) =>
  svc.call(t, 'POST', `/projects/${projectId}/connectors`, { token, body: connectorBody(`cached-${++names}`) });
const sessionOf = async (token: string) =>
  (await svc.service.ctx.db.get<{ session_id: string }>('SELECT session_id FROM access_tokens WHERE hash = ?', [hashSecret(token)]))!
    .session_id;

/** Runs attempt until it says it finished within the second (true), at most 5 times. */
async function withinTheSecond(attempt: () => Promise<boolean>) {
  for (let i = 0; i < 5; i++) if (await attempt()) return;
  throw new Error(`never finished within ${TOKEN_CACHE_TTL_MS} ms`);
}

/**
 * Real milliseconds since now. Started just before the lookup that fills the cache (`elapsed`), it bounds
 * how long the entry has lived at most: checks made before it reaches the TTL must be answered from memory.
 * Started just after that lookup answered (`sinceFilled`), it bounds the entry's age from below.
 */
const stopwatch = () => {
  const started = performance.now();
  return () => performance.now() - started;
};

/**
 * Sleeps until the entry filled before `sinceFilled` started has surely expired. (Timing from before the
 * lookup instead fell short on a slow machine: the entry was filled, and expires, that much later.)
 */
const outlive = (sinceFilled: () => number) => sleep(Math.max(0, TOKEN_CACHE_TTL_MS - sinceFilled()) + 50);

describe('access tokens remembered for at most a second', () => {
  it('a burst of requests with one token asks the database once; a row deleted behind the service is refused after the second', async () => {
    await withinTheSecond(async () => {
      const u = await svc.user(t, 'read-write');
      const before = tokenLookups;
      const elapsed = stopwatch();
      expect((await read(u.token)).status).toBe(200);
      const sinceFilled = stopwatch();
      expect(tokenLookups - before).toBe(1);
      // As a logout on another replica would: the token is gone from the database.
      await svc.service.ctx.db.run('DELETE FROM access_tokens WHERE hash = ?', [hashSecret(u.token)]);
      const burst = await Promise.all(Array.from({ length: 10 }, () => read(u.token)));
      if (elapsed() >= TOKEN_CACHE_TTL_MS) return false;
      expect(burst.map((r) => r.status)).toEqual(Array(10).fill(200));
      expect(tokenLookups - before).toBe(1);
      await outlive(sinceFilled);
      expectError(await read(u.token), 401, 'unauthorized');
      expect(tokenLookups - before).toBe(2);
      return true;
    });
  });

  it('only accepted tokens are remembered: a wrong token asks the database every time', async () => {
    const before = tokenLookups;
    for (let i = 0; i < 3; i++) expectError(await read('dpat_not-a-real-token'), 401, 'unauthorized');
    expect(tokenLookups - before).toBe(3);
  });
});

describe('revoked on this replica: refused at once', () => {
  const cases: Array<[string, (u: Awaited<ReturnType<TestService['user']>>) => Promise<void>]> = [
    [
      'a reused refresh token (the whole session is revoked)',
      async (u) => {
        const body = { refresh_token: u.refreshToken };
        expect((await svc.call(t, 'POST', '/auth/refresh', { token: '', body })).status).toBe(200);
        expectError(await svc.call(t, 'POST', '/auth/refresh', { token: '', body }), 401, 'unauthorized');
      },
    ],
    [
      'a password reset by PATCH',
      async (u) => void (await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { password: 'reset-1-password' } })),
    ],
    ['the user disabled', async (u) => void (await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { disabled: true } }))],
    ['the user deleted', async (u) => void (await svc.ok(t, 'DELETE', `/users/${u.id}`))],
  ];

  it.each(cases)('%s', async (_name, revoke) => {
    const u = await svc.user(t, 'read-write');
    const elapsed = stopwatch();
    expect((await read(u.token)).status).toBe(200);
    const remembered = tokenLookups;
    expect((await read(u.token)).status).toBe(200);
    // Answered from memory (when the machine was quick enough to tell).
    if (elapsed() < TOKEN_CACHE_TTL_MS) expect(tokenLookups).toBe(remembered);
    await revoke(u);
    expectError(await read(u.token), 401, 'unauthorized');
    expectError(await write(u.token), 401, 'unauthorized');
  });

  it('a lowered role applies at once to the next request, and a raised one too', async () => {
    const u = await svc.user(t, 'admin');
    expect((await read(u.token, '/audit-logs')).status).toBe(200);
    expect((await read(u.token, '/audit-logs')).status).toBe(200);
    await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { role: 'read-write' } });
    expectError(await read(u.token, '/audit-logs'), 403, 'forbidden');
    expect((await read(u.token)).status).toBe(200);
    expect((await write(u.token)).status).toBe(201);
    await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { role: 'admin' } });
    expect((await read(u.token, '/audit-logs')).status).toBe(200);
  });

  it('other sessions of other users are untouched', async () => {
    const u = await svc.user(t, 'read-write');
    const other = await svc.user(t, 'read-write');
    expect((await read(other.token)).status).toBe(200);
    await svc.ok(t, 'DELETE', `/users/${u.id}`);
    expect((await read(other.token)).status).toBe(200);
  });
});

describe('revoked behind this replica (as through another one): reads for under a second, writes never', () => {
  it('a revoked session still reads from memory within the second, is refused any write at once, and any read after', async () => {
    await withinTheSecond(async () => {
      const u = await svc.user(t, 'read-write');
      const elapsed = stopwatch();
      expect((await read(u.token)).status).toBe(200);
      const sinceFilled = stopwatch();
      await svc.service.ctx.db.run('UPDATE sessions SET revoked_at = ? WHERE id = ?', [new Date().toISOString(), await sessionOf(u.token)]);
      const stale = await read(u.token);
      const written = await write(u.token);
      if (elapsed() >= TOKEN_CACHE_TTL_MS) return false;
      expect(stale.status).toBe(200);
      expectError(written, 401, 'unauthorized', /revoked/);
      await outlive(sinceFilled);
      expectError(await read(u.token), 401, 'unauthorized');
      return true;
    });
  });

  it('a role lowered behind it: reads keep the old role within the second, writes are checked against the new one', async () => {
    await withinTheSecond(async () => {
      const u = await svc.user(t, 'admin');
      const elapsed = stopwatch();
      expect((await read(u.token, '/audit-logs')).status).toBe(200);
      const sinceFilled = stopwatch();
      const row = (await svc.service.ctx.db.get<{ data: string }>('SELECT data FROM resources WHERE id = ?', [u.id]))!;
      const demoted = JSON.stringify({ ...JSON.parse(row.data), role: 'read-only' });
      await svc.service.ctx.db.run('UPDATE resources SET data = ? WHERE id = ?', [demoted, u.id]);
      const stale = await read(u.token, '/audit-logs');
      const written = await svc.call(t, 'POST', '/projects', { token: u.token, body: { name: `demoted-${++names}` } });
      if (elapsed() >= TOKEN_CACHE_TTL_MS) return false;
      expect(stale.status).toBe(200);
      expectError(written, 401, 'unauthorized', /revoked/);
      await outlive(sinceFilled);
      expectError(await read(u.token, '/audit-logs'), 403, 'forbidden');
      expect((await read(u.token)).status).toBe(200);
      return true;
    });
  });
});

describe('never past the token expires_at', () => {
  let clocked: TestService;
  let now = Date.parse('2026-03-01T00:00:00Z');
  beforeAll(async () => {
    clocked = await startTestService({ clock: () => now });
  });
  afterAll(() => clocked?.close());

  it('a remembered token is refused as expired as soon as the service clock reaches its expiry', async () => {
    const ct = await clocked.tenant();
    expect((await clocked.call(ct, 'GET', '/projects')).status).toBe(200);
    now += 3_599_000;
    expect((await clocked.call(ct, 'GET', '/projects')).status).toBe(200);
    now += 1_000;
    expectError(await clocked.call(ct, 'GET', '/projects'), 401, 'unauthorized', /expired/i);
  });
});

/** Two replicas on one PostgreSQL database: the documented bound, end to end. */
describe.skipIf(testStore() !== 'postgres')('two replicas: a user disabled on one', () => {
  let a: TestService;
  let b: TestService;
  let rt: TestTenant;
  beforeAll(async () => {
    a = await startTestService();
    b = await startTestService({ databaseUrl: a.service.ctx.options.databaseUrl });
    rt = await a.tenant();
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it("is refused at once there and for writes everywhere, and for reads on the other replica as soon as the first's notice arrives, before its cached second is up", async () => {
    const project = await a.project(rt, 'replicated');
    const path = `/projects/${project.id}/connectors`;
    await withinTheSecond(async () => {
      const u = await a.user(rt, 'read-write');
      const elapsed = stopwatch();
      // B looks the token up and keeps it for up to a second (TOKEN_CACHE_TTL_MS).
      expect((await b.call(rt.slug, 'GET', path, { token: u.token })).status).toBe(200);
      await a.ok(rt, 'PATCH', `/users/${u.id}`, { body: { disabled: true } });
      const onA = await a.call(rt, 'GET', path, { token: u.token });
      let refusedOnB: number | undefined;
      for (let i = 0; i < 100 && refusedOnB === undefined; i++) {
        if ((await b.call(rt.slug, 'GET', path, { token: u.token })).status === 401) refusedOnB = elapsed();
        else await new Promise((r) => setTimeout(r, 5));
      }
      const writeOnB = await b.call(rt.slug, 'POST', path, { token: u.token, body: connectorBody(`replica-${++names}`) });
      expectError(onA, 401, 'unauthorized');
      expectError(writeOnB, 401, 'unauthorized');
      // Refused on B while its cached entry still had time to live: A's revoked notice did it, not the TTL.
      return refusedOnB !== undefined && refusedOnB < TOKEN_CACHE_TTL_MS;
    });
  });
});
