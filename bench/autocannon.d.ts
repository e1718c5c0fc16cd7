/**
 * The part of autocannon 8's programmatic API that bench/service.ts uses (the package
 * ships no types and @types/autocannon is not installed). Source of truth:
 * node_modules/autocannon/README.md ("API") and lib/run.js.
 */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';
  import type { ConnectionOptions } from 'node:tls';

  namespace autocannon {
    type Context = Record<string, unknown>;

    interface RequestSpec {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      /** Mutates the raw request before it is built; a falsy return restarts the sequence. */
      setupRequest?: (request: RequestSpec, context: Context) => RequestSpec | null | undefined;
      onResponse?: (status: number, body: string, context: Context, headers: Record<string, string>) => void;
    }

    /** The per-connection http client (lib/httpClient.js); `conn` is its net/tls socket. */
    interface Client extends EventEmitter {
      setHeaders(headers: Record<string, string>): void;
      setBody(body: string | Buffer): void;
    }

    interface Options extends RequestSpec {
      url: string | string[];
      connections?: number;
      /** Seconds. */
      duration?: number;
      amount?: number;
      pipelining?: number;
      /** Seconds. */
      timeout?: number;
      bailout?: number;
      connectionRate?: number;
      overallRate?: number;
      ignoreCoordinatedOmission?: boolean;
      excludeErrorStats?: boolean;
      requests?: RequestSpec[];
      /** SNI; defaults to the URL's host name unless that is an IP address. */
      servername?: string;
      /** Spread into tls.connect(); autocannon then forces rejectUnauthorized: false. */
      tlsOptions?: ConnectionOptions;
      setupClient?: (client: Client) => void;
      verifyBody?: (body: string) => boolean;
      expectBody?: string;
      workers?: number;
    }

    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      sent: number;
      p0_001: number;
      p0_01: number;
      p0_1: number;
      p1: number;
      p2_5: number;
      p10: number;
      p25: number;
      p50: number;
      p75: number;
      p90: number;
      p97_5: number;
      p99: number;
      p99_9: number;
      p99_99: number;
      p99_999: number;
    }

    interface Result {
      url: string;
      connections: number;
      pipelining: number;
      duration: number;
      start: Date;
      finish: Date;
      requests: Histogram;
      latency: Histogram;
      throughput: Histogram;
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      '1xx': number;
      '2xx': number;
      '3xx': number;
      '4xx': number;
      '5xx': number;
      statusCodeStats: Record<string, { count: number }>;
    }

    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
      on(event: 'response', listener: (client: Client, statusCode: number, resBytes: number, responseTimeMs: number) => void): this;
      on(event: 'reqError', listener: (error: Error) => void): this;
      on(event: 'done', listener: (result: Result) => void): this;
      on(event: string, listener: (...args: any[]) => void): this;
    }
  }

  function autocannon(opts: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
