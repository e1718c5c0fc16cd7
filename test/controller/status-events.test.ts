import { createServer, get, type IncomingMessage, type Server } from 'node:http';
import pino from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { ControllerMetrics } from '../../src/controller/metrics.js';
import { createStatusServer, listen } from '../../src/controller/server.js';
import { MAX_EVENT_CLIENTS, StatusEvents, type StatusEventsOptions } from '../../src/controller/status-events.js';
import type { ControllerStatus } from '../../src/controller/status.js';
import { richStatus } from './status-fixture.js';
import { waitFor } from './helpers.js';

/** One open `GET /status/events`, read as text: its status, headers, events and comments. */
interface Stream {
  res: IncomingMessage;
  body: string;
  ended: boolean;
  events(): { event?: string; id?: string; data: any }[];
  close(): void;
}

function open(url: string): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = get(`${url}/status/events`, { headers: { accept: 'text/event-stream' } }, (res) => {
      const s: Stream = {
        res,
        body: '',
        ended: false,
        events: () =>
          s.body
            .split('\n\n')
            .filter((block) => block.includes('data: '))
            .map((block) => {
              const field = (name: string) =>
                block
                  .split('\n')
                  .find((l) => l.startsWith(`${name}: `))
                  ?.slice(name.length + 2);
              return { event: field('event'), id: field('id'), data: JSON.parse(field('data')!) };
            }),
        close: () => req.destroy(),
      };
      res.setEncoding('utf8');
      res.on('data', (c: string) => (s.body += c));
      res.on('end', () => (s.ended = true));
      res.on('close', () => (s.ended = true));
      res.on('error', () => undefined);
      resolve(s);
    });
    req.on('error', reject);
  });
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }
});

async function statusServer(status: () => ControllerStatus, events: StatusEventsOptions, extra: { suspend?: () => void } = {}) {
  const server = createStatusServer({
    status,
    ready: () => true,
    metrics: new ControllerMetrics({ processMetrics: false }),
    trigger: () => undefined,
    suspend: extra.suspend ?? (() => undefined),
    resume: () => undefined,
    webhookSecret: 's3cret',
    logger: pino({ level: 'silent' }),
    events,
  });
  servers.push(server);
  return listen(server, '127.0.0.1', 0);
}

