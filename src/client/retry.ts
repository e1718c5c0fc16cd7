import type { ApiError, NetworkError } from './errors.js';

/**
 * Whether a call is tried again, after what delay, and with which error it ends otherwise: one
 * pure function of what the last attempt came to and what the earlier ones did (as undici's
 * retry handler decides). HttpCore.call sends, records and waits; this decides.
 *
 * - 401 with a bearer token: the credential is renewed once, then the call is sent again at once.
 * - 429: the endpoint is paused for the Retry-After (the gate, before the next attempt) and the
 *   call sent again, any method (the service rate-limits before it does anything), at most
 *   `maxRateLimitWaits` times and never past the call's deadline.
 * - 5xx (but 501, 505) and transient network errors: retried with backoff when the call is safe
 *   to repeat, or when the request was certainly never sent; these retries use up `retries`.
 *   What is not safe to repeat and may have been received is ambiguous: the caller finds out.
 * - A connection refused (nothing sent) after the service has answered this client before: retried
 *   with backoff (at most RESTART_MAX_DELAY_MS apart) for up to `restartWindowMs` of the call,
 *   without using up `retries`: the service is restarting.
 * - Waiting out a 429 and the retry after a renewal do not use up `retries`; every retry stops
 *   once the call's time (`maxElapsedMs`) is up, and then the last error is the call's.
 */

/** The longest wait between two tries while the service restarts: it is back within a second or two of listening. */
export const RESTART_MAX_DELAY_MS = 2_000;

/** What one attempt of a call came to. */
export type AttemptOutcome =
  /** A success status with a readable body. */
  | { kind: 'ok' }
  /** A success status whose body is not JSON (`error` says so). */
  | { kind: 'unreadable'; error: ApiError }
  /** An error status other than 429. `token`: the bearer token the request carried. */
  | { kind: 'refused'; status: number; error: ApiError; token?: string }
  /** 429: the endpoint is paused until `pausedUntil` (epoch ms), `waitMs` from the answer. */
  | { kind: 'rate-limited'; error: ApiError; waitMs: number; pausedUntil: number }
  /** After a 401 (verdict `renew`): whether the credential was renewed. */
  | { kind: 'renewal'; renewed: boolean; error: ApiError }
  /** No answer. `transient`: another try may work; `notSent`: the request never left. */
  | { kind: 'network'; error: NetworkError; transient: boolean; notSent: boolean };

/** What the attempts of one call so far have done (the state the decision carries). */
export interface RetryState {
  /** Retries counted against `retries` (5xx and network errors). */
  retriesConsumed: number;
  /** 429 answers waited out. */
  rateLimitWaits: number;
  /** The credential was renewed once already (a second 401 is final). */
  authRenewed: boolean;
  /** An earlier attempt may have been applied (a 5xx, or a connection lost after sending). */
  ambiguousBefore: boolean;
  /** Tries made while the service seemed to restart (refused connections after it had answered). */
  restartWaits: number;
  /** Why the coming attempt is made (the `retry` event's reason); empty before the first retry. */
  reason: string;
}

export const FIRST_ATTEMPT: RetryState = Object.freeze({
  retriesConsumed: 0,
  rateLimitWaits: 0,
  authRenewed: false,
  ambiguousBefore: false,
  restartWaits: 0,
  reason: '',
});

/** The state when deciding, and the two readings the decision needs besides. */
export interface Attempt extends RetryState {
  /** What is left of the call's time (`maxElapsedMs`), in ms. */
  remainingMs: number;
  /** How long the call has taken so far, in ms. */
  elapsedMs: number;
  /** The service has answered this client before (so a refused connection is a restart, not a wrong address). */
  originAnswered: boolean;
  /** A random number in [0, 1): the backoff's jitter. */
  random: number;
}

/** The fixed part: the call's method and settings. */
export interface RetryPolicy {
  method: string;
  /** The call may be sent again after an ambiguous failure. */
  idempotent: boolean;
  retries: number;
  minTimeoutMs: number;
  maxTimeoutMs: number;
  maxRateLimitWaits: number;
  /** See RetryOptions.restartWindowMs. */
  restartWindowMs: number;
  /** Epoch ms: a pause (Retry-After) that ends later is not waited out. */
  deadline: number;
}

export type Verdict =
  | { kind: 'return' }
  /** Send again after `delayMs`, with `next` as the state. */
  | { kind: 'retry'; delayMs: number; next: RetryState }
  /** Renew `token`, the credential the request carried, then decide on a `renewal` outcome. */
  | { kind: 'renew'; token: string; error: ApiError }
  /** The call fails with `error`, as it is. */
  | { kind: 'fail'; error: Error }
  /** The request may or may not have been applied: the call fails with an AmbiguousRequestError of `cause`. */
  | { kind: 'ambiguous'; cause: ApiError | NetworkError };

/** The backoff before retry number `consumed + 1`: doubling from minTimeoutMs, times [1, 2), capped. */
export function backoff(consumed: number, random: number, policy: Pick<RetryPolicy, 'minTimeoutMs' | 'maxTimeoutMs'>): number {
  return Math.min(Math.round((random + 1) * policy.minTimeoutMs * 2 ** consumed), policy.maxTimeoutMs);
}

