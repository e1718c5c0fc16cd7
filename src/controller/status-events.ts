import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ControllerStatus } from './status.js';
import { renderStatusFragment, statusFingerprint } from './status-sections.js';

/**
 * `GET /status/events`: server-sent events for the status page. Each `status` event carries the
 * page's live fragment, re-rendered by the server (`{fp, html, runs, result, revision, suspended,
 * leader, now}` as JSON), so the page's script only swaps it in. An event goes out when the status
 * changes (a run finishes, suspend/resume, leadership, readiness, a new revision or condition),
 * found by watching the status' fingerprint while anyone listens, and at once on suspend/resume.
 * Bounded: at most `maxClients` streams (the rest get 503), a slow reader whose unsent events
 * pass `maxBufferedBytes` is dropped, and a comment line goes out every `heartbeatMs` so
 * proxies keep the stream open and dead peers are noticed.
 */

export interface StatusEventsOptions {
  /** Streams served at once (default MAX_EVENT_CLIENTS). */
  maxClients?: number;
  /** Time between heartbeat comments (default 15 s). */
  heartbeatMs?: number;
  /** How often the status is checked for a change while someone listens (default 1 s). */
  watchMs?: number;
  /** Unsent bytes after which a client is dropped as too slow (default 4 MiB). */
  maxBufferedBytes?: number;
}

/** Default cap on concurrent /status/events streams: enough for a team's screens and tabs. */
export const MAX_EVENT_CLIENTS = 20;

export class StatusEvents {
  private readonly clients = new Set<ServerResponse>();
  private readonly o: Required<StatusEventsOptions>;
  private heartbeat?: NodeJS.Timeout;
  private watcher?: NodeJS.Timeout;
  private lastFp?: string;
  private seq = 0;

  constructor(
    private readonly status: () => ControllerStatus,
    options: StatusEventsOptions = {},
  ) {
    this.o = { maxClients: MAX_EVENT_CLIENTS, heartbeatMs: 15_000, watchMs: 1_000, maxBufferedBytes: 4 * 1024 * 1024, ...options };
  }

  /** Streams open now. */
  get size(): number {
    return this.clients.size;
  }

  get maxClients(): number {
    return this.o.maxClients;
  }

  /** Starts a stream and sends the current status; false when the limit is reached (answer 503). */
  attach(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.clients.size >= this.o.maxClients) return false;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-content-type-options': 'nosniff',
    });
    req.socket.setNoDelay(true);
    this.clients.add(res);
    res.on('close', () => this.remove(res));
    res.on('error', () => this.remove(res));
    // The reconnect delay for EventSource, then where things stand now (to everyone, if that is news).
    res.write('retry: 5000\n\n');
    const s = this.status();
    const fp = statusFingerprint(s);
    const message = this.message(s, fp);
    const to = fp === this.lastFp ? [res] : [...this.clients];
    this.lastFp = fp;
    for (const c of to) this.write(c, message);
    this.start();
    return true;
  }

  /** Pushes the status to every stream now if it changed (suspend/resume call it; the watcher too). */
  publish(force = false): void {
    if (!this.clients.size) return;
    const s = this.status();
    const fp = statusFingerprint(s);
    if (!force && fp === this.lastFp) return;
    this.lastFp = fp;
    const message = this.message(s, fp);
    for (const res of this.clients) this.write(res, message);
  }

  /** Ends every stream and stops the timers (the listener is closing). */
  close(): void {
    for (const res of [...this.clients]) res.end();
    this.clients.clear();
    this.stop();
  }

  private message(s: ControllerStatus, fp: string): string {
    const now = Date.now();
    const data = {
      fp,
      now,
      runs: s.runs,
      result: s.last_run?.result ?? null,
      revision: s.revision.applied?.id ?? null,
      suspended: s.controller.suspended,
      leader: s.controller.leader.elected,
      html: renderStatusFragment(s, now),
    };
    // JSON has no raw line breaks: one data line.
    return `event: status\nid: ${++this.seq}\ndata: ${JSON.stringify(data)}\n\n`;
  }

  private write(res: ServerResponse, chunk: string): void {
    if (res.writableLength > this.o.maxBufferedBytes) {
      // Not reading: let it go rather than buffer without end (EventSource reconnects).
      this.remove(res);
      res.destroy();
      return;
    }
    res.write(chunk);
  }

  private remove(res: ServerResponse): void {
    this.clients.delete(res);
    if (!this.clients.size) this.stop();
  }

  private start(): void {
    this.heartbeat ??= setInterval(() => {
      for (const res of this.clients) this.write(res, `: heartbeat ${new Date().toISOString()}\n\n`);
    }, this.o.heartbeatMs).unref();
    this.watcher ??= setInterval(() => this.publish(), this.o.watchMs).unref();
  }

  private stop(): void {
    clearInterval(this.heartbeat);
    clearInterval(this.watcher);
    this.heartbeat = this.watcher = undefined;
  }
}
