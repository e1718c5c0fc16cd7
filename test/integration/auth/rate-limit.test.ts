import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../../support/service.js';
import { expectError, requestIdOf } from './helpers.js';

/**
 * Spec 8: one quota per tenant and endpoint, shared by all users and keys of the tenant.
 * The service's clock is pinned 10 s into a minute, so the one-minute window cannot roll
 * over mid-test and Retry-After is exact.
 */
const LIMIT = 5;
const START = Date.UTC(2031, 4, 6, 12, 30, 10);
let now = START;
let svc: TestService;

beforeAll(async () => {
  svc = await startTestService({ rateLimit: LIMIT, clock: () => now });
});
afterAll(() => svc?.close());

/** A tenant whose admin token is used for nothing but the tenant's own login (1 hit on POST /auth/login). */
const freshTenant = () => svc.tenant();

describe('rate limiting', () => {
  it('the 6th request to an endpoint in a minute is 429 rate_limited with Retry-After and X-Request-Id; the quota is shared by users and keys of the tenant', async () => {
    const t = await freshTenant();
    const project = await svc.project(t); // POST /projects: 1
    const key = await svc.apiKey(t, project.id, 'read-only'); // POST /projects/:id/api-keys: 1
    const user = await svc.user(t, 'read-only'); // POST /users: 1, POST /auth/login: 2

    // Three callers (admin user, another user, an API key) share GET /projects.
    const callers = [t.adminToken, user.token, t.adminToken, key.key, user.token];
    for (const token of callers) {
      const res = await svc.call(t, 'GET', '/projects', { token });
      expect(res.status, res.text).toBe(200);
    }
    const limited = await svc.call(t, 'GET', '/projects', { token: key.key });
    expectError(limited, 429, 'rate_limited');
    const retryAfter = limited.headers['retry-after'];
    expect(typeof retryAfter).toBe('string');
    expect(retryAfter as string).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBe(50);
    // The quota headers of admitted answers, on the 429 too.
    expect([limited.headers['ratelimit-limit'], limited.headers['ratelimit-remaining'], limited.headers['ratelimit-reset']]).toEqual([
      '5',
      '0',
      '50',
    ]);
    requestIdOf(limited);

    // Every caller of the tenant is limited on that endpoint now.
    for (const token of [t.adminToken, user.token]) expectError(await svc.call(t, 'GET', '/projects', { token }), 429, 'rate_limited');

    // Another endpoint of the same tenant still has quota (a path parameter does not make a new endpoint).
    expect((await svc.call(t, 'GET', '/users')).status).toBe(200);
    expect((await svc.call(t, 'GET', `/projects/${project.id}`)).status).toBe(200);
    expect((await svc.call(t, 'GET', '/connectors', { token: key.key })).status).toBe(200);

    // Another tenant still has quota on the same endpoint.
    const other = await freshTenant();
    const otherRes = await svc.call(other, 'GET', '/projects');
    expect(otherRes.status, otherRes.text).toBe(200);
  });

  it('the endpoint is the route, not the concrete path: different ids share one quota', async () => {
    const t = await freshTenant();
    const projects = [];
    for (let i = 0; i < 3; i++) projects.push(await svc.project(t)); // POST /projects: 3
    for (let i = 0; i < LIMIT; i++) {
      const res = await svc.call(t, 'GET', `/projects/${projects[i % 3].id}`);
      expect(res.status, res.text).toBe(200);
    }
    expectError(await svc.call(t, 'GET', `/projects/${projects[0].id}`), 429, 'rate_limited');
    expectError(await svc.call(t, 'GET', `/projects/${projects[2].id}`), 429, 'rate_limited');
    // The same path with another method is another endpoint.
    expect((await svc.call(t, 'PATCH', `/projects/${projects[1].id}`, { body: { description: 'still allowed' } })).status).toBe(200);
  });

  it('the login endpoint is not on the tenant quota (issue 17): failed attempts are throttled per account and address instead, and a throttled login issues no tokens', async () => {
    const t = await freshTenant(); // POST /auth/login: 1
    // More guesses than the tenant's 5 per minute: none is a 429, so an anonymous burst cannot use up the tenant's quota.
    for (let i = 1; i <= 5; i++) {
      const res = await svc.call(t, 'POST', '/auth/login', { token: '', body: { email: t.adminEmail, password: `guess-${i}-password` } });
      expectError(res, 401, 'unauthorized');
    }
    // The fifth failure locked the account from this address: even the right password is refused, so guessing cannot go on.
    const limited = await svc.call(t, 'POST', '/auth/login', { token: '', body: { email: t.adminEmail, password: t.adminPassword } });
    expectError(limited, 429, 'rate_limited');
    expect(limited.text).not.toContain('access_token');
    expect(Number(limited.headers['retry-after'])).toBe(1);
  });

  it('the quota comes back in the next minute window, and Retry-After counts down', async () => {
    const t = await freshTenant();
    for (let i = 0; i < LIMIT; i++) expect((await svc.call(t, 'GET', '/users')).status).toBe(200);
    now = START + 30_000; // 40 s into the minute
    const limited = await svc.call(t, 'GET', '/users');
    expectError(limited, 429, 'rate_limited');
    expect(Number(limited.headers['retry-after'])).toBe(20);
    now = START + 50_000; // the next minute
    const res = await svc.call(t, 'GET', '/users');
    expect(res.status, res.text).toBe(200);
    now = START;
  });

  it('429 answers carry distinct request ids', async () => {
    const t = await freshTenant();
    for (let i = 0; i < LIMIT; i++) await svc.call(t, 'GET', '/projects');
    const answers = await Promise.all([svc.call(t, 'GET', '/projects'), svc.call(t, 'GET', '/projects'), svc.call(t, 'GET', '/projects')]);
    for (const a of answers) expectError(a, 429, 'rate_limited');
    expect(new Set(answers.map(requestIdOf)).size).toBe(3);
  });
});
