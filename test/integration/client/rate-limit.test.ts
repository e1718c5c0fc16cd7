import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, type ClientEvent } from '../../../src/client/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { clientFor } from './helpers.js';

/**
 * 429s from the real service: 3 requests per minute per tenant and endpoint. The service's
 * clock is real time plus `skew`; before the burst the test moves it to 57 s into a fresh
 * minute, so the 4th request is refused with `Retry-After: 3` (2 on a very slow machine) and
 * the window really rolls over when that has passed, while the client waits what it was told.
 * The clients spend the whole quota (rateLimitReserve 0): the reserve is rate-reserve.test.ts's.
 */
let skew = 0;
let svc: TestService;
let t: TestTenant;

beforeAll(async () => {
  svc = await startTestService({ rateLimit: 3, clock: () => Date.now() + skew });
  t = await svc.tenant(); // POST /auth/login: 1
});
afterAll(() => svc?.close());

/** Moves the service to `second` seconds into the next minute. */
function serviceClockAt(second: number) {
  const now = Date.now() + skew;
  const target = (Math.floor(now / 60_000) + 1) * 60_000 + second * 1000;
  skew += target - now;
}

const timed = <T>(p: Promise<T>) => p.then((value) => ({ value, at: Date.now() }));

describe('429 Retry-After', () => {
  it('pauses every request of the endpoint in this client, not other endpoints; a call whose budget is too short fails at once', async () => {
    const events: ClientEvent[] = [];
    let onRateLimited: (e: Extract<ClientEvent, { type: 'rate_limited' }>) => void = () => undefined;
    const rateLimited = new Promise<Extract<ClientEvent, { type: 'rate_limited' }>>((resolve) => (onRateLimited = resolve));
    const client = clientFor(svc, t, {
      rateLimitReserve: 0,
      onEvent: (e) => {
        events.push(e);
        if (e.type === 'rate_limited') onRateLimited(e);
      },
    });
    const p1 = await client.projects.create({ name: 'rl-one' }); // POST /auth/login: 2, POST /projects: 1
    const p2 = await client.projects.create({ name: 'rl-two' }); // POST /projects: 2
    const key = await client.apiKeys(p1.id).create({ name: 'rl-key', permission_level: 'read-only' }); // POST .../api-keys: 1
    const impatient = clientFor(svc, t, { rateLimitReserve: 0, apiKey: key.key, retry: { maxElapsedMs: 500 } });
    try {
      serviceClockAt(57);
      const connectors = (projectId: string) => client.resources('connector', { projectId });
      for (let i = 0; i < 3; i++) await connectors(p1.id).list();
      client.resetStats();

      // The 4th call gets the 429 and waits; the calls below start while it waits.
      const first = timed(connectors(p1.id).list());
      const limited = await rateLimited;
      expect(limited.endpoint).toBe('GET /projects/{id}/connectors');
      expect([2000, 3000]).toContain(limited.retryAfterMs);
      expect(client.pausedUntil('GET', '/projects/{id}/connectors')).toBe(limited.until);
      expect(client.pausedUntil('GET', '/projects/{id}/pipelines')).toBeUndefined();

      const sameEndpoint = timed(connectors(p1.id).list());
      const sameEndpointOtherProject = timed(connectors(p2.id).list());
      const otherEndpoint = timed(client.resources('pipeline', { projectId: p1.id }).list());
      const otherMethodSameRoute = timed(connectors(p1.id).create({ name: 'during-pause', connector_type: 'mysql' }));

      // Another client has no pause of its own: it meets the 429 itself, and with 0.5 s
      // of budget it does not wait seconds but fails at once, with the wait it was told.
      const startedImpatient = Date.now();
      const refused = (await impatient
        .resources('connector', { projectId: p1.id })
        .list()
        .catch((e: unknown) => e)) as ApiError;
      expect(refused).toBeInstanceOf(ApiError);
      expect(refused).toMatchObject({ status: 429, code: 'rate_limited', requestId: expect.any(String) });
      expect(refused.retryAfterMs).toBeGreaterThanOrEqual(2000);
      expect(Date.now() - startedImpatient).toBeLessThan(500);
      expect(impatient.stats().calls).toBe(1);

      const other = await otherEndpoint;
      const otherMethod = await otherMethodSameRoute;
      expect(other.at).toBeLessThan(limited.until - 1000);
      expect(otherMethod.at).toBeLessThan(limited.until - 1000);
      expect(otherMethod.value.name).toBe('during-pause');

      const results = await Promise.all([first, sameEndpoint, sameEndpointOtherProject]);
      for (const r of results) {
        expect(r.value.data).toEqual(expect.any(Array));
        expect(r.at).toBeGreaterThanOrEqual(limited.until - 5);
      }
      expect(results[0].value.data.map((c) => c.name)).toEqual(['during-pause']);

      // The server saw one 429 only: the paused calls were held back, not sent into the limit.
      const stats = client.stats();
      expect(stats.byEndpoint['GET /projects/{id}/connectors']).toEqual({ calls: 4, retries: 1, rateLimited: 1, failed: 0 });
      expect(stats.byEndpoint['GET /projects/{id}/pipelines']).toEqual({ calls: 1, retries: 0, rateLimited: 0, failed: 0 });
      expect(stats.rateLimitWaitMs).toBeGreaterThanOrEqual(2 * (limited.retryAfterMs - 100));
      expect(events.filter((e) => e.type === 'rate_limit_wait').length).toBe(3);
      expect(events.filter((e) => e.type === 'response' && e.status === 429).length).toBe(1);
    } finally {
      await client.close();
      await impatient.close();
    }
  });
});
