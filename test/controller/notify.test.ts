import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { MAX_QUEUED_PER_RECEIVER, Notifier, type ControllerEvent } from '../../src/controller/notify.js';
import { loadOrCreateTls } from '../../src/service/tls.js';

/** The notifier against a local HTTPS receiver: signatures, Slack's shape, retries, dedup and rate limits. */
let server: Server;
let url: string;
let ca: string;
let received: { path: string; headers: Record<string, string | string[] | undefined>; body: string }[] = [];
/** Answers 500 to the next N requests. */
let failNext = 0;
/** Holds the next request this long before answering it. */
let holdNextMs = 0;

beforeAll(async () => {
  const tls = await loadOrCreateTls({ dataDir: mkdtempSync(join(tmpdir(), 'dp-notify-')) });
  ca = readFileSync(tls.certPath, 'utf8');
  server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', async () => {
      if (holdNextMs > 0) {
        const ms = holdNextMs;
        holdNextMs = 0;
        await new Promise((r) => setTimeout(r, ms));
      }
      if (failNext > 0) {
        failNext--;
        return void res.writeHead(500).end();
      }
      received.push({ path: req.url!, headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://localhost:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  received = [];
  failNext = 0;
  holdNextMs = 0;
});

const degraded = (message = 'status is error: Host unreachable'): ControllerEvent => ({
  reason: 'ResourceDegraded',
  severity: 'error',
  subject: 'Connector analytics/orders-db',
  message,
  revision: 'abc123def4567890',
});

describe('Notifier', () => {
  test('a generic webhook gets JSON signed with HMAC-SHA256 of the body; Slack gets its text message', async () => {
    const n = new Notifier({
      receivers: [
        { type: 'webhook', url: `${url}/hook`, secret: 's3cret' },
        { type: 'slack', url: `${url}/services/T0/B0/x` },
      ],
      source: 'platform',
      ca,
    });
    n.notify(degraded());
    await n.flush();
    const hook = received.find((r) => r.path === '/hook')!;
    expect(hook.headers['x-dpctl-signature-256']).toBe(`sha256=${createHmac('sha256', 's3cret').update(hook.body).digest('hex')}`);
    expect(JSON.parse(hook.body)).toMatchObject({
      reason: 'ResourceDegraded',
      severity: 'error',
      subject: 'Connector analytics/orders-db',
      source: 'platform',
      revision: 'abc123def4567890',
      at: expect.any(String),
      dropped_since_last: 0,
    });
    const slack = JSON.parse(received.find((r) => r.path.startsWith('/services'))!.body);
    expect(slack.text).toBe(
      ':red_circle: *ResourceDegraded* Connector analytics/orders-db (platform @ abc123def456)\nstatus is error: Host unreachable',
    );
    // A warning has its own icon.
    received.length = 0;
    n.notify({ reason: 'PlanWarning', severity: 'warning', subject: 'platform', message: 'Project hr is not pruned', revision: null });
    await n.flush();
    expect(JSON.parse(received.find((r) => r.path.startsWith('/services'))!.body).text).toBe(
      ':warning: *PlanWarning* platform (platform)\nProject hr is not pruned',
    );
  });

  test('a failed delivery is retried with back-off until it goes through', async () => {
    failNext = 2;
    const n = new Notifier({ receivers: [{ type: 'webhook', url }], source: 'platform', ca, retryBaseMs: 10 });
    n.notify(degraded());
    await n.flush();
    expect(received.length).toBe(1);
  });

  test('a condition that persists notifies once, again when its message changes or after repeatMs; a recovery only after a failure', async () => {
    let now = 0;
    const n = new Notifier({ receivers: [{ type: 'webhook', url }], source: 'platform', ca, repeatMs: 60_000, now: () => now });
    const recovered: ControllerEvent = {
      reason: 'ResourceRecovered',
      severity: 'info',
      subject: 'Connector analytics/orders-db',
      message: 'healthy again',
    };
    n.notify(recovered); // nothing was announced: no news
    n.notify(degraded());
    n.notify(degraded());
    now = 30_000;
    n.notify(degraded('status is error: password authentication failed'));
    now = 100_000;
    n.notify(degraded('status is error: password authentication failed'));
    n.notify(recovered);
    n.notify(recovered);
    await n.flush();
    expect(received.map((r) => `${JSON.parse(r.body).reason}: ${JSON.parse(r.body).message}`)).toEqual([
      'ResourceDegraded: status is error: Host unreachable',
      'ResourceDegraded: status is error: password authentication failed',
      'ResourceDegraded: status is error: password authentication failed',
      'ResourceRecovered: healthy again',
    ]);
  });

  test('a receiver gets its events in order, even when the first one needs a retry', async () => {
    failNext = 1;
    const n = new Notifier({ receivers: [{ type: 'webhook', url }], source: 'platform', ca, retryBaseMs: 50 });
    n.notify(degraded());
    n.notify({ reason: 'ResourceRecovered', severity: 'info', subject: 'Connector analytics/orders-db', message: 'healthy again' });
    await n.flush();
    expect(received.map((r) => JSON.parse(r.body).reason)).toEqual(['ResourceDegraded', 'ResourceRecovered']);
  });

  test(`a receiver that does not answer holds at most ${MAX_QUEUED_PER_RECEIVER} deliveries; the rest are counted as dropped`, async () => {
    holdNextMs = 300;
    const n = new Notifier({ receivers: [{ type: 'webhook', url }], source: 'platform', ca, perMinute: 1_000 });
    const extra = 20;
    for (let i = 0; i < MAX_QUEUED_PER_RECEIVER + extra; i++) n.notify({ ...degraded(), subject: `Connector p/c${i}` });
    n.notify({ ...degraded(), subject: 'Connector p/late' }); // the queue is still full: dropped too
    await n.flush(30_000);
    n.notify({ ...degraded(), subject: 'Connector p/after' });
    await n.flush();
    const subjects = received.map((r) => JSON.parse(r.body).subject);
    expect(subjects).toEqual([...Array.from({ length: MAX_QUEUED_PER_RECEIVER }, (_, i) => `Connector p/c${i}`), 'Connector p/after']);
    expect(JSON.parse(received.at(-1)!.body).dropped_since_last).toBe(extra + 1);
  });

  test('at most perMinute a minute per receiver; the next one says how many were dropped', async () => {
    let now = 0;
    const n = new Notifier({ receivers: [{ type: 'webhook', url }], source: 'platform', ca, perMinute: 2, now: () => now });
    for (let i = 0; i < 5; i++) n.notify({ ...degraded(), subject: `Connector p/c${i}` });
    now = 61_000;
    n.notify({ ...degraded(), subject: 'Connector p/late' });
    await n.flush();
    expect(received.map((r) => [JSON.parse(r.body).subject, JSON.parse(r.body).dropped_since_last])).toEqual([
      ['Connector p/c0', 0],
      ['Connector p/c1', 0],
      ['Connector p/late', 3],
    ]);
  });
});
