import { describe, expect, it } from 'vitest';
import { ApiError, NetworkError } from '../../../src/client/errors.js';
import {
  backoff,
  decide,
  FIRST_ATTEMPT,
  retryTimes,
  type Attempt,
  type AttemptOutcome,
  type RetryPolicy,
  type RetryState,
  type Verdict,
} from '../../../src/client/retry.js';

/**
 * The client's retry decision (client/retry.ts) as a table: what each outcome of an attempt
 * leads to, by method, idempotency, the attempts before and the time left.
 */

const NOW = 1_000_000;
const policy = (set: Partial<RetryPolicy> = {}): RetryPolicy => ({
  method: 'GET',
  idempotent: true,
  retries: 4,
  minTimeoutMs: 250,
  maxTimeoutMs: 8_000,
  maxRateLimitWaits: 8,
  restartWindowMs: 30_000,
  deadline: NOW + 120_000,
  ...set,
});
const attempt = (set: Partial<Attempt> = {}): Attempt => ({
  ...FIRST_ATTEMPT,
  remainingMs: 60_000,
  elapsedMs: 0,
  originAnswered: false,
  random: 0,
  ...set,
});

const info = { method: 'GET', route: '/projects', url: 'https://acme.localhost/api/v1/projects' };
const apiError = (status: number) => new ApiError({ ...info, status, code: 'x', serverMessage: `HTTP ${status}` });
const refused = (status: number, token?: string): AttemptOutcome => ({ kind: 'refused', status, error: apiError(status), token });
const network = (notSent: boolean, transient = true): AttemptOutcome => ({
  kind: 'network',
  error: new NetworkError({ ...info, code: notSent ? 'ECONNREFUSED' : 'ECONNRESET', reason: 'x' }),
  transient,
  notSent,
});
const rateLimited = (pausedUntil = NOW + 1_000): AttemptOutcome => ({
  kind: 'rate-limited',
  error: apiError(429),
  waitMs: 1_000,
  pausedUntil,
});

/** A verdict in short: `return`, `renew`, `fail 503`, `ambiguous 503`, `retry 250ms`, `retry 0ms free` (not counted in `retries`). */
function short(v: Verdict, before: Attempt): string {
  const status = (e: Error) => (e instanceof ApiError ? String(e.status) : (e as NetworkError).code);
  switch (v.kind) {
    case 'return':
    case 'renew':
      return v.kind;
    case 'fail':
      return `fail ${status(v.error)}`;
    case 'ambiguous':
      return `ambiguous ${status(v.cause)}`;
    case 'retry':
      return `retry ${v.delayMs}ms${v.next.retriesConsumed === before.retriesConsumed ? ' free' : ''}${v.next.restartWaits > before.restartWaits ? ' restart' : ''}`;
  }
}

