import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApiError, type ClientEvent } from '../../../src/client/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { clientFor } from './helpers.js';

/**
 * The quota is the tenant's, shared by all its callers. A plan of 100,000 resources reads about
 * 880 pages of one endpoint, and took the whole of a 600-a-minute quota: the tenant's other
 * users got 429s for the rest of each minute. The service now says what is left of the quota
 * (RateLimit-Limit, -Remaining, -Reset), and the client leaves the last fifth of it to the others:
 * at that point it waits for the window to end instead of spending it. Real service, 20 a minute.
 */
const QUOTA = 20;
let skew = 0;
let svc: TestService;
let t: TestTenant;

beforeAll(async () => {
  svc = await startTestService({ rateLimit: QUOTA, clock: () => Date.now() + skew });
  t = await svc.tenant();
});
afterAll(() => svc?.close());

/** Moves the service to `second` seconds into the next minute: the test's calls all fall in one window. */
function serviceClockAt(second: number) {
  const now = Date.now() + skew;
  skew += (Math.floor(now / 60_000) + 1) * 60_000 + second * 1000 - now;
}

it("the client stops at the last fifth of an endpoint's quota and leaves it to the tenant's other callers", async () => {
  const events: ClientEvent[] = [];
  const client = clientFor(svc, t, { onEvent: (e) => events.push(e), retry: { maxElapsedMs: 300 } });
  const project = await client.projects.create({ name: 'reserve' });
  serviceClockAt(5);
  const raw = await svc.call(t, 'GET', `/projects/${project.id}/connectors`);
  expect(raw.headers['ratelimit-limit']).toBe(String(QUOTA));
  expect(raw.headers['ratelimit-remaining']).toBe(String(QUOTA - 1));
  expect(Number(raw.headers['ratelimit-reset'])).toBeGreaterThan(50);
  const connectors = client.resources('connector', { projectId: project.id });
  client.resetStats();
  // 15 more: the last leaves 4 (a fifth of 20), and the endpoint pauses in this client.
  for (let i = 0; i < 15; i++) await connectors.list();
  expect(events.filter((e) => e.type === 'rate_limit_reserve')).toEqual([
    { type: 'rate_limit_reserve', endpoint: 'GET /projects/{id}/connectors', remaining: 4, limit: QUOTA, until: expect.any(Number) },
  ]);
  // The next call does not spend the reserve: it would wait for the window, longer than it may.
  const err = await connectors.list().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).message).toContain("to leave the rest of the quota to the tenant's other callers");
  expect(client.stats().calls).toBe(15);
  expect(client.stats().rateLimited).toBe(0);
  // Other callers of the tenant still have the 4; then the quota is spent.
  const others = [];
  for (let i = 0; i < 5; i++) others.push((await svc.call(t, 'GET', `/projects/${project.id}/connectors`)).status);
  expect(others).toEqual([200, 200, 200, 200, 429]);
  // Another endpoint of the client is not paused.
  await client.resources('pipeline', { projectId: project.id }).list();
});
