import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, test } from 'vitest';
import WebSocket, { WebSocketServer, type ServerOptions } from 'ws';
import { encodeText, writeTexts } from '../../../src/service/streams/frames.js';

/**
 * The streams write a batch of messages to a socket as one write of their frames back to back
 * (src/service/streams/frames.ts writeTexts): through a real ws server and client, they arrive
 * whole, in order, as separate text messages, and the concatenation is made once per sequence.
 */
let server: WebSocketServer | undefined;
afterEach(async () => {
  for (const c of server?.clients ?? []) c.terminate();
  await new Promise((r) => server?.close(r));
  server = undefined;
});

async function pair(options: ServerOptions = {}) {
  server ??= new WebSocketServer({ port: 0, host: '127.0.0.1', ...options });
  if (!server.address()) await once(server, 'listening');
  const accepted = once(server, 'connection');
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const received: unknown[] = [];
  client.on('message', (data, isBinary) => {
    expect(isBinary).toBe(false);
    received.push(JSON.parse(String(data)));
  });
  const [socket] = (await accepted) as [WebSocket];
  await once(client, 'open');
  return { socket, client, received };
}

/** Counts the writes that reach the socket under a ws WebSocket. */
function countWrites(socket: WebSocket) {
  const raw = (socket as unknown as { _socket: { write: (...args: unknown[]) => boolean } })._socket;
  const write = raw.write.bind(raw);
  let n = 0;
  raw.write = (...args: unknown[]) => {
    n++;
    return write(...args);
  };
  return () => n;
}

test('a batch goes out as one write per socket and arrives as separate messages, in order', async () => {
  const a = await pair();
  const b = await pair();
  const messages = [{ n: 1 }, { n: 2, pad: 'x'.repeat(200) }, { n: 3, pad: 'y'.repeat(70_000) }, { n: 4, text: 'héllo ✓' }];
  const texts = messages.map((m) => encodeText(m));
  const writesA = countWrites(a.socket);
  const writesB = countWrites(b.socket);
  const joined = new Map<string, Buffer>();
  expect(writeTexts(a.socket, texts, joined)).toBe('frame');
  expect(writeTexts(b.socket, texts, joined)).toBe('frame');
  expect(joined.size).toBe(1); // concatenated once for both sockets
  expect([writesA(), writesB()]).toEqual([1, 1]);
  for (const { socket, client } of [a, b]) {
    socket.close(1000, 'done');
    await once(client, 'close');
  }
  expect(a.received).toEqual(messages);
  expect(b.received).toEqual(messages);
});

test('with permessage-deflate negotiated, ws sends each message of the batch itself', async () => {
  const { socket, client, received } = await pair({ perMessageDeflate: true });
  expect(socket.extensions).toContain('permessage-deflate');
  expect(writeTexts(socket, [encodeText({ n: 1 }), encodeText({ n: 2 })])).toBe('send');
  socket.close(1000);
  await once(client, 'close');
  expect(received).toEqual([{ n: 1 }, { n: 2 }]);
});