describe('decide', () => {
  const table: Array<[string, AttemptOutcome, Partial<Attempt>, Partial<RetryPolicy>, string]> = [
    // Success.
    ['a readable answer', { kind: 'ok' }, {}, {}, 'return'],
    ['an answer that is not JSON', { kind: 'unreadable', error: apiError(200) }, {}, {}, 'fail 200'],
    // 401: one renewal of the token the request carried, then at once again.
    ['401 with a token', refused(401, 'tok'), {}, { method: 'POST', idempotent: false }, 'renew'],
    ['401 after a renewal', refused(401, 'tok'), { authRenewed: true }, {}, 'fail 401'],
    ['401 without a token (login)', refused(401), {}, {}, 'fail 401'],
    ['renewed', { kind: 'renewal', renewed: true, error: apiError(401) }, {}, {}, 'retry 0ms free'],
    [
      'renewed, even with no retries left',
      { kind: 'renewal', renewed: true, error: apiError(401) },
      { retriesConsumed: 4 },
      {},
      'retry 0ms free',
    ],
    ['not renewable (an API key)', { kind: 'renewal', renewed: false, error: apiError(401) }, {}, {}, 'fail 401'],
    // 429: waited out, any method, without using the budget; bounded by count and deadline.
    ['429 on a POST', rateLimited(), {}, { method: 'POST', idempotent: false }, 'retry 0ms free'],
    ['429 with no retries left', rateLimited(), { retriesConsumed: 4 }, {}, 'retry 0ms free'],
    ['the 9th 429', rateLimited(), { rateLimitWaits: 8 }, {}, 'fail 429'],
    ['429 pausing past the deadline', rateLimited(NOW + 120_001), {}, {}, 'fail 429'],
    ['429 with the time up', rateLimited(), { remainingMs: 0 }, {}, 'fail 429'],
    // 5xx: by method and idempotency.
    ['503 on a GET', refused(503), {}, {}, 'retry 250ms'],
    ['503 on a GET, jitter', refused(503), { random: 0.5 }, {}, 'retry 375ms'],
    ['503 on a GET, third retry', refused(503), { retriesConsumed: 2 }, {}, 'retry 1000ms'],
    ['503 on a GET, backoff capped', refused(503), { retriesConsumed: 3 }, { maxTimeoutMs: 1_500 }, 'retry 1500ms'],
    ['503 on a GET, no retries left', refused(503), { retriesConsumed: 4 }, {}, 'fail 503'],
    ['503 on a GET with retries: 0', refused(503), {}, { retries: 0 }, 'fail 503'],
    ['503 on a GET made not idempotent', refused(503), {}, { idempotent: false }, 'fail 503'],
    ['503 on a PUT', refused(503), {}, { method: 'PUT' }, 'retry 250ms'],
    ['503 on a POST', refused(503), {}, { method: 'POST', idempotent: false }, 'ambiguous 503'],
    ['503 on a POST with an idempotency key', refused(503), {}, { method: 'POST', idempotent: true }, 'retry 250ms'],
    ['503 on a PATCH', refused(503), {}, { method: 'PATCH', idempotent: false }, 'ambiguous 503'],
    ['501 on a GET', refused(501), {}, {}, 'fail 501'],
    ['505 on a DELETE', refused(505), {}, { method: 'DELETE' }, 'ambiguous 505'],
    ['500 with the time up', refused(500), { remainingMs: 0 }, {}, 'fail 500'],
    ['500, the backoff cut to the time left', refused(500), { remainingMs: 100 }, {}, 'retry 100ms'],
    // Other 4xx.
    ['404', refused(404), {}, {}, 'fail 404'],
    ['409 on a POST', refused(409), {}, { method: 'POST', idempotent: false }, 'fail 409'],
    // Network errors: before vs after the request was sent.
    ['not sent, POST', network(true), {}, { method: 'POST', idempotent: false }, 'retry 250ms'],
    ['not sent, GET', network(true), {}, {}, 'retry 250ms'],
    ['maybe sent, GET', network(false), {}, {}, 'retry 250ms'],
    ['maybe sent, POST', network(false), {}, { method: 'POST', idempotent: false }, 'ambiguous ECONNRESET'],
    ['maybe sent, no retries left', network(false), { retriesConsumed: 4 }, {}, 'fail ECONNRESET'],
    ['not sent, the time up', network(true), { remainingMs: -5 }, { method: 'POST', idempotent: false }, 'fail ECONNREFUSED'],
    ['permanent, not sent (a certificate)', network(true, false), {}, { method: 'POST', idempotent: false }, 'fail ECONNREFUSED'],
    ['permanent, maybe sent, POST', network(false, false), {}, { method: 'POST', idempotent: false }, 'ambiguous ECONNRESET'],
    ['permanent, maybe sent, GET', network(false, false), {}, {}, 'fail ECONNRESET'],
    // Refused after the service has answered this client: a restart, waited for up to restartWindowMs.
    ['refused, the service answered before', network(true), { originAnswered: true }, {}, 'retry 250ms free restart'],
    [
      'refused, answered before, POST, no retries left',
      network(true),
      { originAnswered: true, retriesConsumed: 4 },
      { method: 'POST', idempotent: false },
      'retry 250ms free restart',
    ],
    [
      'refused, answered before, backoff capped at 2 s',
      network(true),
      { originAnswered: true, restartWaits: 6 },
      {},
      'retry 2000ms free restart',
    ],
    [
      'refused, answered before, cut to the window',
      network(true),
      { originAnswered: true, restartWaits: 6, elapsedMs: 29_900 },
      {},
      'retry 100ms free restart',
    ],
    ['refused, answered before, window over', network(true), { originAnswered: true, elapsedMs: 30_000 }, {}, 'retry 250ms'],
    [
      'refused, answered before, window over, no retries',
      network(true),
      { originAnswered: true, elapsedMs: 30_000, retriesConsumed: 4 },
      {},
      'fail ECONNREFUSED',
    ],
    ['refused, answered before, window off', network(true), { originAnswered: true }, { restartWindowMs: 0 }, 'retry 250ms'],
    ['refused, answered before, the call time up', network(true), { originAnswered: true, remainingMs: 0 }, {}, 'fail ECONNREFUSED'],
    ['maybe sent, answered before: not a restart', network(false), { originAnswered: true }, {}, 'retry 250ms'],
  ];

  it.each(table)('%s', (_name, outcome, state, set, expected) => {
    const before = attempt(state);
    expect(short(decide(outcome, before, policy(set)), before)).toBe(expected);
  });

  it('the next state: the reason, what is counted, whether an earlier attempt may have been applied', () => {
    const next = (outcome: AttemptOutcome, state: Partial<RetryState> = {}): RetryState => {
      const v = decide(outcome, attempt(state), policy());
      if (v.kind !== 'retry') throw new Error(v.kind);
      return v.next;
    };
    expect(next(refused(503))).toEqual({ ...FIRST_ATTEMPT, retriesConsumed: 1, ambiguousBefore: true, reason: 'HTTP 503' });
    expect(next(rateLimited(), { retriesConsumed: 1 })).toEqual({
      ...FIRST_ATTEMPT,
      retriesConsumed: 1,
      rateLimitWaits: 1,
      reason: '429: waiting 1000 ms',
    });
    expect(next({ kind: 'renewal', renewed: true, error: apiError(401) })).toEqual({
      ...FIRST_ATTEMPT,
      authRenewed: true,
      reason: '401: credential renewed',
    });
    expect(next(network(true))).toEqual({ ...FIRST_ATTEMPT, retriesConsumed: 1, reason: 'network error ECONNREFUSED' });
    expect(next(network(false))).toEqual({
      ...FIRST_ATTEMPT,
      retriesConsumed: 1,
      ambiguousBefore: true,
      reason: 'network error ECONNRESET',
    });
    // Once ambiguous, it stays so.
    expect(next(network(true), { ambiguousBefore: true }).ambiguousBefore).toBe(true);
  });

  it('renew carries the refused token and the 401; ambiguous and fail carry the error seen', () => {
    const outcome = refused(401, 'tok');
    expect(decide(outcome, attempt(), policy())).toEqual({ kind: 'renew', token: 'tok', error: (outcome as { error: ApiError }).error });
    const post = refused(502);
    expect(decide(post, attempt(), policy({ method: 'POST', idempotent: false }))).toEqual({
      kind: 'ambiguous',
      cause: (post as { error: ApiError }).error,
    });
  });
});

