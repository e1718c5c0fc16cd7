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
import { EndpointGate, parseRetryAfter, sleep } from './rate-gate.js';
import { decide, FIRST_ATTEMPT, retryTimes, type AttemptOutcome, type RetryPolicy, type RetryState, type Verdict } from './retry.js';
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
  /** ClientConfig.rateLimitReserve. */
  rateLimitReserve: number;
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

/** The share of each quota a client leaves to the tenant's other callers (ClientConfig.rateLimitReserve). */
export const DEFAULT_RATE_LIMIT_RESERVE = 0.2;

const headerNumber = (v: string | string[] | undefined) => {
  const n = Number(Array.isArray(v) ? v[0] : v);
  return v === undefined || !Number.isFinite(n) ? undefined : n;
};

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

/** One call being made: what every attempt of it sends and records. */
interface CallContext {
  spec: CallSpec;
  signal: AbortSignal | undefined;
  endpoint: string;
  /** The endpoint's key in the gate (429 pauses), with the origin. */
  gateKey: string;
  url: string;
  info: { method: string; route: string; url: string };
  payload: string | undefined;
  /** Epoch ms: the end of the call's time (maxElapsedMs). */
  deadline: number;
  /** decide() with the call's policy and the time left now. */
  decide: (outcome: AttemptOutcome, state: RetryState) => Verdict;
}

/**
 * Sends calls: bearer auth with one renewal on 401, 429 pauses per endpoint, backoff retries
 * for what is safe to repeat (decided by retry.ts), typed errors, counting.
 */
export class HttpCore {
  readonly gate = new EndpointGate();
  private credentials: Credentials | undefined;
  private readonly origin: string;
  /** The service has answered a call of this client (retry.ts: a refused connection after that is a restart). */
  private answered = false;

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

  /**
   * Sends a call, and again while decide() (retry.ts) says so: attempts send and record, the
   * decision is pure, this loop renews the credential and sleeps the backoff in between.
   */
  async call<T = unknown>(spec: CallSpec): Promise<CallResult<T>> {
    const signal = combineSignals(this.o.signal, spec.signal);
    signal?.throwIfAborted();
    const endpoint = this.endpointKey(spec);
    const url = this.url(spec);
    const retry = this.o.retry;
    const deadline = Date.now() + retry.maxElapsedMs;
    const payload = spec.body === undefined ? undefined : JSON.stringify(spec.body);
    const times = retryTimes(retry);
    const policy: RetryPolicy = {
      method: spec.method,
      idempotent: spec.idempotent ?? (IDEMPOTENT.has(spec.method) || (spec.method === 'PATCH' && this.o.retryPatch)),
      retries: retry.retries,
      minTimeoutMs: times.minTimeoutMs,
      maxTimeoutMs: times.maxTimeoutMs,
      maxRateLimitWaits: retry.maxRateLimitWaits,
      restartWindowMs: retry.restartWindowMs,
      deadline,
    };
    const started = performance.now();
    const c: CallContext = {
      spec,
      signal,
      endpoint,
      gateKey: `${this.origin} ${endpoint}`,
      url,
      info: { method: spec.method, route: spec.route, url },
      payload,
      deadline,
      decide: (outcome, state) => {
        if (outcome.kind !== 'network') this.answered = true;
        const elapsedMs = performance.now() - started;
        const reading = { remainingMs: times.maxElapsedMs - elapsedMs, elapsedMs, originAnswered: this.answered, random: Math.random() };
        return decide(outcome, { ...state, ...reading }, policy);
      },
    };
    let state = FIRST_ATTEMPT;
    for (let attempt = 1; ; attempt++) {
      const { verdict, result } = await this.tryOnce<T>(c, attempt, state);
      if (verdict.kind === 'return') return result!;
      if (verdict.kind === 'fail') throw verdict.error;
      if (verdict.kind === 'ambiguous') throw this.ambiguous(spec, c.info, verdict.cause);
      state = verdict.next;
      signal?.throwIfAborted();
      if (verdict.delayMs > 0) await sleep(verdict.delayMs, signal);
      signal?.throwIfAborted();
    }
  }

  /**
   * One attempt and its verdict, the credential renewed first when that is the verdict. What it
   * throws (a failed login, an abort's reason, a pause longer than the call may wait) ends the call.
   */
  private async tryOnce<T>(c: CallContext, attempt: number, state: RetryState) {
    try {
      c.signal?.throwIfAborted();
      const { outcome, result } = await this.attempt<T>(c, attempt, state);
      let verdict = c.decide(outcome, state);
      if (verdict.kind === 'renew') {
        const renewed = await this.requireCredentials().renew(verdict.token, c.signal);
        verdict = c.decide({ kind: 'renewal', renewed, error: verdict.error }, state);
      }
      if (verdict.kind === 'return') c.signal?.throwIfAborted();
      return { verdict: verdict as Exclude<Verdict, { kind: 'renew' }>, result };
    } catch (err) {
      throw err instanceof Error ? err : new TypeError(`Non-error was thrown: "${err}". You should only throw errors.`);
    }
  }

