import pRetry, { AbortError } from 'p-retry';
import { request, type Dispatcher } from './undici.js';
import type { RetryOptions } from './config.js';
import {
  AmbiguousCreateError,
  AmbiguousRequestError,
  ApiError,
  codeForStatus,
  DataPlatformError,
  NetworkError,
  type CreateIdentity,
  type ErrorDetail,
} from './errors.js';
import type { ClientEvent } from './events.js';
import { EndpointGate, parseRetryAfter } from './rate-gate.js';
import type { StatsRecorder } from './stats.js';
import { classifyNetworkError, describeNetworkError, errorCode } from './transport.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Methods a repeat of which cannot change the outcome (RFC 9110). PATCH and POST are not among them. */
const IDEMPOTENT = new Set<Method>(['GET', 'PUT', 'DELETE']);

export type Query = Record<string, string | number | boolean | undefined>;

/** One API call, by route pattern: the pattern is what stats and 429 pauses are keyed on. */
export interface CallSpec {
  method: Method;
  /** Route pattern relative to /api/v1 with `{param}` placeholders, e.g. `/projects/{id}/connectors`. */
  route: string;
  params?: Record<string, string>;
  query?: Query;
  body?: unknown;
  /**
   * Whether the call may be re-sent after an ambiguous failure (a 5xx, or a connection lost
   * after the request was sent). Default: GET, PUT and DELETE yes; POST and PATCH no.
   */
  idempotent?: boolean;
  /** For a create: what an AmbiguousCreateError reports. */
  create?: CreateIdentity;
  /** Send the bearer credential (default true; false for login and refresh). */
  auth?: boolean;
  signal?: AbortSignal;
}

export interface CallResult<T> {
  status: number;
  body: T;
  requestId: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

/** Supplies the bearer credential and renews it after a 401. */
export interface Credentials {
  token(signal?: AbortSignal): Promise<string>;
  /** After a 401 for `refused`: get a new token (one renewal at a time). False: cannot renew. */
  renew(refused: string, signal?: AbortSignal): Promise<boolean>;
  /** Values that must never appear in a message. */
  secrets(): string[];
  /**
   * Obtains a credential now, ahead of the first call (a login), stopping when `signal` aborts.
   * Absent: nothing to obtain (an API key).
   */
  prefetch?(signal?: AbortSignal): Promise<void>;
}

export interface CoreOptions {
  base: string;
  agent: Dispatcher;
  retry: RetryOptions;
  retryPatch: boolean;
  userAgent: string;
  signal?: AbortSignal;
  stats: StatsRecorder;
  emit: (event: ClientEvent) => void;
}

/** Fills `{param}` placeholders, each value URL-encoded. */
export function formatRoute(route: string, params: Record<string, string> = {}): string {
  return route.replace(/\{([A-Za-z0-9_]+)\}/g, (_m, name: string) => {
    const value = params[name];
    if (value === undefined || value === '') throw new TypeError(`missing path parameter ${name} for ${route}`);
    return encodeURIComponent(value);
  });
}

/** Marks errors the retry loop may retry, and those retried at once without using the retry budget. */
const retryable = new WeakSet<Error>();
const freeRetry = new WeakSet<Error>();

export function combineSignals(a?: AbortSignal, b?: AbortSignal): AbortSignal | undefined {
  if (!a || !b) return a ?? b;
  if (typeof AbortSignal.any === 'function') return AbortSignal.any([a, b]);
  // Node 20.0-20.2 have no AbortSignal.any.
  const both = new AbortController();
  for (const s of [a, b]) {
    if (s.aborted) both.abort(s.reason);
    else s.addEventListener('abort', () => both.abort(s.reason), { once: true });
  }
  return both.signal;
}

/**
 * Sends calls: bearer auth with one renewal on 401, 429 pauses per endpoint, backoff retries
 * (p-retry) for what is safe to repeat, typed errors, counting.
 */
export class HttpCore {
  readonly gate = new EndpointGate();
  private credentials: Credentials | undefined;
  private readonly origin: string;

  constructor(private readonly o: CoreOptions) {
    this.origin = new URL(o.base).origin;
  }

  setCredentials(credentials: Credentials) {
    this.credentials = credentials;
  }

  /** Replaces every known secret in a text (defence in depth: the server never echoes them). */
  redact(text: string): string {
    let out = text;
    for (const secret of this.credentials?.secrets() ?? []) {
      if (secret && secret.length >= 6) out = out.split(secret).join('[redacted]');
    }
    return out;
  }

