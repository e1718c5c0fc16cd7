import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import WebSocket from 'ws';
import { WsClient, wsUrl } from '../integration/streams/ws-client.js';
import { localhostLookup } from '../support/http.js';
import { BYSTANDER_MAX_MS, whileServingOther, type Probe } from './support.js';

/**
 * Issue 17, attacks 3 and 5: connections that never send a request, too many connections from
 * one address, and TLS handshakes naming made-up hosts (each used to cost a generated key and
 * certificate, kept forever). No credential is needed for any of them.
 *
 * `fast` runs with short timeouts so that a test can wait them out; `capped` keeps the defaults
 * and a small per-address cap. Attackers connect from 127.0.0.3; the bystander from 127.0.0.1.
 */
const ATTACKER = '127.0.0.3';
/**
 * The address that fills the per-address cap. Its own, so that the next test does not race the
 * server's closing of the held sockets (a close is counted a turn of the event loop after it arrives).
 */
const CROWD = '127.0.0.5';
const FAST = { handshakeTimeout: 0.5, headersTimeout: 0.8, requestTimeout: 2, keepAliveTimeout: 1 };
const CAP = 16;
/** Slack for a loaded 2-core machine on top of a timeout (Node checks header timeouts every 200 ms here). */
const SLACK_MS = 1_500;

let fast: TestService;
let capped: TestService;
let fastBystander: TestTenant;
let cappedBystander: TestTenant;

beforeAll(async () => {
  [fast, capped] = await Promise.all([startTestService(FAST), startTestService({ maxConnectionsPerAddress: CAP })]);
  [fastBystander, cappedBystander] = await Promise.all([fast.tenant(), capped.tenant()]);
});
afterAll(async () => {
  await fast?.close();
  await capped?.close();
});

function expectServed(probe: Probe) {
  expect(probe.failures).toEqual([]);
  expect(probe.count).toBeGreaterThan(0);
  expect(probe.max).toBeLessThan(BYSTANDER_MAX_MS);
}

/** Milliseconds until the socket closes, or `undefined` if it is still open after `waitMs`. */
function closesWithin(socket: net.Socket, waitMs: number): Promise<number | undefined> {
  const started = performance.now();
  return new Promise((resolve) => {
    if (socket.closed) return resolve(0);
    const timer = setTimeout(() => resolve(undefined), waitMs);
    socket.on('error', () => undefined);
    const closed = () => {
      clearTimeout(timer);
      resolve(performance.now() - started);
    };
    // The server's FIN is only seen by a socket that reads: keep it flowing.
    socket.on('data', () => undefined);
    socket.once('end', closed);
    socket.once('close', closed);
  });
}

const connectTcp = (port: number, from = ATTACKER) =>
  new Promise<net.Socket>((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress: from }, () => resolve(s));
    // Reset before 'connect' is reported: closed, which is what the tests look for.
    s.once('error', () => resolve(s));
  });

const connectTls = (port: number, servername: string, ca?: Buffer, from = ATTACKER) =>
  new Promise<tls.TLSSocket>((resolve, reject) => {
    // tls.connect passes localAddress on to net.connect; its type does not list it.
    const options = { port, host: '127.0.0.1', localAddress: from, servername, ca, rejectUnauthorized: !!ca } as tls.ConnectionOptions;
    const s = tls.connect(options, () => resolve(s));
    s.once('error', reject);
  });

/** One request over a fresh TLS connection naming `servername`: the status, body and the certificate's subject. */
async function rawGet(port: number, servername: string, path: string): Promise<{ status: number; body: any; subject: string }> {
  const s = await connectTls(port, servername);
  const subject = s.getPeerCertificate().subject.CN as string;
  s.write(`GET ${path} HTTP/1.1\r\nHost: ${servername}:${port}\r\nConnection: close\r\n\r\n`);
  const chunks: Buffer[] = [];
  for await (const chunk of s) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString();
  const [head, body] = text.split('\r\n\r\n', 2);
  return { status: Number(head.split(' ')[1]), body: JSON.parse(body), subject };
}

