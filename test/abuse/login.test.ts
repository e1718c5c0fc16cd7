import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent } from 'undici';
import { readFileSync } from 'node:fs';
import { startTestService, testStore, type TestService, type TestTenant } from '../support/service.js';
import { TestHttp, localhostLookup, type HttpResponse } from '../support/http.js';
import { BYSTANDER_MAX_MS, whileServingOther } from './support.js';

/**
 * Issue 17, attack 4: password guessing at POST /auth/login. Failed sign-ins are throttled per
 * (account, address), per address and per account with back-off, before any password is checked;
 * anonymous endpoints have a per-address budget instead of the tenant's shared quota.
 * The service's clock runs `skew` ms ahead of the real one, so a test can step past a lock.
 */
let skew = 0;
let svc: TestService;
let other: TestHttp;
let t: TestTenant;

/** A client whose connections come from another loopback address (the service trusts no proxy, so this is the client's address). */
function httpFrom(service: TestService, localAddress: string): TestHttp {
  const http = new TestHttp(service.service.tls.certPath);
  void http.agent.close();
  // localAddress is a Client option of undici (a connect option is ignored).
  (http as { agent: Agent }).agent = new Agent({
    localAddress,
    connect: { ca: readFileSync(service.service.tls.certPath), lookup: localhostLookup },
    connections: 8,
  });
  return http;
}

/** Past every lock and its memory (15 min), at the start of a fresh one-minute rate window. */
function freshStart() {
  skew += 16 * 60_000;
  skew += 60_000 - ((Date.now() + skew) % 60_000) + 100;
}

const login = (http: TestHttp, s: TestService, slug: string, email: string, password: string) =>
  http.call('POST', s.url(slug, '/auth/login'), { body: { email, password } });

function expectRateLimited(res: HttpResponse) {
  expect(res.status, res.text).toBe(429);
  expect(res.body.error.code).toBe('rate_limited');
  expect(String(res.headers['retry-after'])).toMatch(/^[1-9]\d*$/);
}

beforeAll(async () => {
  // A realistic tenant quota (the test default is 100,000): an anonymous burst used to spend it.
  svc = await startTestService({ rateLimit: 100, anonymousRateLimit: 200, clock: () => Date.now() + skew });
  other = httpFrom(svc, '127.0.0.2');
  t = await svc.tenant();
});
afterAll(async () => {
  await other?.close();
  await svc?.close();
});

