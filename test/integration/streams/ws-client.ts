import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { localhostLookup } from '../../support/http.js';
import type { TestService } from '../../support/service.js';

/** `wss://<tenant>.localhost:<port>/api/v1<path>?token=...` */
export function wsUrl(svc: TestService, slug: string, path: string, token?: string): string {
  const u = new URL(`${svc.url(slug)}${path}`.replace(/^https:/, 'wss:'));
  if (token !== undefined) u.searchParams.set('token', token);
  return u.toString();
}

const caOf = new WeakMap<TestService, Buffer>();
const ca = (svc: TestService) => {
  let c = caOf.get(svc);
  if (!c) caOf.set(svc, (c = readFileSync(svc.service.tls.certPath)));
  return c;
};

/** A connected test client that records every message and how the socket closed. */
export class WsClient {
  readonly messages: any[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: (() => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.messages.push(JSON.parse(String(data)));
      for (const w of this.waiters.splice(0)) w();
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  }

  static connect(svc: TestService, url: string, opts: { headers?: Record<string, string>; autoPong?: boolean } = {}): Promise<WsClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, {
        ca: ca(svc),
        lookup: localhostLookup,
        headers: opts.headers,
        autoPong: opts.autoPong ?? true,
      } as WebSocket.ClientOptions);
      ws.once('open', () => resolve(new WsClient(ws)));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c));
        res.on('end', () =>
          reject(
            Object.assign(new Error(`upgrade refused: ${res.statusCode} ${body}`), {
              status: res.statusCode,
              body: body ? JSON.parse(body) : undefined,
            }),
          ),
        );
      });
      ws.once('error', reject);
    });
  }

  /** Resolves once at least n messages arrived (rejects after timeoutMs). */
  async count(n: number, timeoutMs = 10_000): Promise<any[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.messages.length < n) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`expected ${n} messages, got ${this.messages.length}: ${JSON.stringify(this.messages)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.messages;
  }

  close() {
    this.ws.close();
  }
}

/** The refusal (status and error envelope) of an upgrade that must fail. */
export async function refused(svc: TestService, url: string, headers?: Record<string, string>): Promise<{ status: number; body: any }> {
  try {
    const c = await WsClient.connect(svc, url, { headers });
    c.close();
  } catch (err) {
    const e = err as { status?: number; body?: unknown };
    if (e.status) return { status: e.status, body: e.body };
    throw err;
  }
  throw new Error(`upgrade to ${url} was accepted`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
