import { createServer, type ServerResponse } from 'node:http';
import { createGzip } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { runtimeOf } from '../../src/service/runtime/runtime.js';
import { deliver, REPLY_BYTES_READ } from '../../src/service/runtime/notifications.js';

/**
 * Notifications go out to receivers the tenant chooses, and a slow one holds each delivery for
 * seconds. They now go 8 at a time per tenant (Runtime.deliveries): before, every alert and
 * channel had its own socket at once, so one tenant's slow receiver could hold the service's file
 * descriptors, and other tenants' deliveries with them.
 */
let svc: TestService;
let slow: { url: string; most: number; close(): Promise<void> };

/** A receiver that answers each POST after 200 ms, counting the requests it holds at once. */
async function slowReceiver() {
  let open = 0;
  const state = { most: 0 };
  const srv = createServer((req, res) => {
    open++;
    state.most = Math.max(state.most, open);
    req.resume();
    req.on('end', () =>
      setTimeout(() => {
        open--;
        res.writeHead(200).end('{}');
      }, 200),
    );
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(srv.address() as { port: number }).port}/hook`,
    get most() {
      return state.most;
    },
    close: () => new Promise<void>((r) => (srv.closeAllConnections(), srv.close(() => r()))),
  };
}

beforeAll(async () => {
  [svc, slow] = await Promise.all([startTestService(), slowReceiver()]);
});
afterAll(async () => {
  await svc?.close();
  await slow?.close();
});

async function channelOf(t: TestTenant, url: string) {
  const base = `/projects/${(await svc.project(t, 'alerts')).id}`;
  const { id } = await svc.ok<{ id: string }>(t, 'POST', `${base}/notification-channels`, {
    body: { name: 'hook', type: 'webhook', config: { url } },
  });
  const tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
  const projectId = base.split('/')[2];
  return (await svc.service.ctx.resources.get(tenantId, projectId, 'notification_channel', id))!;
}

describe("one tenant's deliveries to a slow receiver", () => {
  it('go 8 at a time, all delivered, while another tenant delivers at once', async () => {
    const rt = runtimeOf(svc.service.ctx);
    const [noisy, other] = [await svc.tenant(), await svc.tenant()];
    const [noisyChannel, otherChannel] = [await channelOf(noisy, slow.url), await channelOf(other, slow.url)];
    const event = (n: number) => ({ type: 'test', project_id: noisyChannel.projectId, timestamp: new Date().toISOString(), n });
    const started = performance.now();
    const flood = Promise.all(Array.from({ length: 40 }, (_, n) => deliver(rt, noisyChannel, event(n))));
    // 40 at 8 at a time: 5 rounds of 200 ms. The other tenant's one is not behind them.
    const own = await deliver(rt, otherChannel, event(0));
    const otherMs = performance.now() - started;
    const results = await flood;
    expect(own.success).toBe(true);
    expect(results.every((r) => r.success)).toBe(true);
    expect(slow.most).toBeLessThanOrEqual(8 + 1);
    expect(slow.most).toBeGreaterThan(1);
    expect(otherMs).toBeLessThan(performance.now() - started);
    expect(performance.now() - started).toBeGreaterThanOrEqual(5 * 200 - 50);
  }, 30_000);
});

/**
 * A receiver that answers 200 and then sends a body that never ends: plain, or gzip (zeros, a
 * thousandfold inflation). It counts the bytes it got out before the service hung up.
 */
async function endlessReceiver() {
  const sent = { plain: 0, gzip: 0, closed: 0 };
  const chunk = Buffer.alloc(64 * 1024);
  const pump = (out: NodeJS.WritableStream, res: ServerResponse, count: (n: number) => void) => {
    const write = () => {
      while (!res.destroyed && out.write(chunk)) count(chunk.length);
    };
    out.on('drain', write);
    res.on('close', () => sent.closed++);
    write();
  };
  const srv = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/gzip') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        const gz = createGzip();
        gz.on('data', (d: Buffer) => (sent.gzip += d.length));
        gz.pipe(res);
        pump(gz, res, () => undefined);
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        pump(res, res, (n) => (sent.plain += n));
      }
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const base = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  return { base, sent, close: () => new Promise<void>((r) => (srv.closeAllConnections(), srv.close(() => r()))) };
}

describe("a receiver's reply", () => {
  it('is read up to REPLY_BYTES_READ and dropped: an endless or inflating body neither fills memory nor holds the delivery', async () => {
    const receiver = await endlessReceiver();
    try {
      const rt = runtimeOf(svc.service.ctx);
      for (const path of ['/plain', '/gzip']) {
        const channel = await channelOf(await svc.tenant(), receiver.base + path);
        const started = performance.now();
        const result = await deliver(rt, channel, { type: 'test', project_id: channel.projectId, timestamp: new Date().toISOString() });
        // The status was 200: delivered. Before, the whole reply was read until the 5 s timeout.
        expect(result).toMatchObject({ success: true, status_code: 200 });
        expect(performance.now() - started).toBeLessThan(2_000);
      }
      await expect.poll(() => receiver.sent.closed, { timeout: 5_000 }).toBe(2);
      // What got out before the hang-up: the part read plus what the sockets' buffers held.
      expect(receiver.sent.plain).toBeLessThan(REPLY_BYTES_READ + 16 * 1024 * 1024);
      expect(receiver.sent.gzip).toBeLessThan(16 * 1024 * 1024);
    } finally {
      await receiver.close();
    }
  }, 30_000);
});
