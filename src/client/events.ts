/**
 * What the client reports through `onEvent`. Events carry methods, route patterns, URLs
 * (never with a credential), statuses and timings: no token, key, password or body.
 */
export type ClientEvent =
  | {
      type: 'response';
      method: string;
      route: string;
      url: string;
      status: number;
      attempt: number;
      durationMs: number;
      requestId?: string;
    }
  | { type: 'network_error'; method: string; route: string; url: string; code?: string; attempt: number }
  /** A 429: every request of this client to `endpoint` waits until `until` (epoch ms). */
  | { type: 'rate_limited'; endpoint: string; retryAfterMs: number; until: number }
  /** The service said only the share of the quota this client leaves to others is left: `endpoint` waits until `until`. */
  | { type: 'rate_limit_reserve'; endpoint: string; remaining: number; limit: number; until: number }
  /** A request waited for an endpoint paused by a 429 (its own or another request's) or by the reserve. */
  | { type: 'rate_limit_wait'; endpoint: string; waitedMs: number }
  | { type: 'retry'; method: string; route: string; attempt: number; reason: string }
  | { type: 'auth'; action: 'login' | 'refresh' | 'refresh_failed' | 'tokens_loaded'; detail?: string }
  | { type: 'token_store_error'; message: string };
