import net from 'node:net';
import type { Server } from 'node:https';
import { newRequestId } from './ids.js';

/** First byte of every TLS connection (a handshake record). */
const TLS_HANDSHAKE = 0x16;

/**
 * Listens on the port itself and hands TLS connections to the HTTPS server. Anything
 * else (plain HTTP) gets a clear answer in the spec's error envelope instead of a
 * TLS alert that an HTTP client shows as gibberish.
 */
export function createPlainHttpGuard(https: Server): net.Server {
  return net.createServer({ pauseOnConnect: false }, (socket) => {
    socket.once('error', () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
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
    });
  });
}
