import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { refused, sleep, wsUrl, WsClient } from '../integration/streams/ws-client.js';

/**
 * WebSocket streams against hostile clients (security audit):
 * - the stream routes are reached without a bearer header (the token is a query parameter), and
 *   admission charged the tenant's quota before the token was looked at: 600 requests with no
 *   token or a wrong one, from anybody, left the tenant's users 429 on their own streams until
 *   the minute ended. The token is now checked first; a request without one counts against its
 *   address, as an anonymous one does.
 * - streams are one-way, but every frame a client sent was decrypted, unmasked and checked, with
 *   no bound (32 sockets sending 4 KB frames: another tenant's p99 4 s). A client that sends data
 *   is closed with 1008.
 */
const QUOTA = 20;
let svc: TestService;
let victim: TestTenant;

beforeAll(async () => {
  svc = await startTestService({ rateLimit: QUOTA, anonymousRateLimit: 10_000 });
  victim = await svc.tenant();
});
afterAll(() => svc?.close());

describe('stream admission', () => {
  test("requests without a token or with a wrong one do not spend the tenant's stream quota", async () => {
    for (let i = 0; i < QUOTA; i++) {
      expect((await refused(svc, wsUrl(svc, victim.slug, '/ws/alerts'))).status).toBe(401);
      expect((await refused(svc, wsUrl(svc, victim.slug, '/ws/alerts', 'not-a-token'))).status).toBe(401);
    }
    const own = await WsClient.connect(svc, wsUrl(svc, victim.slug, '/ws/alerts', victim.adminToken));
    own.close();
    // A valid token is charged as before: the quota still holds for the tenant's own streams.
    const answers = [];
    for (let i = 0; i < QUOTA; i++) {
      try {
        (await WsClient.connect(svc, wsUrl(svc, victim.slug, '/ws/alerts', victim.adminToken))).close();
        answers.push(101);
      } catch (err) {
        answers.push((err as { status: number }).status);
      }
    }
    expect(answers).toContain(429);
  });
});

describe('client frames', () => {
  test('a client that sends data is closed with 1008; one that only answers pings stays', async () => {
    const other = await svc.tenant();
    const talker = await WsClient.connect(svc, wsUrl(svc, other.slug, '/ws/alerts', other.adminToken));
    const quiet = await WsClient.connect(svc, wsUrl(svc, other.slug, '/ws/alerts', other.adminToken));
    talker.ws.send('x'.repeat(100));
    expect(await talker.closed).toEqual({ code: 1008, reason: 'streams are one-way: send nothing' });
    quiet.ws.ping();
    await sleep(200);
    expect(quiet.ws.readyState).toBe(quiet.ws.OPEN);
    quiet.close();
  });
});
