import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { ControllerMetrics } from './metrics.js';
import { renderStatusHtml, type ControllerStatus } from './status.js';
import { verifyBearer, verifySignature } from './source/webhook.js';

/** What the status listener needs from the controller. */
export interface StatusHandlers {
  status(): ControllerStatus;
  ready(): boolean;
  metrics: ControllerMetrics;
  /** Called for a webhook with a valid signature: fetch now. */
  trigger(reason: string): void;
  suspend(): void;
  resume(): void;
  webhookSecret?: string;
  logger: Logger;
}

/** GitHub caps webhook payloads at 25 MB; anything larger is refused before it is read whole. */
const MAX_BODY = 25 * 1024 * 1024;

/** The spec's error envelope. */
function sendError(res: ServerResponse, status: number, code: string, message: string) {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify({ error: { code, message } }));
}

function send(res: ServerResponse, status: number, type: string, body: string) {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
  res.end(body);
}

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        resolve(undefined);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Prefers HTML only when the client asks for it before JSON (a browser does; curl and fetch do not). */
const wantsHtml = (accept: string | undefined) => {
  const a = accept ?? '';
  const html = a.indexOf('text/html');
  const json = a.indexOf('application/json');
  return html !== -1 && (json === -1 || html < json);
};

/**
 * The controller's HTTP listener: probes, metrics, status (JSON and HTML), the git webhook,
 * and suspend/resume. Plain HTTP: meant for loopback or a cluster-internal port.
 */
export function createStatusServer(h: StatusHandlers): Server {
  const controlAllowed = (req: IncomingMessage, body: Buffer): boolean =>
    !!h.webhookSecret && (verifyBearer(h.webhookSecret, req.headers.authorization) || verifySignature(h.webhookSecret, body, header(req, 'x-hub-signature-256')));

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'http://controller').pathname;
    const method = req.method ?? 'GET';
    const route = `${method} ${path}`;
    switch (route) {
      case 'GET /healthz':
        return send(res, 200, 'application/json; charset=utf-8', '{"status":"ok"}');
      case 'GET /readyz':
        return h.ready() ? send(res, 200, 'application/json; charset=utf-8', '{"status":"ready"}') : sendError(res, 503, 'not_ready', 'no successful fetch and plan yet');
      case 'GET /metrics':
        return send(res, 200, h.metrics.registry.contentType, await h.metrics.registry.metrics());
      case 'GET /status':
        if (wantsHtml(req.headers.accept)) return send(res, 200, 'text/html; charset=utf-8', renderStatusHtml(h.status()));
        return send(res, 200, 'application/json; charset=utf-8', JSON.stringify(h.status(), null, 2));
      case 'GET /status.html':
        return send(res, 200, 'text/html; charset=utf-8', renderStatusHtml(h.status()));
      case 'POST /hooks/git': {
        const body = await readBody(req);
        if (!body) return sendError(res, 413, 'payload_too_large', `the body is larger than ${MAX_BODY} bytes`);
        if (!h.webhookSecret) {
          h.metrics.webhooks.inc({ outcome: 'disabled' });
          return sendError(res, 404, 'not_found', 'the webhook is off: start the controller with --webhook-secret');
        }
        if (!verifySignature(h.webhookSecret, body, header(req, 'x-hub-signature-256'))) {
          h.metrics.webhooks.inc({ outcome: 'unauthorized' });
          h.logger.warn({ remote: req.socket.remoteAddress }, 'webhook refused: missing or bad X-Hub-Signature-256');
          return sendError(res, 401, 'unauthorized', 'missing or invalid X-Hub-Signature-256 (sha256=<HMAC-SHA256 of the body with the webhook secret>)');
        }
        h.metrics.webhooks.inc({ outcome: 'accepted' });
        h.trigger(`webhook${header(req, 'x-github-event') ? ` (${header(req, 'x-github-event')})` : ''}`);
        return send(res, 202, 'application/json; charset=utf-8', '{"status":"fetch scheduled"}');
      }
      case 'POST /suspend':
      case 'POST /resume': {
        const body = (await readBody(req)) ?? Buffer.alloc(0);
        if (!h.webhookSecret) return sendError(res, 403, 'forbidden', 'suspend and resume need --webhook-secret (sent as a bearer token or an X-Hub-Signature-256)');
        if (!controlAllowed(req, body)) return sendError(res, 401, 'unauthorized', 'send the webhook secret as Authorization: Bearer <secret>, or sign the body with X-Hub-Signature-256');
        if (path === '/suspend') h.suspend();
        else h.resume();
        return send(res, 200, 'application/json; charset=utf-8', JSON.stringify({ suspended: path === '/suspend' }));
      }
      default:
        if (['/healthz', '/readyz', '/metrics', '/status', '/status.html', '/hooks/git', '/suspend', '/resume'].includes(path)) return sendError(res, 405, 'method_not_allowed', `${method} is not allowed on ${path}`);
        return sendError(res, 404, 'not_found', `no route ${path}`);
    }
  };

  return createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      h.logger.error({ err: err.message, path: req.url }, 'status listener error');
      if (!res.headersSent) sendError(res, 500, 'internal_error', 'internal error');
      else res.destroy();
    });
  });
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** Listens on `host:port` (port 0: any free port) and returns the base URL. */
export async function listen(server: Server, host: string, port: number): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const a = server.address() as AddressInfo;
  return `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
}

/** Parses `--listen host:port` (`:9090` means all interfaces; `[::1]:9090` for IPv6). */
export function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new Error(`--listen must be host:port, e.g. 127.0.0.1:9090; got ${JSON.stringify(text)}`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}
