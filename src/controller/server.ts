import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { ControllerMetrics } from './metrics.js';
import type { ControllerStatus } from './status.js';
import { StatusEvents, type StatusEventsOptions } from './status-events.js';
import { handleReconcile, handleSuspension, handleWebhook } from './server-control.js';
import { statusSummary } from './status-summary.js';
import { JSON_TYPE, send, sendError, sendPage, wantsHtml } from './server-http.js';

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

/** The routes of the listener: another method on one of them is 405, anything else 404. */
const ROUTES = [
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
];

/**
 * The controller's HTTP listener: probes, metrics, status (JSON and HTML), the git webhook,
 * and suspend/resume. Plain HTTP: meant for loopback or a cluster-internal port.
 */
export function createStatusServer(h: StatusHandlers): Server {
  const events = new StatusEvents(h.status, h.events);
  h.subscribe?.(() => events.publish());
  const server = createServer((req, res) => {
    route(h, events, req, res).catch((err: Error) => {
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

/** The status as JSON: whole, or `?view=summary` (status-summary.ts). Not indented: at 100,000 resources it is tens of MB. */
function sendStatusJson(h: StatusHandlers, req: IncomingMessage, res: ServerResponse): void {
  const view = new URL(req.url ?? '/', 'http://controller').searchParams.get('view');
  if (view !== null && view !== 'summary') return sendError(res, 400, 'validation_error', `view must be summary (or absent for the whole status), got "${view}"`);
  send(res, 200, JSON_TYPE, JSON.stringify(view === 'summary' ? statusSummary(h.status()) : h.status()));
}

async function route(h: StatusHandlers, events: StatusEvents, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://controller').pathname;
  const method = req.method ?? 'GET';
  switch (`${method} ${path}`) {
    case 'GET /healthz':
      return send(res, 200, JSON_TYPE, '{"status":"ok"}');
    case 'GET /readyz':
      return h.ready() ? send(res, 200, JSON_TYPE, '{"status":"ready"}') : sendError(res, 503, 'not_ready', 'no successful fetch and plan yet');
    case 'GET /metrics':
      return send(res, 200, h.metrics.registry.contentType, await h.metrics.registry.metrics());
    case 'GET /status':
      if (wantsHtml(req.headers.accept)) return sendPage(res, h.status());
      return sendStatusJson(h, req, res);
    case 'GET /status.json':
      return sendStatusJson(h, req, res);
    case 'GET /status.html':
      return sendPage(res, h.status());
    case 'GET /status/events':
      return streamEvents(h, events, req, res);
    case 'POST /hooks/git':
      return handleWebhook(h, req, res, path);
    case 'POST /suspend':
    case 'POST /resume':
      return handleSuspension(h, req, res, path as '/suspend' | '/resume', () => events.publish());
    case 'POST /reconcile':
      return handleReconcile(h, req, res, path);
    default:
      if (ROUTES.includes(path)) return sendError(res, 405, 'method_not_allowed', `${method} is not allowed on ${path}`);
      return sendError(res, 404, 'not_found', `no route ${path}`);
  }
}

/** GET /status/events: the status page's live stream, up to its limit of clients. */
function streamEvents(h: StatusHandlers, events: StatusEvents, req: IncomingMessage, res: ServerResponse): void {
  if (events.attach(req, res)) return;
  h.logger.warn({ clients: events.size, remote: req.socket.remoteAddress }, 'status event stream refused: too many clients');
  res.setHeader('retry-after', '30');
  sendError(res, 503, 'too_many_clients', `at most ${events.maxClients} status event streams at once; reload the page later`);
}

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