const fail = (error: Error): Verdict => ({ kind: 'fail', error });

const stateOf = (a: Attempt): RetryState => ({
  retriesConsumed: a.retriesConsumed,
  rateLimitWaits: a.rateLimitWaits,
  authRenewed: a.authRenewed,
  ambiguousBefore: a.ambiguousBefore,
  restartWaits: a.restartWaits,
  reason: a.reason,
});

/** A refused connection while the service restarts: tried again with backoff, until the window ends. */
function waitForRestart(error: NetworkError, a: Attempt, policy: RetryPolicy): Verdict | undefined {
  const left = Math.min(policy.restartWindowMs - a.elapsedMs, a.remainingMs);
  if (!a.originAnswered || left <= 0) return undefined;
  const delayMs = Math.min(
    backoff(a.restartWaits, a.random, { minTimeoutMs: policy.minTimeoutMs, maxTimeoutMs: RESTART_MAX_DELAY_MS }),
    left,
  );
  const reason = `network error ${error.code}: waiting for the service to come back`;
  return { kind: 'retry', delayMs, next: { ...stateOf(a), restartWaits: a.restartWaits + 1, reason } };
}

/**
 * A retry, unless the call's time is up or (for one that uses the budget) the budget is:
 * then `error` ends the call. A free retry goes at once; the others after the backoff.
 */
function retry(error: Error, a: Attempt, policy: RetryPolicy, free: boolean, next: Partial<RetryState> & { reason: string }): Verdict {
  if (a.remainingMs <= 0) return fail(error);
  if (free) return { kind: 'retry', delayMs: 0, next: { ...stateOf(a), ...next } };
  if (!(a.retriesConsumed < policy.retries)) return fail(error);
  const delayMs = Math.min(backoff(a.retriesConsumed, a.random, policy), a.remainingMs);
  return { kind: 'retry', delayMs, next: { ...stateOf(a), ...next, retriesConsumed: a.retriesConsumed + 1 } };
}

/** What to do after an attempt (see the top of this file). */
export function decide(outcome: AttemptOutcome, attempt: Attempt, policy: RetryPolicy): Verdict {
  switch (outcome.kind) {
    case 'ok':
      return { kind: 'return' };
    case 'unreadable':
      return fail(outcome.error);
    case 'renewal':
      return outcome.renewed
        ? retry(outcome.error, attempt, policy, true, { authRenewed: true, reason: '401: credential renewed' })
        : fail(outcome.error);
    case 'rate-limited': {
      const waits = attempt.rateLimitWaits + 1;
      if (waits > policy.maxRateLimitWaits || outcome.pausedUntil > policy.deadline) return fail(outcome.error);
      // The service rate-limits before it does anything, so any method may be sent again.
      return retry(outcome.error, attempt, policy, true, { rateLimitWaits: waits, reason: `429: waiting ${outcome.waitMs} ms` });
    }
    case 'refused': {
      const { status, error } = outcome;
      if (status === 401 && outcome.token && !attempt.authRenewed) return { kind: 'renew', token: outcome.token, error };
      if (status < 500) return fail(error);
      if (policy.idempotent && status !== 501 && status !== 505)
        return retry(error, attempt, policy, false, { ambiguousBefore: true, reason: `HTTP ${status}` });
      return policy.method === 'GET' ? fail(error) : { kind: 'ambiguous', cause: error };
    }
    case 'network': {
      const { error, transient, notSent } = outcome;
      const restarting = transient && notSent ? waitForRestart(error, attempt, policy) : undefined;
      if (restarting) return restarting;
      if (transient && (notSent || policy.idempotent)) {
        const ambiguousBefore = attempt.ambiguousBefore || !notSent;
        return retry(error, attempt, policy, false, { ambiguousBefore, reason: `network error ${error.code}` });
      }
      // Not safe to repeat and maybe received: the caller has to find out what happened.
      if (!notSent && !policy.idempotent) return { kind: 'ambiguous', cause: error };
      return fail(error);
    }
  }
}

/**
 * The backoff times as p-retry read them (HttpCore.call went through it before): its defaults for
 * missing values and its checks, with its messages.
 */
export function retryTimes(retry: { minTimeoutMs?: number; maxTimeoutMs?: number; maxElapsedMs?: number }) {
  const check = (name: string, value: number, allowInfinity: boolean) => {
    if (typeof value !== 'number' || Number.isNaN(value))
      throw new TypeError(`Expected \`${name}\` to be a number${allowInfinity ? ' or Infinity' : ''}.`);
    if (!allowInfinity && !Number.isFinite(value)) throw new TypeError(`Expected \`${name}\` to be a finite number.`);
    if (value < 0) throw new TypeError(`Expected \`${name}\` to be \u2265 0.`);
    return value;
  };
  return {
    minTimeoutMs: check('minTimeout', retry.minTimeoutMs ?? 1000, false),
    maxTimeoutMs: check('maxTimeout', retry.maxTimeoutMs ?? Number.POSITIVE_INFINITY, true),
    maxElapsedMs: check('maxRetryTime', retry.maxElapsedMs ?? Number.POSITIVE_INFINITY, true),
  };
}