describe('login throttle', () => {
  it('50 parallel wrong passwords: five are checked, the rest are 429 with Retry-After before any hash work; back-off doubles', async () => {
    const bystander = await svc.tenant();
    const auth = svc.service.ctx.auth;
    const realLogin = auth.login.bind(auth);
    let checked = 0;
    auth.login = (...args) => (checked++, realLogin(...args));
    try {
      const { result, probe } = await whileServingOther(svc, bystander, () =>
        Promise.all(Array.from({ length: 50 }, (_, i) => login(svc.http, svc, t.slug, t.adminEmail, `wrong-guess-${i}`))),
      );
      const statuses = result.map((r) => r.status);
      // Exactly five under normal load; six if the burst outlives the first (1 s) lock on a loaded machine.
      expect(statuses.filter((s) => s === 401).length).toBeGreaterThanOrEqual(5);
      expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(6);
      for (const r of result.filter((r) => r.status !== 401)) expectRateLimited(r);
      expect(checked).toBe(statuses.filter((s) => s === 401).length);
      expect(probe.failures).toEqual([]);
      expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);

      // Each wait is answered by one more checked guess, and the lock doubles.
      const waits: number[] = [];
      for (let i = 0; i < 5; i++) {
        const locked = await login(svc.http, svc, t.slug, t.adminEmail, 'still-guessing');
        expectRateLimited(locked);
        waits.push(Number(locked.headers['retry-after']));
        skew += Number(locked.headers['retry-after']) * 1000;
        expect((await login(svc.http, svc, t.slug, t.adminEmail, 'still-guessing')).status).toBe(401);
      }
      expect(waits.slice(1)).toEqual(waits.slice(1).map((_, i) => waits[1] * 2 ** i));
      expect(waits[4]).toBeGreaterThanOrEqual(16);

      // During the lock even the right password is refused from this address, unchecked.
      const before = checked;
      expectRateLimited(await login(svc.http, svc, t.slug, t.adminEmail, t.adminPassword));
      expect(checked).toBe(before);
    } finally {
      auth.login = realLogin;
    }
  });

  it('meanwhile the owner logs in from another address, another account from the attacking address, and the admin is served', async () => {
    const user = await svc.user(t, 'read-write');
    expectRateLimited(await login(svc.http, svc, t.slug, t.adminEmail, t.adminPassword));
    const owner = await login(other, svc, t.slug, t.adminEmail, t.adminPassword);
    expect(owner.status, owner.text).toBe(200);
    const colleague = await login(svc.http, svc, t.slug, user.email, user.password);
    expect(colleague.status, colleague.text).toBe(200);
    expect((await svc.call(t, 'GET', '/projects', { token: owner.body.access_token })).status).toBe(200);
    // The owner's success does not unlock the attacking address's pair.
    expectRateLimited(await login(svc.http, svc, t.slug, t.adminEmail, t.adminPassword));
  });

  it('every lock is in the tenant audit log with account and address, never a password', async () => {
    const res = await svc.call(t, 'GET', '/audit-logs', { query: { action: 'login.throttled', limit: 100 } });
    expect(res.status, res.text).toBe(200);
    const entries = res.body.data as { actor: { name: string }; resource_name: string; diff: Record<string, { after: unknown }> }[];
    expect(entries.length).toBeGreaterThanOrEqual(5);
    for (const e of entries) {
      expect(e.actor.name).toBe(t.adminEmail);
      expect(e.resource_name).toBe('127.0.0.1');
      expect(e.diff.scope.after).toBe('account_address');
      expect(Number(e.diff.locked_seconds.after)).toBeGreaterThanOrEqual(1);
    }
    expect(res.text).not.toMatch(/wrong-guess|still-guessing|correct-horse/);
  });

  it('an anonymous burst spends its address budget, not the tenant quota: the admin still logs in, refreshes and calls the API', async () => {
    const victim = await svc.tenant();
    const bystander = await svc.tenant();
    // 150 logins (over the tenant's 100 per minute) at accounts that do not exist, from one address.
    const { result, probe } = await whileServingOther(svc, bystander, async () => {
      const answers: number[] = [];
      for (let batch = 0; batch < 5; batch++) {
        const res = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            login(svc.http, svc, victim.slug, `nobody-${batch}-${i}@${victim.slug}.test`, 'guess-password'),
          ),
        );
        answers.push(...res.map((r) => r.status));
      }
      return answers;
    });
    expect(new Set(result)).toEqual(new Set([401, 429]));
    // The address throttle (20 failures) stopped the spray long before 150 checks.
    expect(result.filter((s) => s === 401).length).toBeLessThanOrEqual(22);
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);

    const admin = await login(other, svc, victim.slug, victim.adminEmail, victim.adminPassword);
    expect(admin.status, admin.text).toBe(200);
    const refreshed = await other.call('POST', svc.url(victim.slug, '/auth/refresh'), {
      body: { refresh_token: admin.body.refresh_token },
    });
    expect(refreshed.status, refreshed.text).toBe(200);
    for (let i = 0; i < 5; i++) expect((await svc.call(victim, 'GET', '/users', { token: refreshed.body.access_token })).status).toBe(200);
  });

  it('the per-address budget of anonymous endpoints: 429 from the flooding address only', async () => {
    freshStart();
    const bystander = await svc.tenant();
    const accept = (http: TestHttp) =>
      http.call('POST', svc.url(t.slug, '/auth/invitations/accept'), {
        body: { invitation_token: 'dpinv_guess', password: 'new-password-1' },
      });
    const { result: flood, probe } = await whileServingOther(svc, bystander, () =>
      Promise.all(Array.from({ length: 220 }, () => accept(svc.http))),
    );
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    expect(flood.filter((r) => r.status === 401).length).toBe(200);
    const limited = flood.filter((r) => r.status === 429);
    expect(limited.length).toBe(20);
    expectRateLimited(limited[0]);
    expect(limited[0].body.error.message).toContain('from this address');
    expect((await accept(other)).status).toBe(401);
    expect((await svc.call(t, 'GET', '/projects')).status).toBe(200);
  });

  it('failed refreshes from one address are throttled too', async () => {
    freshStart();
    const victim = await svc.tenant();
    const bystander = await svc.tenant();
    const { result: bad, probe } = await whileServingOther(svc, bystander, () =>
      Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          svc.http.call('POST', svc.url(victim.slug, '/auth/refresh'), { body: { refresh_token: `dprt_guess_${i}` } }),
        ),
      ),
    );
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    expect(bad.filter((r) => r.status === 401).length).toBeLessThanOrEqual(21);
    expectRateLimited(bad.find((r) => r.status === 429)!);
    // A real refresh from another address is unaffected.
    const good = await other.call('POST', svc.url(victim.slug, '/auth/refresh'), { body: { refresh_token: victim.refreshToken } });
    expect(good.status, good.text).toBe(200);
  });
});

/** Replicas behind a load balancer share one throttle through the database. */
describe.skipIf(testStore() !== 'postgres')('login throttle across two replicas on one PostgreSQL database', () => {
  let a: TestService;
  let b: TestService;
  let shared: TestTenant;
  beforeAll(async () => {
    a = await startTestService();
    b = await startTestService({ databaseUrl: a.service.ctx.options.databaseUrl });
    shared = await a.tenant();
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('failures on one replica lock the account on the other', async () => {
    const bystander = await b.tenant();
    const { probe } = await whileServingOther(b, bystander, async () => {
      for (let i = 0; i < 4; i++) expect((await login(a.http, a, shared.slug, shared.adminEmail, `guess-${i}`)).status).toBe(401);
      expect((await login(b.http, b, shared.slug, shared.adminEmail, 'guess-5')).status).toBe(401);
    });
    expect(probe.failures).toEqual([]);
    expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
    expectRateLimited(await login(a.http, a, shared.slug, shared.adminEmail, shared.adminPassword));
    expectRateLimited(await login(b.http, b, shared.slug, shared.adminEmail, shared.adminPassword));
  });
});