describe('backoff and retry times', () => {
  it('doubles from minTimeoutMs, times 1 to 2, capped by maxTimeoutMs', () => {
    const p = { minTimeoutMs: 250, maxTimeoutMs: 8_000 };
    expect([0, 1, 2, 3, 4, 5, 6].map((n) => backoff(n, 0, p))).toEqual([250, 500, 1000, 2000, 4000, 8000, 8000]);
    expect(backoff(0, 0.999, p)).toBe(500);
  });

  it('reads missing times as p-retry did, and refuses what it refused with its messages', () => {
    expect(retryTimes({ minTimeoutMs: 250, maxTimeoutMs: 8_000, maxElapsedMs: 120_000 })).toEqual({
      minTimeoutMs: 250,
      maxTimeoutMs: 8_000,
      maxElapsedMs: 120_000,
    });
    expect(retryTimes({})).toEqual({ minTimeoutMs: 1000, maxTimeoutMs: Infinity, maxElapsedMs: Infinity });
    expect(() => retryTimes({ minTimeoutMs: -1 })).toThrow('Expected `minTimeout` to be \u2265 0.');
    expect(() => retryTimes({ minTimeoutMs: Infinity })).toThrow('Expected `minTimeout` to be a finite number.');
    expect(() => retryTimes({ maxElapsedMs: NaN })).toThrow('Expected `maxRetryTime` to be a number or Infinity.');
  });
});
