import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { localhostLookup } from '../../src/client/index.js';
import type { TestService } from './service.js';

export type Fault =
  /** Pass the request to the real service and its answer back. */
  | 'forward'
  /** Answer this status without asking the service. */
  | { status: number; body?: unknown; headers?: Record<string, string> }
  /** Let the service process the request, then drop the client's connection without an answer. */
  | 'forward-then-drop'
  /** Let the service process the request, then answer this status instead of its answer. */
  | { forwardThenStatus: number }
  /** Pass the request on after this many milliseconds (a slow network or a busy server). */
  | { delayMs: number };

export interface SeenRequest {
  method: string;
  path: string;
  /** What was done with it. */
  fault: string;
}

/**
 * A tiny HTTPS proxy in front of the real service, with the service's own certificates (so
 * the client's TLS and *.localhost handling are real), that injects the faults a healthy
 * server cannot produce on demand: 5xx storms, and connections dropped after the request
 * reached the server. nock cannot do this here: it patches node:http(s), and undici does
 * not use it.
 */
export class FaultProxy {
  readonly seen: SeenRequest[] = [];
  /** The most requests of each method that were in flight at once (since the last inject). */
  readonly maxInFlight = new Map<string, number>();
  private readonly inFlight = new Map<string, number>();
  /** Decides per request; `n` counts requests of that method and path (from 1). Default: forward all. */
  rule: (req: { method: string; path: string; n: number }) => Fault = () => 'forward';
  private readonly counts = new Map<string, number>();
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    private readonly upstream: Agent,
    readonly port: number,
  ) {}

  static async start(svc: TestService): Promise<FaultProxy> {
    const upstream = new Agent({ connect: { ca: readFileSync(svc.service.tls.certPath), lookup: localhostLookup } });
    const tls = svc.service.tls;
    const server = createServer({ cert: tls.cert, key: tls.key, SNICallback: tls.SNICallback });
    // Assigned once the server listens; requests only arrive after that.
    // eslint-disable-next-line prefer-const
    let proxy: FaultProxy;
    server.on('request', async (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const path = req.url ?? '/';
      const key = `${req.method} ${path.split('?')[0]}`;
      const n = (proxy.counts.get(key) ?? 0) + 1;
      proxy.counts.set(key, n);
      const fault = proxy.rule({ method: req.method!, path: path.split('?')[0], n });
      proxy.seen.push({ method: req.method!, path, fault: typeof fault === 'string' ? fault : JSON.stringify(fault) });
      proxy.track(req.method!, res);
      if (typeof fault === 'object' && 'status' in fault) {
        res.writeHead(fault.status, { 'content-type': 'application/json', 'x-request-id': `proxy-${n}`, ...(fault.headers ?? {}) });
        res.end(
          fault.body === undefined
            ? JSON.stringify({ error: { code: 'internal_error', message: 'injected fault' } })
            : JSON.stringify(fault.body),
        );
        return;
      }
      if (typeof fault === 'object' && 'delayMs' in fault) await new Promise((r) => setTimeout(r, fault.delayMs));
      const host = (req.headers.host ?? '').replace(/:\d+$/, '');
      const headers: Record<string, string> = {};
      for (const name of ['authorization', 'content-type', 'accept', 'user-agent']) {
        const v = req.headers[name];
        if (typeof v === 'string') headers[name] = v;
      }
      try {
        const answer = await request(`https://${host}:${svc.port}${path}`, {
          method: req.method as 'GET',
          headers,
          body: chunks.length ? Buffer.concat(chunks) : undefined,
          dispatcher: upstream,
        });
        const text = await answer.body.text();
        if (fault === 'forward-then-drop') {
          req.socket.destroy();
          return;
        }
        const status = typeof fault === 'object' && 'forwardThenStatus' in fault ? fault.forwardThenStatus : answer.statusCode;
        const out: Record<string, string> = {};
        for (const name of ['content-type', 'x-request-id', 'retry-after']) {
          const v = answer.headers[name];
          if (typeof v === 'string') out[name] = v;
        }
        res.writeHead(status, out);
        res.end(
          status === answer.statusCode
            ? text
            : JSON.stringify({ error: { code: 'internal_error', message: 'injected fault after processing' } }),
        );
      } catch {
        req.socket.destroy();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    proxy = new FaultProxy(server, upstream, (server.address() as AddressInfo).port);
    server.on('connection', (s: Socket) => {
      proxy.sockets.add(s);
      s.on('close', () => proxy.sockets.delete(s));
    });
    return proxy;
  }

  /** Sets the rule and forgets what was seen. */
  inject(rule: FaultProxy['rule']) {
    this.rule = rule;
    this.seen.length = 0;
    this.counts.clear();
    this.maxInFlight.clear();
  }

  /** Counts the request as in flight until its answer is sent or its connection dropped. */
  private track(method: string, res: ServerResponse) {
    const now = (this.inFlight.get(method) ?? 0) + 1;
    this.inFlight.set(method, now);
    this.maxInFlight.set(method, Math.max(this.maxInFlight.get(method) ?? 0, now));
    res.once('close', () => this.inFlight.set(method, (this.inFlight.get(method) ?? 1) - 1));
  }

  /** Requests seen for a method and a path (without query). */
  count(method: string, path: string): number {
    return this.seen.filter((r) => r.method === method && r.path.split('?')[0] === path).length;
  }

  async close() {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await this.upstream.close();
  }
}
