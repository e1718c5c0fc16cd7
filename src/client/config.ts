import { ClientConfigError } from './errors.js';
import { readSecretFile } from '../secret-file.js';
import type { TokenStore } from './token-store.js';
import type { ClientEvent } from './events.js';

/** How retries behave. Every wait (backoff and Retry-After) counts against `maxElapsedMs`. */
export interface RetryOptions {
  /**
   * Retries after a 5xx or network error of a request that is safe to repeat (default 4, so at
   * most 5 attempts). 0 turns those off; waiting out a 429 and the one retry after a token
   * renewal are bounded by maxRateLimitWaits and maxElapsedMs instead.
   */
  retries: number;
  /** First backoff delay (default 250 ms); doubles per retry, times a random factor in [1, 2) (jitter). */
  minTimeoutMs: number;
  /** Cap of one backoff delay (default 8 s). */
  maxTimeoutMs: number;
  /** Cap of the whole call, waits included (default 120 s). A Retry-After that ends later fails at once with the 429. */
  maxElapsedMs: number;
  /** How many 429 answers one call waits out before giving up (default 8). */
  maxRateLimitWaits: number;
  /**
   * Once the service has answered this client, how long a call keeps trying while connections are
   * refused (nothing was sent, so any method may be sent again), not counted in `retries` (default
   * 30 s): a restart or rolling upgrade of the service is ridden out, as Go providers' clients do.
   * Before the first answer a refused connection counts as any network error, so a wrong URL or
   * port still fails in about 4 s. 0 turns it off.
   */
  restartWindowMs: number;
}

export const DEFAULT_RETRY: RetryOptions = {
  retries: 4,
  minTimeoutMs: 250,
  maxTimeoutMs: 8_000,
  maxElapsedMs: 120_000,
  maxRateLimitWaits: 8,
  restartWindowMs: 30_000,
};

export interface ClientConfig {
  /** `https://<tenant>.localhost:8443` (the client appends `/api/v1`; a URL that already ends with it is kept). */
  url: string;
  /** API key (`dpk_...`): bound to one project, never expires unless revoked. */
  apiKey?: string;
  /** User login: the client logs in on first use and refreshes the token on 401. */
  email?: string;
  password?: string;
  /** Where the rotating refresh token is kept between runs (user login only). */
  tokenStore?: TokenStore;
  /** PEM file of a CA to trust in addition to the system's (the service's `<data-dir>/tls/ca.pem`). */
  caFile?: string;
  /** PEM text of a CA, instead of `caFile`. */
  ca?: string | Buffer;
  /** Skip certificate verification altogether. Only for throwaway local setups. */
  insecure?: boolean;
  retry?: Partial<RetryOptions>;
  /**
   * Retry a PATCH after an ambiguous failure (5xx, connection lost after sending). Off by
   * default: see docs/guides/client.md ("Retries").
   */
  retryPatch?: boolean;
  /**
   * The share of each endpoint's quota this client leaves to the tenant's other callers (default
   * 0.2; 0 spends it all): once the service's `RateLimit-Remaining` is at or below it, the client
   * waits for the window to end (`RateLimit-Reset`) instead of spending the rest. The quota is the
   * tenant's, shared by every user, key, pipeline and tool; a plan of 100,000 resources reads about
   * 880 pages of one endpoint and took all of a 600-a-minute quota, its other users' calls 429.
   */
  rateLimitReserve?: number;
  /** Per-request timeout for the answer's headers and for body inactivity (default 60 s). */
  timeoutMs?: number;
  /** Connections per origin (default 16). */
  connections?: number;
  /** Aborts every request of this client. Each call can also take its own signal. */
  signal?: AbortSignal;
  /** Observability hook: responses, retries, rate limiting, logins, refreshes. Events never hold secrets. */
  onEvent?: (event: ClientEvent) => void;
  userAgent?: string;
}

const truthy = (v: string | undefined) => v !== undefined && /^(1|true|yes|on)$/i.test(v.trim());
const present = (v: string | undefined) => (v !== undefined && v.trim() !== '' ? v : undefined);

/**
 * Configuration from the environment:
 *
 * | variable | meaning |
 * |---|---|
 * | `DATAPLATFORM_URL` | `https://acme.localhost:8443` (required) |
 * | `DATAPLATFORM_API_KEY` | API key auth |
 * | `DATAPLATFORM_EMAIL`, `DATAPLATFORM_PASSWORD` | user auth (both) |
 * | `DATAPLATFORM_CA_FILE` | extra CA to trust |
 * | `DATAPLATFORM_INSECURE` | `1`/`true`: skip certificate verification |
 * | `DATAPLATFORM_API_KEY_FILE`, `DATAPLATFORM_PASSWORD_FILE` | the same from mounted secret files (they win over the variables) |
 *
 * `overrides` win over the environment (a token store, events, retry settings...).
 */