describe('GET /status/events', () => {
  test('streams the status, refuses clients beyond the limit with 503, frees a place when a client goes, sends heartbeats and changes', async () => {
    let s = richStatus();
    const url = await statusServer(() => s, { maxClients: 2, heartbeatMs: 50, watchMs: 20 });
    const a = await open(url);
    const b = await open(url);
    for (const c of [a, b]) {
      expect(c.res.statusCode).toBe(200);
      expect(c.res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
      expect(c.res.headers['cache-control']).toBe('no-store');
    }
    // The current status at once: the page's fragment, re-rendered, and a few fields for other readers.
    await waitFor('the first event', () => b.events().length === 1);
    expect(b.body.startsWith('retry: 5000\n\n')).toBe(true);
    const [first] = b.events();
    expect(first.event).toBe('status');
    expect(first.data).toMatchObject({
      runs: 42,
      result: 'incomplete',
      suspended: false,
      leader: true,
      fp: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    expect(first.data.html).toContain('<div id="resources">');
    expect(first.data.html).not.toContain('<script');

    // A third is refused while two are open.
    const c = await open(url);
    expect(c.res.statusCode).toBe(503);
    expect(c.res.headers['retry-after']).toBe('30');
    await waitFor('the 503 body', () => c.ended);
    expect(JSON.parse(c.body)).toEqual({
      error: { code: 'too_many_clients', message: 'at most 2 status event streams at once; reload the page later' },
    });

    // Heartbeats keep the stream open (comment lines: EventSource ignores them).
    await waitFor('a heartbeat', () => /^: heartbeat \d{4}-/m.test(b.body));
    expect(b.events()).toHaveLength(1);

    // A client that goes away frees its place.
    a.close();
    const d = await waitFor(
      'a place freed by the closed client',
      async () => {
        const next = await open(url);
        if (next.res.statusCode === 200) return next;
        next.close();
        return undefined;
      },
      5_000,
    );

    // A change (a run finished) reaches every open stream within the watch interval; nothing is sent when nothing changed.
    s = { ...s, runs: 43, last_run: { ...s.last_run!, result: 'converged', errors: [] } };
    await waitFor(
      'the change on both streams',
      () => b.events().some((e) => e.data.runs === 43) && d.events().some((e) => e.data.runs === 43),
      5_000,
    );
    await new Promise((r) => setTimeout(r, 100));
    expect(b.events().filter((e) => e.data.runs === 43)).toHaveLength(1);
    const ids = b.events().map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    b.close();
    d.close();
  });

  test('suspend and resume are pushed at once, not at the next check', async () => {
    let suspended = false;
    const base = richStatus();
    const url = await statusServer(
      () => ({ ...base, controller: { ...base.controller, suspended } }),
      { watchMs: 60_000, heartbeatMs: 60_000 },
      { suspend: () => (suspended = true) },
    );
    const stream = await open(url);
    await waitFor('the first event', () => stream.events().length === 1);
    const res = await fetch(`${url}/suspend`, { method: 'POST', headers: { authorization: 'Bearer s3cret' } });
    expect(res.status).toBe(200);
    await waitFor('the suspension pushed', () => stream.events().some((e) => e.data.suspended === true), 2_000);
    expect(stream.events().at(-1)!.data.html).toContain('<span id="state">suspended</span>');
    stream.close();
  });

  test('closing the listener ends every stream and stops the timers; other routes and methods', async () => {
    const url = await statusServer(() => richStatus(), { heartbeatMs: 20, watchMs: 20 });
    const streams = [await open(url), await open(url)];
    // At least the first event: this status is made afresh on every look (richStatus() reads the clock),
    // so a second one follows whenever its times, rounded for the page, change.
    await waitFor('both streams', () => streams.every((s) => s.events().length >= 1));
    expect((await fetch(`${url}/status/events`, { method: 'POST' })).status).toBe(405);
    const page = await fetch(`${url}/status.html`);
    expect(page.headers.get('content-security-policy')).toMatch(
      /^default-src 'none'; script-src 'sha256-[A-Za-z0-9+/=]+'; style-src 'sha256-/,
    );
    expect((await (await fetch(`${url}/status.json`, { headers: { accept: 'text/html' } })).json()).runs).toBe(42);
    const server = servers.pop()!;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    await waitFor('the streams ended', () => streams.every((s) => s.ended), 2_000);
    // The keep-alive sockets of this test's own requests can hold the listener open for seconds after
    // the streams (it waits for them to go idle); they are not what is under test.
    server.closeAllConnections();
    await closed;
  });

  test('StatusEvents forgets a client when its connection closes, and idles without clients', async () => {
    expect(MAX_EVENT_CLIENTS).toBe(20);
    const events = new StatusEvents(() => richStatus(), { heartbeatMs: 10, watchMs: 10, maxClients: 3 });
    const server = createServer((req, res) => {
      if (!events.attach(req, res)) res.writeHead(503).end();
    });
    servers.push(server);
    const url = await listen(server, '127.0.0.1', 0);
    const streams = await Promise.all([open(url), open(url), open(url)]);
    expect(events.size).toBe(3);
    expect((await open(url)).res.statusCode).toBe(503);
    const timers = () => [(events as unknown as { heartbeat?: unknown }).heartbeat, (events as unknown as { watcher?: unknown }).watcher];
    expect(timers().every(Boolean)).toBe(true);
    streams[0].close();
    await waitFor('one client fewer', () => events.size === 2);
    streams[1].close();
    streams[2].close();
    await waitFor('no clients', () => events.size === 0);
    expect(timers()).toEqual([undefined, undefined]);
    // And it serves again.
    const again = await open(url);
    expect(again.res.statusCode).toBe(200);
    expect(events.size).toBe(1);
    again.close();
    await waitFor('no clients', () => events.size === 0);
  });
});