  /** One attempt: waits out a pause of the endpoint, sends, and says what came of it. */
  private async attempt<T>(
    c: CallContext,
    attempt: number,
    state: RetryState,
  ): Promise<{ outcome: AttemptOutcome; result?: CallResult<T> }> {
    const { spec, signal, endpoint, info } = c;
    if (attempt > 1) this.o.emit({ type: 'retry', method: spec.method, route: spec.route, attempt, reason: state.reason });
    const waited = await this.gate.wait(
      c.gateKey,
      c.deadline,
      signal,
      (end) =>
        new ApiError({
          ...info,
          status: 429,
          code: 'rate_limited',
          serverMessage: `${endpoint} is paused for another ${Math.ceil((end - Date.now()) / 1000)} s (by a Retry-After, or to leave the rest of the quota to the tenant's other callers), longer than this call may still wait`,
          retryAfterMs: end - Date.now(),
          attempt,
        }),
    );
    if (waited > 0) {
      this.o.stats.waited(waited);
      this.o.emit({ type: 'rate_limit_wait', endpoint, waitedMs: waited });
    }
    const token = spec.auth !== false ? await this.requireCredentials().token(signal) : undefined;
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': this.o.userAgent };
    if (token) headers.authorization = `Bearer ${token}`;
    if (c.payload !== undefined) headers['content-type'] = 'application/json';

    this.o.stats.sent(endpoint, attempt);
    const started = performance.now();
    let res: { status: number; headers: Record<string, string | string[] | undefined>; text: string };
    try {
      const answer = await request(c.url, { method: spec.method, headers, body: c.payload, dispatcher: this.o.agent, signal });
      res = { status: answer.statusCode, headers: answer.headers as typeof res.headers, text: await answer.body.text() };
    } catch (err) {
      return { outcome: this.networkOutcome(c, attempt, err) };
    }
    const { status, headers: resHeaders, text } = res;
    const requestId = typeof resHeaders['x-request-id'] === 'string' ? resHeaders['x-request-id'] : undefined;
    if (status !== 429) this.keepReserve(c, resHeaders);
    this.o.emit({ type: 'response', ...info, status, attempt, durationMs: Math.round(performance.now() - started), requestId });
    if (status < 400) {
      let body: unknown = undefined;
      if (text !== '') {
        try {
          body = JSON.parse(text);
        } catch {
          const error = new ApiError({
            ...info,
            status,
            code: 'invalid_response',
            serverMessage: 'the answer is not valid JSON',
            requestId,
            attempt,
          });
          return { outcome: { kind: 'unreadable', error } };
        }
      }
      return { outcome: { kind: 'ok' }, result: { status, body: body as T, requestId, headers: resHeaders } };
    }
    const error = this.apiError(info, status, text, resHeaders, requestId, attempt, state.ambiguousBefore);
    if (status === 429) {
      this.o.stats.rateLimited(endpoint);
      const waitMs = error.retryAfterMs ?? 1000;
      const until = this.gate.pause(c.gateKey, waitMs);
      this.o.emit({ type: 'rate_limited', endpoint, retryAfterMs: waitMs, until });
      return { outcome: { kind: 'rate-limited', error, waitMs, pausedUntil: until } };
    }
    if (status >= 500) this.o.stats.failed(endpoint);
    return { outcome: { kind: 'refused', status, error, token } };
  }

  /**
   * Leaves the last `rateLimitReserve` of the endpoint's quota to the tenant's other callers: when
   * the answer says no more than that is left, the endpoint waits here until the window ends.
   */
  private keepReserve(c: CallContext, headers: Record<string, string | string[] | undefined>): void {
    const limit = headerNumber(headers['ratelimit-limit']);
    const remaining = headerNumber(headers['ratelimit-remaining']);
    const reset = headerNumber(headers['ratelimit-reset']);
    if (!this.o.rateLimitReserve || limit === undefined || remaining === undefined || reset === undefined) return;
    if (remaining > Math.floor(limit * this.o.rateLimitReserve)) return;
    const until = this.gate.pause(c.gateKey, reset * 1000);
    this.o.emit({ type: 'rate_limit_reserve', endpoint: c.endpoint, remaining, limit, until });
  }

  /** A request that got no answer: recorded, classified (see transport.ts). An abort is thrown as its reason. */
  private networkOutcome(c: CallContext, attempt: number, err: unknown): AttemptOutcome {
    if (c.signal?.aborted) {
      const reason: unknown = c.signal.reason;
      throw reason instanceof Error ? reason : new Error(String(reason));
    }
    const code = errorCode(err);
    this.o.stats.failed(c.endpoint);
    this.o.emit({ type: 'network_error', ...c.info, code, attempt });
    const error = new NetworkError({ ...c.info, code, reason: this.redact(describeNetworkError(err)), cause: err });
    return { kind: 'network', error, ...classifyNetworkError(code) };
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
