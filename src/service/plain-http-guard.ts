import net from 'node:net';
import type { Server } from 'node:https';
import { newRequestId } from './ids.js';
import { AddressCounter, addressKey } from './connection-limits.js';

/** First byte of every TLS connection (a handshake record). */
const TLS_HANDSHAKE = 0x16;

export interface GuardLimits {
  /** Milliseconds a new connection may stay silent (no ClientHello, no plain-HTTP bytes). */
  handshakeTimeoutMs: number;
  /** Open connections per source address (IPv4, or IPv6 /64); 0 for no cap. */
  maxPerAddress: number;
}

/**
 * Listens on the port itself and hands TLS connections to the HTTPS server. Anything
 * else (plain HTTP) gets a clear answer in the spec's error envelope instead of a
 * TLS alert that an HTTP client shows as gibberish.
 *
 * Every connection of the service passes here, so this is where connections per source address
 * are counted (until the socket closes, whatever the HTTPS server or a WebSocket did with it in
 * between) and where a socket that never says anything is closed.
 */
export function createPlainHttpGuard(https: Server, limits: GuardLimits): net.Server & { perAddress: AddressCounter } {
  const perAddress = new AddressCounter(limits.maxPerAddress);
  // noDelay: the HTTPS server turns Nagle's algorithm off on the sockets it accepts, but sockets
  // handed to it (emit('connection')) skip that. With Nagle on, a response written in two parts
  // (headers, then the body; or the TLS session tickets, then the first answer) waited for the
  // client's delayed ACK: a fresh `dpctl plan` sat 40 ms on its first list.
  const guard = net.createServer({ pauseOnConnect: false, noDelay: true }, (socket) => {
    socket.once('error', () => socket.destroy());
    const key = addressKey(socket.remoteAddress);
    if (!perAddress.tryAcquire(key)) {
      // Over the cap: closed at once, before it costs a TLS handshake.
      socket.destroy();
      return;
    }
    // The raw socket closes when the TLS socket wrapping it does, so this covers both stages.
    socket.once('close', () => perAddress.release(key));
    socket.setTimeout(limits.handshakeTimeoutMs, () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      // The HTTPS server's handshake and header timeouts take over from here.
      socket.setTimeout(0);
      if (first[0] === TLS_HANDSHAKE) {
        https.emit('connection', socket);
        return;
      }
      const body = JSON.stringify({
        error: { code: 'validation_error', message: 'This service only accepts HTTPS. Use https:// instead of http://.' },
      });
      socket.end(
        'HTTP/1.1 400 Bad Request\r\n' +
          'Content-Type: application/json\r\n' +
          `X-Request-Id: ${newRequestId()}\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n` +
          'Connection: close\r\n\r\n' +
          body,
      );
      // A client that never reads the answer must not hold the socket open.
      socket.setTimeout(limits.handshakeTimeoutMs, () => socket.destroy());
    });
  });
  return Object.assign(guard, { perAddress });
}
