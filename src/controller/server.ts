import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { ControllerMetrics } from './metrics.js';
import { renderStatusHtml, type ControllerStatus } from './status.js';
import { STATUS_PAGE_CSP } from './status-page.js';
import { StatusEvents, type StatusEventsOptions } from './status-events.js';
import { signBody, verifyBearer, verifySignature } from './source/webhook.js';
import { FORWARDED_HEADER, relayFailure, relayToLeader } from './forward.js';

/** How a standby reaches the leader (see forward.ts). */
export interface LeaderRelay {
  /** True on the leader: it handles webhooks and suspend/resume itself. */
  isLeader(): boolean;
  /** The URL the current leader advertised; undefined when none is known. */
  leaderUrl(): Promise<string | undefined>;
  timeoutMs?: number;
}

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
  /** Absent: everything is handled here (a single replica). */
  relay?: LeaderRelay;
  logger: Logger;
  /** Limits of `GET /status/events` (see status-events.ts). */
  events?: StatusEventsOptions;
  /** Registers a listener for status changes (a run ended, leadership): the event stream pushes at once. */
  subscribe?: (listener: () => void) => void;
}

/** GitHub caps webhook payloads at 25 MB; anything larger is refused before it is read whole. */
const MAX_BODY = 25 * 1024 * 1024;

/** The spec's error envelope. */
function sendError(res: ServerResponse, status: number, code: string, message: string) {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify({ error: { code, message } }));
}

function send(res: ServerResponse, status: number, type: string, body: string, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', ...headers });
  res.end(body);
}