export function clientConfigFromEnv(env: NodeJS.ProcessEnv = process.env, overrides: Partial<ClientConfig> = {}): ClientConfig {
  const url = present(env.DATAPLATFORM_URL);
  // Named here: validateConfig's "caFile or insecure" would name neither variable.
  if (present(env.DATAPLATFORM_CA_FILE) && truthy(env.DATAPLATFORM_INSECURE) && !('caFile' in overrides) && !('insecure' in overrides))
    throw new ClientConfigError(
      'DATAPLATFORM_CA_FILE and DATAPLATFORM_INSECURE are both set: unset one (a CA to trust, or no verification at all)',
    );
  // Mounted secret files, as the controller reads them: flags and other overrides first, then the
  // files, then the variables. A key file is the credential, as --api-key is (the login variables
  // are left aside); a password file gives the password of DATAPLATFORM_EMAIL.
  const keyFromFile = 'apiKey' in overrides ? undefined : apiKeyFromFile(env);
  const config: ClientConfig = {
    url: url ?? '',
    apiKey: keyFromFile ?? present(env.DATAPLATFORM_API_KEY),
    email: keyFromFile ? undefined : present(env.DATAPLATFORM_EMAIL),
    password: keyFromFile || 'password' in overrides ? undefined : passwordFromEnv(env),
    caFile: present(env.DATAPLATFORM_CA_FILE),
    insecure: truthy(env.DATAPLATFORM_INSECURE) || undefined,
    ...overrides,
  };
  if (!config.url) throw new ClientConfigError('DATAPLATFORM_URL is not set (for example https://acme.localhost:8443)');
  validateConfig(config);
  return config;
}

/** DATAPLATFORM_API_KEY_FILE's key, if the variable is set (the file must then be readable). */
export function apiKeyFromFile(env: NodeJS.ProcessEnv): string | undefined {
  return secretFromFile('DATAPLATFORM_API_KEY_FILE', present(env.DATAPLATFORM_API_KEY_FILE));
}

/** The environment's password: DATAPLATFORM_PASSWORD_FILE's, else DATAPLATFORM_PASSWORD (as given: a password may have spaces). */
export function passwordFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  const fromFile = secretFromFile('DATAPLATFORM_PASSWORD_FILE', present(env.DATAPLATFORM_PASSWORD_FILE));
  return fromFile ?? (env.DATAPLATFORM_PASSWORD === '' ? undefined : env.DATAPLATFORM_PASSWORD);
}

/**
 * A credential from a mounted secret file (a Kubernetes or CI secret): a regular file of at most
 * 1 MiB (never a pipe or a device, which would read or wait forever), without the trailing newline
 * editors and `kubectl create secret` leave. Errors name the setting (`name`: a variable or a flag)
 * and the path, never the content.
 */
export function secretFromFile(name: string, path: string | undefined): string | undefined {
  if (!path) return undefined;
  let text: string;
  try {
    text = readSecretFile(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ClientConfigError(`${name} ${path}: ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  const value = text.replace(/\r?\n$/, '');
  if (!value) throw new ClientConfigError(`${name} ${path} is empty`);
  return value;
}

/** Checks a configuration; messages name settings, never their secret values. */
export function validateConfig(config: ClientConfig): void {
  if (!config.url) throw new ClientConfigError('url is required (for example https://acme.localhost:8443)');
  let parsed: URL;
  try {
    parsed = new URL(config.url);
  } catch {
    throw new ClientConfigError(`url is not a valid URL: ${JSON.stringify(config.url)}`);
  }
  if (parsed.protocol !== 'https:')
    throw new ClientConfigError(`url must use https:// (the API refuses plain HTTP); got ${parsed.protocol}//${parsed.host}`);
  if (parsed.username || parsed.password) throw new ClientConfigError('url must not contain credentials; use apiKey or email and password');
  const userAuth = config.email !== undefined || config.password !== undefined;
  if (config.apiKey && userAuth) throw new ClientConfigError('give either an API key or an email and password, not both');
  if (!config.apiKey && !userAuth)
    throw new ClientConfigError(
      'no credentials: give an API key (DATAPLATFORM_API_KEY) or an email and password (DATAPLATFORM_EMAIL, DATAPLATFORM_PASSWORD)',
    );
  if (userAuth && (!config.email || !config.password)) throw new ClientConfigError('user login needs both an email and a password');
  if (config.tokenStore && config.apiKey) throw new ClientConfigError('a token store is only used with email and password login');
  if (config.insecure && (config.caFile || config.ca)) throw new ClientConfigError('give either a CA (caFile) or insecure: true, not both');
}

/** `https://acme.localhost:8443` -> `https://acme.localhost:8443/api/v1` (no trailing slash). */
export function apiBase(url: string): string {
  const u = new URL(url);
  u.search = '';
  u.hash = '';
  let path = u.pathname.replace(/\/+$/, '');
  if (!/\/api\/v1$/.test(path)) path = `${path}/api/v1`;
  return `${u.origin}${path}`;
}
