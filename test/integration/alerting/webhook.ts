import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: any;
}

/**
 * A webhook receiver on 127.0.0.1: records every POST and answers `status` (200 unless
 * `failNext` requests are still to fail with 500). With `tls`, it serves HTTPS as `localhost`.
 */
export async function webhookServer(options: { tls?: { cert: string; key: string } } = {}) {
  const received: Received[] = [];
  const state = { failNext: 0 };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
      received.push({ path: req.url ?? '', headers: req.headers, raw, body });
      if (state.failNext > 0) {
        state.failNext--;
        res.writeHead(500).end('try again');
      } else res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  };
  const srv = options.tls ? createHttpsServer(options.tls, handler) : createServer(handler);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  return {
    received,
    state,
    url: (path = '/hook') => (options.tls ? `https://localhost:${port}${path}` : `http://127.0.0.1:${port}${path}`),
    on: (path: string) => received.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}

/** Checks X-Dataplatform-Signature: sha256=<hex HMAC-SHA256 of the raw body>. */
export function validSignature(r: Received, secret: string): boolean {
  const header = String(r.headers['x-dataplatform-signature'] ?? '');
  const expected = `sha256=${createHmac('sha256', secret).update(r.raw).digest('hex')}`;
  return header.length === expected.length && timingSafeEqual(Buffer.from(header), Buffer.from(expected));
}