  url(spec: Pick<CallSpec, 'route' | 'params' | 'query'>): string {
    const u = new URL(`${this.o.base}${formatRoute(spec.route, spec.params)}`);
    for (const [k, v] of Object.entries(spec.query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u.toString();
  }

  endpointKey(spec: Pick<CallSpec, 'method' | 'route'>) {
    return `${spec.method} ${spec.route}`;
  }

  async call<T = unknown>(spec: CallSpec): Promise<CallResult<T>> {
    const signal = combineSignals(this.o.signal, spec.signal);
    signal?.throwIfAborted();
    const endpoint = this.endpointKey(spec);
    const gateKey = `${this.origin} ${endpoint}`;
    const url = this.url(spec);
    const info = { method: spec.method, route: spec.route, url };
    const idempotent = spec.idempotent ?? (IDEMPOTENT.has(spec.method) || (spec.method === 'PATCH' && this.o.retryPatch));
    const useAuth = spec.auth !== false;
    const retry = this.o.retry;
    const deadline = Date.now() + retry.maxElapsedMs;
    const payload = spec.body === undefined ? undefined : JSON.stringify(spec.body);

    let authRenewed = false;
    let rateLimitWaits = 0;
    let ambiguousBefore = false;
    let lastReason = '';

    const attemptOnce = async (attempt: number): Promise<CallResult<T>> => {
      if (attempt > 1) this.o.emit({ type: 'retry', method: spec.method, route: spec.route, attempt, reason: lastReason });
      const waited = await this.gate.wait(
        gateKey,
        deadline,
        signal,
        (end) =>
          new AbortError(
            new ApiError({
              ...info,
              status: 429,
              code: 'rate_limited',
              serverMessage: `${endpoint} is paused for another ${Math.ceil((end - Date.now()) / 1000)} s by a Retry-After, longer than this call may still wait`,
              retryAfterMs: end - Date.now(),
              attempt,
            }),
          ),
      );
      if (waited > 0) {
        this.o.stats.waited(waited);
        this.o.emit({ type: 'rate_limit_wait', endpoint, waitedMs: waited });
      }
      const token = useAuth ? await this.requireCredentials().token(signal) : undefined;

      const headers: Record<string, string> = { accept: 'application/json', 'user-agent': this.o.userAgent };
      if (token) headers.authorization = `Bearer ${token}`;
      if (payload !== undefined) headers['content-type'] = 'application/json';

      this.o.stats.sent(endpoint, attempt);
      const started = performance.now();
      let status: number;
      let resHeaders: Record<string, string | string[] | undefined>;
      let text: string;
      try {
        const res = await request(url, { method: spec.method, headers, body: payload, dispatcher: this.o.agent, signal });
        status = res.statusCode;
        resHeaders = res.headers as typeof resHeaders;
        text = await res.body.text();
      } catch (err) {
        if (signal?.aborted) throw new AbortError(signal.reason as Error);
        const code = errorCode(err);
        this.o.stats.failed(endpoint);
        this.o.emit({ type: 'network_error', ...info, code, attempt });
        const network = new NetworkError({ ...info, code, reason: this.redact(describeNetworkError(err)), cause: err });
        const { transient, notSent } = classifyNetworkError(code);
        if (transient && (notSent || idempotent)) {
          if (!notSent) ambiguousBefore = true;
          lastReason = `network error ${code}`;
          retryable.add(network);
          throw network;
        }
        // Not safe to repeat and maybe received: the caller has to find out what happened.
        if (!notSent && !idempotent) throw new AbortError(this.ambiguous(spec, info, network));
        throw new AbortError(network);
      }
      const requestId = typeof resHeaders['x-request-id'] === 'string' ? resHeaders['x-request-id'] : undefined;
      this.o.emit({ type: 'response', ...info, status, attempt, durationMs: Math.round(performance.now() - started), requestId });

      if (status < 400) {
        let body: unknown = undefined;
        if (text !== '') {
          try {
            body = JSON.parse(text);
          } catch {
            throw new AbortError(
              new ApiError({
                ...info,
                status,
                code: 'invalid_response',
                serverMessage: 'the answer is not valid JSON',
                requestId,
                attempt,
              }),
            );
          }
        }
        return { status, body: body as T, requestId, headers: resHeaders };
      }

      const error = this.apiError(info, status, text, resHeaders, requestId, attempt, ambiguousBefore);
      if (status === 401 && token && !authRenewed) {
        authRenewed = true;
        const renewed = await this.requireCredentials().renew(token, signal);
        if (renewed) {
          lastReason = '401: credential renewed';
          freeRetry.add(error);
          throw error;
        }
        throw new AbortError(error);
      }
      if (status === 429) {
        this.o.stats.rateLimited(endpoint);
        rateLimitWaits++;
        const waitMs = error.retryAfterMs ?? 1000;
        const until = this.gate.pause(gateKey, waitMs);
        this.o.emit({ type: 'rate_limited', endpoint, retryAfterMs: waitMs, until });
        if (rateLimitWaits > retry.maxRateLimitWaits || until > deadline) throw new AbortError(error);
        lastReason = `429: waiting ${waitMs} ms`;
        // The service rate-limits before it does anything, so any method may be sent again.
        freeRetry.add(error);
        throw error;
      }
      if (status >= 500) {
        this.o.stats.failed(endpoint);
        if (idempotent && status !== 501 && status !== 505) {
          ambiguousBefore = true;
          lastReason = `HTTP ${status}`;
          retryable.add(error);
          throw error;
        }
        throw new AbortError(spec.method === 'GET' ? error : this.ambiguous(spec, info, error));
      }
      throw new AbortError(error);
    };

    return pRetry(attemptOnce, {
      // The retry budget is enforced in shouldRetry, so that it bounds 5xx and network retries
      // only: waiting out a 429 and the one retry after a token renewal do not use it up.
      retries: Number.POSITIVE_INFINITY,
      factor: 2,
      minTimeout: retry.minTimeoutMs,
      maxTimeout: retry.maxTimeoutMs,
      randomize: true,
      maxRetryTime: retry.maxElapsedMs,
      signal,
      shouldConsumeRetry: ({ error }) => !freeRetry.has(error),
      shouldRetry: ({ error, retriesConsumed }) => freeRetry.has(error) || (retryable.has(error) && retriesConsumed < retry.retries),
    });
  }

  /** The credential to send now (logs in first when needed). Streams put it in their URL. */
  token(signal?: AbortSignal): Promise<string> {
    return this.requireCredentials().token(signal);
  }

  /** Obtains the credential now (see Credentials.prefetch). */
  async prefetchCredentials(signal?: AbortSignal): Promise<void> {
    await this.requireCredentials().prefetch?.(signal);
  }

  /** After `refused` got a 401: renews it; false when it cannot be renewed (an API key). */
  renew(refused: string, signal?: AbortSignal): Promise<boolean> {
    return this.requireCredentials().renew(refused, signal);
  }

  private requireCredentials(): Credentials {
    if (!this.credentials) throw new DataPlatformError('no credentials configured');
    return this.credentials;
  }

  private ambiguous(spec: CallSpec, info: { method: string; route: string; url: string }, cause: NetworkError | ApiError) {
    return spec.create ? new AmbiguousCreateError({ ...info, cause, create: spec.create }) : new AmbiguousRequestError({ ...info, cause });
  }

  /** The typed error of an error answer (the spec's envelope, or a redacted excerpt of anything else). */
  apiError(
    info: { method: string; route: string; url: string },
    status: number,
    text: string,
    headers: Record<string, string | string[] | undefined>,
    requestId: string | undefined,
    attempt: number,
    afterAmbiguousFailure: boolean,
  ): ApiError {
    let code = codeForStatus(status);
    let serverMessage = `HTTP ${status}`;
    let details: ErrorDetail[] | undefined;
    try {
      const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
      const e = parsed?.error;
      if (e && typeof e === 'object') {
        if (typeof e.code === 'string') code = e.code;
        if (typeof e.message === 'string') serverMessage = e.message;
        if (Array.isArray(e.details)) {
          details = e.details
            .filter((d): d is { field?: unknown; message?: unknown } => !!d && typeof d === 'object')
            .map((d) => ({ field: String(d.field ?? ''), message: this.redact(String(d.message ?? '')) }));
        }
      }
    } catch {
      // Not the envelope (a proxy's page): keep a short, redacted excerpt.
      const excerpt = text.replace(/\s+/g, ' ').trim().slice(0, 200);
      if (excerpt) serverMessage = `HTTP ${status}: ${excerpt}`;
    }
    return new ApiError({
      ...info,
      status,
      code,
      serverMessage: this.redact(serverMessage),
      details,
      requestId,
      retryAfterMs: status === 429 ? parseRetryAfter(headers['retry-after']) : undefined,
      attempt,
      afterAmbiguousFailure,
    });
  }
}