/** A WebSocket stream from the attacker's address (or `from`). */
const openWebSocket = (svc: TestService, url: string, from = ATTACKER) =>
  new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(url, {
      ca: readFileSync(svc.service.tls.certPath),
      lookup: localhostLookup,
      localAddress: from,
    } as WebSocket.ClientOptions);
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });

describe('connections that send no request are closed', () => {
  it('a TCP connection that sends nothing (not even a ClientHello) is closed after the handshake timeout', async () => {
    const { result, probe } = await whileServingOther(fast, fastBystander, async () => {
      const sockets = await Promise.all(Array.from({ length: 20 }, () => connectTcp(fast.port)));
      return Promise.all(sockets.map((s) => closesWithin(s, FAST.handshakeTimeout * 1000 + SLACK_MS)));
    });
    for (const ms of result) expect(ms).toBeGreaterThan(FAST.handshakeTimeout * 1000 * 0.8);
    for (const ms of result) expect(ms).toBeLessThan(FAST.handshakeTimeout * 1000 + SLACK_MS);
    expectServed(probe);
  });

  it('a TLS handshake that stops after its first byte is closed after the handshake timeout', async () => {
    const s = await connectTcp(fast.port);
    s.write(Buffer.from([0x16, 0x03, 0x01]));
    expect(await closesWithin(s, FAST.handshakeTimeout * 1000 + SLACK_MS)).toBeDefined();
  });

  it('a TLS connection that completes the handshake and then sends nothing is closed after the headers timeout', async () => {
    const { result, probe } = await whileServingOther(fast, fastBystander, async () => {
      const sockets = await Promise.all(Array.from({ length: 20 }, () => connectTls(fast.port, `${fastBystander.slug}.localhost`)));
      return Promise.all(sockets.map((s) => closesWithin(s, FAST.headersTimeout * 1000 + SLACK_MS)));
    });
    expect(
      result.filter((ms) => ms === undefined),
      JSON.stringify(result),
    ).toEqual([]);
    expectServed(probe);
  });

  it('a first request whose headers never end is closed after the headers timeout', async () => {
    const s = await connectTls(fast.port, `${fastBystander.slug}.localhost`);
    s.write(`GET /api/v1/projects HTTP/1.1\r\nHost: ${fastBystander.slug}.localhost\r\n`);
    expect(await closesWithin(s, FAST.headersTimeout * 1000 + SLACK_MS)).toBeDefined();
  });

  it('a later request on a kept-alive connection whose headers never end gets the 408 envelope', async () => {
    const s = await connectTls(fast.port, `${fastBystander.slug}.localhost`);
    const host = `Host: ${fastBystander.slug}.localhost\r\nAuthorization: Bearer ${fastBystander.adminToken}`;
    let text = '';
    s.on('data', (d: Buffer) => (text += d));
    s.write(`GET /api/v1/projects?limit=1 HTTP/1.1\r\n${host}\r\n\r\n`);
    const complete = () => {
      const [head, body = ''] = text.split('\r\n\r\n', 2);
      const length = /content-length: (\d+)/i.exec(head)?.[1];
      return length !== undefined && Buffer.byteLength(body) >= Number(length);
    };
    while (!complete()) await new Promise((r) => s.once('data', r));
    text = '';
    s.write(`GET /api/v1/projects HTTP/1.1\r\n${host}\r\n`);
    expect(await closesWithin(s, FAST.headersTimeout * 1000 + SLACK_MS)).toBeDefined();
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(text.split('\r\n\r\n')[1]).error.code).toBe('validation_error');
  });

  it("an idle keep-alive connection is closed after the keep-alive timeout (plus Node's 1 s grace)", async () => {
    const s = await connectTls(fast.port, `${fastBystander.slug}.localhost`);
    s.write(
      `GET /api/v1/projects?limit=1 HTTP/1.1\r\nHost: ${fastBystander.slug}.localhost\r\nAuthorization: Bearer ${fastBystander.adminToken}\r\n\r\n`,
    );
    await new Promise((resolve) => s.once('data', resolve));
    expect(await closesWithin(s, FAST.keepAliveTimeout * 1000 + 1000 + SLACK_MS)).toBeDefined();
  });

  it('a WebSocket stream outlives every one of those timeouts', async () => {
    const ws = await WsClient.connect(fast, wsUrl(fast, fastBystander.slug, '/ws/alerts', fastBystander.adminToken));
    const wait = (FAST.keepAliveTimeout + 1 + FAST.headersTimeout) * 1000 + SLACK_MS;
    const outcome = await Promise.race([ws.closed.then(() => 'closed'), new Promise((r) => setTimeout(() => r('open'), wait))]);
    expect(outcome).toBe('open');
    ws.ws.close();
    await ws.closed;
  });
});