/** The status page, with a policy that lets only its own inline style and script run. */
const sendPage = (res: ServerResponse, s: ControllerStatus) =>
  send(res, 200, 'text/html; charset=utf-8', renderStatusHtml(s), {
    'content-security-policy': STATUS_PAGE_CSP,
    'referrer-policy': 'no-referrer',
  });

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
  const events = new StatusEvents(h.status, h.events);
  h.subscribe?.(() => events.publish());
  const controlAllowed = (req: IncomingMessage, body: Buffer): boolean =>
    !!h.webhookSecret &&
    (verifyBearer(h.webhookSecret, req.headers.authorization) ||
      verifySignature(h.webhookSecret, body, header(req, 'x-hub-signature-256')));

  /** On a standby, passes an authenticated request to the leader and answers with the leader's answer; undefined on the leader. */
  const relayed = async (
    req: IncomingMessage,
    path: string,
    body: Buffer,
  ): Promise<{ status: number; type: string; body: string; outcome: string } | undefined> => {
    const secret = h.webhookSecret;
    // Both callers checked the secret already; without one nothing is relayed.
    if (!h.relay || !secret || h.relay.isLeader()) return undefined;
    const notReachable = (why: string) => ({
      status: 503,
      type: 'application/json; charset=utf-8',
      body: JSON.stringify({
        error: {
          code: 'no_leader',
          message: `no leader is reachable: this replica is a standby and ${why}; the leader's next interval run still fetches the change`,
        },
      }),
      outcome: 'no_leader',
    });
    if (header(req, FORWARDED_HEADER)) {
      h.logger.warn({ path }, 'a forwarded request reached a standby: not forwarding it again');
      return notReachable('the request was already forwarded once (it is never forwarded twice)');
    }
    let target: string | undefined;
    try {
      target = await h.relay.leaderUrl();
    } catch (err) {
      h.logger.warn({ path, err: (err as Error).message }, 'cannot tell who leads: not forwarding');
      return notReachable('the leader election cannot be read');
    }
    if (!target) {
      h.logger.warn({ path }, 'no leader known: not forwarding');
      return notReachable('no leader is known (none elected, or it advertised no URL)');
    }
    try {
      // Signed here rather than passing a bearer token on: the secret itself never leaves this replica.
      const headers = { ...req.headers, 'x-hub-signature-256': signBody(secret, body) };
      const answer = await relayToLeader(target, path, body, headers, h.relay.timeoutMs);
      h.logger.info({ path, leader: target, status: answer.status }, 'forwarded to the leader');
      return { status: answer.status, type: answer.contentType, body: answer.body, outcome: 'forwarded' };
    } catch (err) {
      const why = relayFailure(err);
      h.logger.warn({ path, leader: target, err: why }, 'forwarding to the leader failed');
      return notReachable(`forwarding to the leader failed (${why})`);
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'http://controller').pathname;
    const method = req.method ?? 'GET';
    const route = `${method} ${path}`;
    switch (route) {
      case 'GET /healthz':
        return send(res, 200, 'application/json; charset=utf-8', '{"status":"ok"}');
      case 'GET /readyz':
        return h.ready()
          ? send(res, 200, 'application/json; charset=utf-8', '{"status":"ready"}')
          : sendError(res, 503, 'not_ready', 'no successful fetch and plan yet');
      case 'GET /metrics':
        return send(res, 200, h.metrics.registry.contentType, await h.metrics.registry.metrics());
      case 'GET /status':
        if (wantsHtml(req.headers.accept)) return sendPage(res, h.status());
        return send(res, 200, 'application/json; charset=utf-8', JSON.stringify(h.status(), null, 2));
      case 'GET /status.json':
        return send(res, 200, 'application/json; charset=utf-8', JSON.stringify(h.status(), null, 2));
      case 'GET /status.html':
        return sendPage(res, h.status());
      case 'GET /status/events':
        if (events.attach(req, res)) return;
        h.logger.warn({ clients: events.size, remote: req.socket.remoteAddress }, 'status event stream refused: too many clients');
        res.setHeader('retry-after', '30');
        return sendError(res, 503, 'too_many_clients', `at most ${events.maxClients} status event streams at once; reload the page later`);
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
          return sendError(
            res,
            401,
            'unauthorized',
            'missing or invalid X-Hub-Signature-256 (sha256=<HMAC-SHA256 of the body with the webhook secret>)',
          );
        }
        const forward = await relayed(req, path, body);
        if (forward) {
          h.metrics.webhooks.inc({ outcome: forward.outcome });
          return send(res, forward.status, forward.type, forward.body);
        }
        h.metrics.webhooks.inc({ outcome: 'accepted' });
        h.trigger(`webhook${header(req, 'x-github-event') ? ` (${header(req, 'x-github-event')})` : ''}`);
        return send(res, 202, 'application/json; charset=utf-8', '{"status":"fetch scheduled"}');
      }
      case 'POST /suspend':
      case 'POST /resume': {
        const body = (await readBody(req)) ?? Buffer.alloc(0);
        if (!h.webhookSecret)
          return sendError(
            res,
            403,
            'forbidden',
            'suspend and resume need --webhook-secret (sent as a bearer token or an X-Hub-Signature-256)',
          );
        if (!controlAllowed(req, body))
          return sendError(
            res,
            401,
            'unauthorized',
            'send the webhook secret as Authorization: Bearer <secret>, or sign the body with X-Hub-Signature-256',
          );
        // Suspension is the leader's: a standby passes it on and keeps its own flag as it is.
        const forward = await relayed(req, path, body);
        if (forward) return send(res, forward.status, forward.type, forward.body);
        if (path === '/suspend') h.suspend();
        else h.resume();
        events.publish();
        return send(res, 200, 'application/json; charset=utf-8', JSON.stringify({ suspended: path === '/suspend' }));
      }
      case 'POST /reconcile': {
        // `dpctl controller reconcile`: a run now. Authenticated and relayed to the leader like /suspend.
        const body = (await readBody(req)) ?? Buffer.alloc(0);
        if (!h.webhookSecret)
          return sendError(res, 403, 'forbidden', 'reconcile needs --webhook-secret (sent as a bearer token or an X-Hub-Signature-256)');
        if (!controlAllowed(req, body))
          return sendError(
            res,
            401,
            'unauthorized',
            'send the webhook secret as Authorization: Bearer <secret>, or sign the body with X-Hub-Signature-256',
          );
        const forward = await relayed(req, path, body);
        if (forward) return send(res, forward.status, forward.type, forward.body);
        // A suspended controller starts no run: say so rather than accept a request that would wait forever.
        if (h.status().controller.suspended)
          return sendError(res, 409, 'suspended', 'reconciling is suspended: resume it first (POST /resume, dpctl controller resume)');
        // The controller's clock: the caller waits for a run that started at or after it (recent_runs[].started_at).
        const requestedAt = new Date().toISOString();
        h.trigger('reconcile');
        return send(res, 202, 'application/json; charset=utf-8', JSON.stringify({ requested_at: requestedAt }));
      }
      default:
        if (
          [
            '/healthz',
            '/readyz',
            '/metrics',
            '/status',
            '/status.json',
            '/status.html',
            '/status/events',
            '/hooks/git',
            '/suspend',
            '/resume',
            '/reconcile',
          ].includes(path)
        )
          return sendError(res, 405, 'method_not_allowed', `${method} is not allowed on ${path}`);
        return sendError(res, 404, 'not_found', `no route ${path}`);
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      h.logger.error({ err: err.message, path: req.url }, 'status listener error');
      if (!res.headersSent) sendError(res, 500, 'internal_error', 'internal error');
      else res.destroy();
    });
  });
  // server.close() does not end open streams: they end here, and their timers stop.
  const close = server.close.bind(server);
  server.close = (callback?: (err?: Error) => void) => {
    events.close();
    return close(callback);
  };
  return server;
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

/**
 * The URL the other replicas reach this one's listener at (published while it leads): the
 * `--advertise-url` when given; in a pod, the pod's IP (POD_IP, from the downward API) and the
 * listen port; else the listener's own URL, an all-interfaces address replaced by loopback
 * (replicas on one host, as with the lock election). Undefined until the listener's port is known.
 */
export function advertiseUrl(o: { explicit?: string; podIp?: string; listenPort: number; listenerUrl?: string }): string | undefined {
  if (o.explicit) return o.explicit.replace(/\/+$/, '');
  const listener = o.listenerUrl ? new URL(o.listenerUrl) : undefined;
  const podIp = o.podIp?.trim();
  if (podIp) {
    const port = o.listenPort || Number(listener?.port);
    return port ? `http://${podIp.includes(':') ? `[${podIp}]` : podIp}:${port}` : undefined;
  }
  if (!listener) return undefined;
  if (listener.hostname === '0.0.0.0') listener.hostname = '127.0.0.1';
  else if (listener.hostname === '[::]') listener.hostname = '[::1]';
  return listener.origin;
}

/** Checks `--advertise-url`: an absolute http(s) URL without a path (the routes are appended to it). */
export function parseAdvertiseUrl(text: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text.trim());
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    throw new Error(
      `--advertise-url must be an http(s) URL of this replica's listener without a path, e.g. http://10.0.0.12:9090; got ${JSON.stringify(text)}`,
    );
  }
  return url.origin;
}
