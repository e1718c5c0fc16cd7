import { AmbiguousRequestError, ApiError } from './errors.js';
import type { ClientEvent } from './events.js';
import { combineSignals, type Credentials, type HttpCore } from './http.js';
import type { TokenStore, Tokens } from './token-store.js';

interface TokenResponse {
  access_token: string;
  refresh_token: string;
  token_type: string;
  expires_in: number;
}

/** Resolves with `promise`, or rejects when `signal` aborts first (the promise itself goes on). */
function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** An API key: sent as is, nothing to renew. */
export class ApiKeyCredentials implements Credentials {
  readonly #key: string;
  constructor(key: string) {
    this.#key = key;
  }
  async token() {
    return this.#key;
  }
  async renew() {
    return false;
  }
  secrets() {
    return [this.#key];
  }
}

/**
 * Email and password: logs in on first use (or takes the tokens of the token store), and after
 * a 401 renews: refresh with the refresh token, or, when that is refused (spent, expired,
 * revoked) or its outcome is unknown, log in again. One renewal at a time: every request that
 * got a 401 meanwhile waits for it and then retries once with the new token.
 */
export class PasswordCredentials implements Credentials {
  readonly #email: string;
  readonly #password: string;
  #tokens: Tokens | undefined;
  #renewal: Promise<void> | undefined;
  #storeLoaded = false;
  /** Spent refresh and access tokens, kept only to redact them. */
  readonly #old: string[] = [];

  constructor(
    private readonly core: HttpCore,
    email: string,
    password: string,
    private readonly subject: string,
    private readonly store: TokenStore | undefined,
    private readonly emit: (event: ClientEvent) => void,
    private readonly clientSignal?: AbortSignal,
  ) {
    this.#email = email;
    this.#password = password;
  }

  secrets() {
    const t = this.#tokens;
    return [this.#password, ...(t ? [t.accessToken, t.refreshToken] : []), ...this.#old];
  }

  async token(signal?: AbortSignal): Promise<string> {
    while (!this.#tokens) await abortable(this.startRenewal(undefined), signal);
    return this.#tokens.accessToken;
  }

  async renew(refused: string, signal?: AbortSignal): Promise<boolean> {
    await abortable(this.startRenewal(refused), signal);
    return true;
  }

  /**
   * Logs in now (or takes the stored tokens) unless tokens are held. Unlike token(), `signal`
   * stops the login itself (its retries included), not only the wait: a caller that gives up on
   * it leaves nothing running. Calls made meanwhile join it.
   */
  async prefetch(signal?: AbortSignal): Promise<void> {
    if (this.#tokens) return;
    await this.startRenewal(undefined, signal);
  }

  /** Joins the renewal in flight, or starts one unless the refused token was already replaced. */
  private startRenewal(refused: string | undefined, signal?: AbortSignal): Promise<void> {
    if (this.#renewal) return this.#renewal;
    if (this.#tokens && refused !== undefined && this.#tokens.accessToken !== refused) return Promise.resolve();
    if (this.#tokens && refused === undefined) return Promise.resolve();
    const run = this.renewNow(combineSignals(this.clientSignal, signal)).finally(() => {
      if (this.#renewal === run) this.#renewal = undefined;
    });
    this.#renewal = run;
    return run;
  }

  private async renewNow(signal: AbortSignal | undefined): Promise<void> {
    if (!this.#storeLoaded) {
      this.#storeLoaded = true;
      const stored = await this.store?.load();
      if (stored && stored.subject === this.subject) {
        this.emit({ type: 'auth', action: 'tokens_loaded' });
        // Used as is: when its access token has expired, the 401 brings us back here to refresh.
        if (!this.#tokens) {
          this.#tokens = stored;
          return;
        }
      }
    }
    const current = this.#tokens;
    if (current) {
      try {
        const res = await this.core.call<TokenResponse>({
          method: 'POST',
          route: '/auth/refresh',
          body: { refresh_token: current.refreshToken },
          auth: false,
          // A refresh token is single use: after an unclear outcome it may be spent, and
          // presenting it again would revoke the session. Never re-sent; log in instead.
          idempotent: false,
          signal,
        });
        this.emit({ type: 'auth', action: 'refresh' });
        await this.adopt(res.body);
        return;
      } catch (err) {
        const refused = err instanceof ApiError && err.status === 401;
        if (!refused && !(err instanceof AmbiguousRequestError)) throw err;
        this.emit({ type: 'auth', action: 'refresh_failed', detail: err instanceof ApiError ? err.serverMessage : 'outcome unknown' });
      }
    }
    const res = await this.core.call<TokenResponse>({
      method: 'POST',
      route: '/auth/login',
      body: { email: this.#email, password: this.#password },
      auth: false,
      // A repeated login only opens another session: safe to re-send.
      idempotent: true,
      signal,
    });
    this.emit({ type: 'auth', action: 'login' });
    await this.adopt(res.body);
  }

  /** Takes a new pair and persists it before anything uses it. */
  private async adopt(body: TokenResponse): Promise<void> {
    if (this.#tokens) this.#old.push(this.#tokens.accessToken, this.#tokens.refreshToken);
    if (this.#old.length > 64) this.#old.splice(0, this.#old.length - 64);
    const tokens: Tokens = {
      accessToken: body.access_token,
      refreshToken: body.refresh_token,
      expiresAt: new Date(Date.now() + body.expires_in * 1000).toISOString(),
      subject: this.subject,
    };
    this.#tokens = tokens;
    if (!this.store) return;
    try {
      await this.store.save(tokens);
    } catch (err) {
      // The tokens work; only a restart would have to log in again.
      this.emit({ type: 'token_store_error', message: this.core.redact((err as Error).message) });
    }
  }
}
