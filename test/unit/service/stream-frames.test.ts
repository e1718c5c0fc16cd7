import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import WebSocket, { WebSocketServer, type ServerOptions } from 'ws';
import { encodeText, writeText } from '../../../src/service/streams/frames.js';

/** Ready-made frames written beside ws's own frames, through a real ws server and client. */
let server: WebSocketServer | undefined;
afterEach(async () => {
  for (const c of server?.clients ?? []) c.terminate();
  await new Promise((r) => server?.close(r));
  server = undefined;
});

async function pair(options: ServerOptions = {}, clientOptions: WebSocket.ClientOptions = {}) {
  server = new WebSocketServer({ port: 0, host: '127.0.0.1', ...options });
  await once(server, 'listening');
  const accepted = once(server, 'connection');
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, clientOptions);
  const received: unknown[] = [];
  const events: string[] = [];
  client.on('message', (data, isBinary) => {
    expect(isBinary).toBe(false);
    received.push(JSON.parse(String(data)));
    events.push('message');
  });
  client.on('ping', () => events.push('ping'));
  const [socket] = (await accepted) as [WebSocket];
  await once(client, 'open');
  return { socket, client, received, events };
}

test('frames of every length class arrive whole and in order, between pings, before the close frame', async () => {
  const { socket, client, received, events } = await pair();
  const messages = [{ n: 1 }, { n: 2, pad: 'x'.repeat(200) }, { n: 3, pad: 'y'.repeat(70_000) }, { n: 4, text: 'héllo ✓' }];
  const ways: string[] = [];
  ways.push(writeText(socket, encodeText(messages[0]!)));
  socket.ping();
  for (const m of messages.slice(1)) ways.push(writeText(socket, encodeText(m)));
  socket.close(1000, 'done');
  const [code, reason] = await once(client, 'close');
  expect(ways).toEqual(['frame', 'frame', 'frame', 'frame']);
  expect(received).toEqual(messages);
  expect(events).toEqual(['message', 'ping', 'message', 'message', 'message']);
  expect([code, String(reason)]).toEqual([1000, 'done']);
});

test('with permessage-deflate negotiated, ws sends the message itself', async () => {
  const { socket, client, received } = await pair({ perMessageDeflate: true });
  expect(socket.extensions).toContain('permessage-deflate');
  expect(writeText(socket, encodeText({ compressed: 'maybe' }))).toBe('send');
  socket.close(1000);
  await once(client, 'close');
  expect(received).toEqual([{ compressed: 'maybe' }]);
});

test('one encoded message serves many sockets', async () => {
  const a = await pair();
  const b = new WebSocket(`ws://127.0.0.1:${(server!.address() as AddressInfo).port}`);
  const got: unknown[] = [];
  b.on('message', (d) => got.push(JSON.parse(String(d))));
  await once(b, 'open');
  const text = encodeText({ shared: true });
  for (const s of server!.clients) writeText(s, text);
  await new Promise((r) => setTimeout(r, 50));
  expect(a.received).toEqual([{ shared: true }]);
  expect(got).toEqual([{ shared: true }]);
  b.close();
});