describe('connections per source address', () => {
  it(`past ${CAP} open connections from one address the extras are closed at once; other addresses are served`, async () => {
    const held: tls.TLSSocket[] = [];
    const { result, probe } = await whileServingOther(capped, cappedBystander, async () => {
      // TLS connections past the handshake and a WebSocket stream all count.
      const ws = await openWebSocket(capped, wsUrl(capped, cappedBystander.slug, '/ws/alerts', cappedBystander.adminToken), CROWD);
      for (let i = 0; i < CAP - 1; i++) held.push(await connectTls(capped.port, `${cappedBystander.slug}.localhost`, undefined, CROWD));
      const extras = await Promise.all(Array.from({ length: 8 }, () => connectTcp(capped.port, CROWD)));
      const extraClosed = await Promise.all(extras.map((s) => closesWithin(s, 1_000)));
      const heldOpen = held.filter((s) => !s.destroyed && s.readyState === 'open').length;
      // One closes: its place is free again.
      held.pop()!.destroy();
      await new Promise((r) => setTimeout(r, 100));
      const again = await connectTls(capped.port, `${cappedBystander.slug}.localhost`, undefined, CROWD);
      const againClosed = await closesWithin(again, 300);
      again.destroy();
      const wsOpen = ws.readyState === WebSocket.OPEN;
      ws.terminate();
      return { extraClosed, heldOpen, againClosed, wsOpen };
    });
    for (const ms of result.extraClosed) expect(ms).toBeLessThan(1_000);
    expect(result.heldOpen).toBe(CAP - 1);
    expect(result.againClosed).toBeUndefined();
    expect(result.wsOpen).toBe(true);
    expectServed(probe);
    for (const s of held) s.destroy();
  });
});

describe('TLS certificates per host name', () => {
  it('200 handshakes naming made-up hosts generate no key or certificate and get the 404 envelope', async () => {
    const stats = capped.service.tls.certStats!;
    const before = stats();
    const names = Array.from({ length: 200 }, (_, i) => (i % 4 === 3 ? `deep.n${i}.localhost` : `made-up-${i}.localhost`));
    const { result, probe } = await whileServingOther(capped, cappedBystander, async () => {
      const answers = [];
      for (let i = 0; i < names.length; i += 10)
        answers.push(...(await Promise.all(names.slice(i, i + 10).map((n) => rawGet(capped.port, n, '/api/v1/projects')))));
      return answers;
    });
    for (const answer of result) {
      expect(answer.status).toBe(404);
      expect(answer.body.error.code).toBe('resource_not_found');
      expect(answer.subject).toBe('localhost');
    }
    expect(stats()).toEqual(before);
    expectServed(probe);
  });

  it('a tenant created after startup gets a valid certificate for its host', async () => {
    const before = capped.service.tls.certStats!().issued;
    const late = await capped.tenant(`late-${Date.now().toString(36)}`);
    const s = await connectTls(capped.port, `${late.slug}.localhost`, readFileSync(capped.service.tls.certPath));
    expect(s.authorized).toBe(true);
    expect(s.getPeerCertificate().subject.CN).toBe(`${late.slug}.localhost`);
    s.destroy();
    expect(capped.service.tls.certStats!().issued).toBe(before + 1);
  });
});
