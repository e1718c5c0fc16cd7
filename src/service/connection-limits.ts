import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import ipaddr from 'ipaddr.js';
import { newRequestId } from './ids.js';

/** How long a connection may take at each stage, and how many one source address may hold. All in milliseconds. */
export interface ConnectionLimits {
  /** From accept to the first byte (a TLS ClientHello or a plain-HTTP request), and from there to the end of the TLS handshake. */
  handshakeTimeoutMs: number;
  /** From the handshake to the first request's headers, and from the start of any request to the end of its headers. */
  headersTimeoutMs: number;
  /** From the start of a request to the end of its body. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (Node adds a 1 s grace for clients racing the close). */
  keepAliveTimeoutMs: number;
  /** Open connections per source address (an IPv4 address, or an IPv6 /64), whatever their stage; 0 for no cap. */
  maxPerAddress: number;
}

/** The limits, from the service options' seconds. */
export function connectionLimits(o: {
  handshakeTimeout: number;
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  maxConnectionsPerAddress: number;
}): ConnectionLimits {
  const ms = (s: number) => Math.max(1, Math.round(s * 1000));
  const headersTimeoutMs = ms(o.headersTimeout);
  // Node refuses a headers timeout above the request timeout: the headers are part of the request.
  return {
    handshakeTimeoutMs: ms(o.handshakeTimeout),
    headersTimeoutMs,
    requestTimeoutMs: Math.max(headersTimeoutMs, ms(o.requestTimeout)),
    keepAliveTimeoutMs: ms(o.keepAliveTimeout),
    maxPerAddress: o.maxConnectionsPerAddress,
  };
}

/** Options for `https.createServer` (through Fastify's `https`) that Node enforces itself. */
export function httpsTimeoutOptions(l: ConnectionLimits) {
  return {
    handshakeTimeout: l.handshakeTimeoutMs,
    headersTimeout: l.headersTimeoutMs,
    requestTimeout: l.requestTimeoutMs,
    // Node checks the two timeouts above on this interval (30 s by default, which would stretch a 20 s limit to 50 s).
    connectionsCheckingInterval: Math.min(1000, Math.max(25, Math.floor(l.headersTimeoutMs / 4))),
  };
}

/**
 * Makes Node's own request timeouts apply to the HTTPS server and adds the one it lacks: a
 * connection that completes the handshake and then sends nothing. Call once the server exists.
 *
 * Node starts tracking an HTTP server's connections (headersTimeout, requestTimeout,
 * closeIdleConnections) on its 'listening' event; ours never listens (the plain-HTTP guard
 * owns the port and hands sockets over), so that tracking is started here. Node's timeouts only
 * run once a request has begun, hence the inactivity timeout until the first request's headers.
 * WebSocket upgrades clear it too (ws calls setTimeout(0) on the sockets it takes over), so
 * long-lived streams are never cut by it.
 */
export function enforceHttpTimeouts(https: HttpsServer, l: ConnectionLimits): void {
  https.emit('listening');
  const awaitingFirstRequest = new WeakSet<Socket>();
  // Node's HTTP connection listener (registered first) handles 'timeout' on these sockets:
  // with no request in progress it destroys the socket.
  https.on('secureConnection', (socket: Socket) => {
    awaitingFirstRequest.add(socket);
    socket.setTimeout(l.headersTimeoutMs);
  });
  https.on('request', (req: { socket: Socket }) => {
    // From here on Node's keep-alive timeout governs the idle time between requests, and a slow
    // handler is not cut short by the wait for the first request.
    if (awaitingFirstRequest.delete(req.socket)) req.socket.setTimeout(0);
  });
}

/**
 * Fastify's `clientErrorHandler`: what Node's HTTP parser refuses before any route runs (a timeout,
 * oversized or malformed headers) is answered in the spec's error envelope, then the connection closes.
 */
export function clientErrorHandler(l: ConnectionLimits) {
  const seconds = (ms: number) => `${ms / 1000} s`;
  return (err: NodeJS.ErrnoException, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const [status, message] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [
            408,
            `The request did not arrive in time: headers must arrive within ${seconds(l.headersTimeoutMs)}, the whole request within ${seconds(l.requestTimeoutMs)}`,
          ]
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? [431, 'Request headers are larger than the limit of this service']
          : [400, 'Malformed HTTP request'];
    const body = JSON.stringify({ error: { code: 'validation_error', message } });
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nX-Request-Id: ${newRequestId()}\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };
}

/**
 * The key under which a source address is counted: IPv4 addresses (also IPv4-mapped IPv6) as
 * they are; IPv6 by their /64, since one client is routinely given a whole /64 to pick from.
 */
export function addressKey(address: string | undefined): string {
  if (!address || !ipaddr.isValid(address)) return address ?? '(unknown)';
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const bytes = parsed.toByteArray().slice(0, 8);
  return `${ipaddr.fromByteArray([...bytes, 0, 0, 0, 0, 0, 0, 0, 0]).toString()}/64`;
}

/** Counts open connections per key and refuses one over the cap. */
export class AddressCounter {
  private readonly open = new Map<string, number>();
  constructor(private readonly max: number) {}

  /** True when the connection may stay (and is now counted); false when the key is at its cap. */
  tryAcquire(key: string): boolean {
    const n = this.open.get(key) ?? 0;
    if (this.max > 0 && n >= this.max) return false;
    this.open.set(key, n + 1);
    return true;
  }

  release(key: string): void {
    const n = this.open.get(key) ?? 0;
    // Entries go when they reach zero, so the map holds only addresses with open connections.
    if (n <= 1) this.open.delete(key);
    else this.open.set(key, n - 1);
  }

  count(key: string): number {
    return this.open.get(key) ?? 0;
  }

  /** Addresses with at least one open connection. */
  get addresses(): number {
    return this.open.size;
  }
}
