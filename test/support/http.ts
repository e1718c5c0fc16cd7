import { Agent, request } from 'undici';
import { readFileSync } from 'node:fs';
import { lookup as dnsLookup } from 'node:dns';
import type { LookupFunction } from 'node:net';

/** `<tenant>.localhost` resolves to loopback, as browsers do, with no /etc/hosts entry. */
export const localhostLookup: LookupFunction = (hostname, options, callback) => {
  if (hostname === 'localhost' || hostname.endsWith('.localhost')) {
    if ((options as { all?: boolean }).all)
      return (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
    return (callback as (e: null, a: string, f: number) => void)(null, '127.0.0.1', 4);
  }
  dnsLookup(hostname, options, callback as never);
};

export interface HttpResponse<T = any> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
  text: string;
}

export interface CallOptions {
  token?: string;
  body?: unknown;
  /** Raw body text or bytes (for malformed JSON and encoding tests). */
  raw?: string | Uint8Array;
  /**
   * Accept the service's default certificate for any host name (still signed by our CA): the
   * service issues certificates only for tenants' host names, so a request to a made-up tenant
   * host needs this to get as far as its 404.
   */
  anyHostCertificate?: boolean;
  headers?: Record<string, string>;
  query?: Record<string, string | number | undefined>;
}

/** A small HTTPS client for black-box tests: real TLS, our CA, tenant hosts on loopback. */
export class TestHttp {
  readonly agent: Agent;
  private readonly anyHostAgent: Agent;
  constructor(caFile: string) {
    this.agent = new Agent({ connect: { ca: readFileSync(caFile), lookup: localhostLookup }, connections: 32 });
    this.anyHostAgent = new Agent({
      connect: { ca: readFileSync(caFile), lookup: localhostLookup, checkServerIdentity: () => undefined },
      connections: 4,
    });
  }

  async call<T = any>(method: string, url: string, opts: CallOptions = {}): Promise<HttpResponse<T>> {
    const u = new URL(url);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | Uint8Array | undefined;
    if (opts.raw !== undefined) body = opts.raw;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await request(u, {
      method: method as 'GET',
      headers,
      body,
      dispatcher: opts.anyHostCertificate ? this.anyHostAgent : this.agent,
    });
    const text = await res.body.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.statusCode, headers: res.headers as HttpResponse['headers'], body: parsed as T, text };
  }

  async close() {
    await Promise.all([this.agent.close(), this.anyHostAgent.close()]);
  }
}
