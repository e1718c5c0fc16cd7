/**
 * The client's errors. None of them ever carries a token, API key or password: messages are
 * built from the method, the route, the URL (which never holds a credential) and the
 * server's error envelope, and pass through the client's redactor as a second line of defence.
 */

import { apiCodeForStatus, type ApiErrorCode } from '../kinds/errors.js';

/** The spec's error codes (section 7, catalogued in kinds/errors.ts). Anything else the server might send is kept as a string. */
export type ErrorCode = ApiErrorCode | (string & {});

export interface ErrorDetail {
  field: string;
  message: string;
}

/** Base class of every error this client throws (except an AbortSignal's own reason). */
export class DataPlatformError extends Error {
  override name = 'DataPlatformError';
}

/** Bad client configuration (missing URL, both an API key and a password, unreadable CA file...). */
export class ClientConfigError extends DataPlatformError {
  override name = 'ClientConfigError';
}

export interface RequestInfo {
  method: string;
  /** Route pattern, e.g. `GET /projects/{id}/connectors` has route `/projects/{id}/connectors`. */
  route: string;
  /** Full URL with query, never with a credential. */
  url: string;
}

/** The service answered with an error status (the spec's envelope, or whatever a proxy sent). */
export class ApiError extends DataPlatformError {
  override name = 'ApiError';
  readonly status: number;
  readonly code: ErrorCode;
  /** The server's `error.message`, as sent. `message` adds status, code, route and request id. */
  readonly serverMessage: string;
  readonly details: ErrorDetail[];
  /** `X-Request-Id` of the answer, to quote to support. */
  readonly requestId: string | undefined;
  readonly method: string;
  readonly route: string;
  readonly url: string;
  /** For 429: how long the server asked to wait. */
  readonly retryAfterMs: number | undefined;
  /** Which attempt got this answer (1 = the first). */
  readonly attempt: number;
  /** An earlier attempt of the same call failed ambiguously (it may have been applied). */
  readonly afterAmbiguousFailure: boolean;

  constructor(
    init: RequestInfo & {
      status: number;
      code: ErrorCode;
      serverMessage: string;
      details?: ErrorDetail[];
      requestId?: string;
      retryAfterMs?: number;
      attempt?: number;
      afterAmbiguousFailure?: boolean;
    },
  ) {
    const rid = init.requestId ? `, request id ${init.requestId}` : '';
    super(`${init.serverMessage} (HTTP ${init.status} ${init.code} on ${init.method} ${init.route}${rid})`);
    this.status = init.status;
    this.code = init.code;
    this.serverMessage = init.serverMessage;
    this.details = init.details ?? [];
    this.requestId = init.requestId;
    this.method = init.method;
    this.route = init.route;
    this.url = init.url;
    this.retryAfterMs = init.retryAfterMs;
    this.attempt = init.attempt ?? 1;
    this.afterAmbiguousFailure = init.afterAmbiguousFailure ?? false;
  }
}

/** No HTTP answer: connection refused or reset, DNS, TLS, timeout. Carries the URL, never a token. */
export class NetworkError extends DataPlatformError {
  override name = 'NetworkError';
  readonly method: string;
  readonly route: string;
  readonly url: string;
  /** The system or undici error code (ECONNREFUSED, UND_ERR_SOCKET, SELF_SIGNED_CERT_IN_CHAIN, ...). */
  readonly code: string | undefined;

  constructor(init: RequestInfo & { code?: string; reason: string; cause?: unknown }) {
    super(`${init.method} ${init.url} failed: ${init.reason}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.method = init.method;
    this.route = init.route;
    this.url = init.url;
    this.code = init.code;
  }
}

/**
 * A request that is not safe to repeat failed after it may have reached the server (the
 * connection dropped after it was sent, or a 5xx answer): it may or may not have been
 * applied, so it was not re-sent. `cause` is the NetworkError or ApiError seen.
 */
export class AmbiguousRequestError extends DataPlatformError {
  override name = 'AmbiguousRequestError';
  readonly method: string;
  readonly route: string;
  readonly url: string;

  constructor(init: RequestInfo & { cause: NetworkError | ApiError; what?: string }) {
    super(
      `${init.what ?? `${init.method} ${init.route}`} may or may not have been applied: ${init.cause.message}. It was not re-sent; check the current state before trying again`,
      { cause: init.cause },
    );
    this.method = init.method;
    this.route = init.route;
    this.url = init.url;
  }
}

export interface CreateIdentity {
  kind: string;
  scope: 'tenant' | 'project';
  /** Set for project-scoped kinds. */
  projectId?: string;
  /** The kind's identity field and the value sent (`name`, or `email` for users). */
  identity: { field: string; value: string };
}

/**
 * A create (POST) failed ambiguously. The resource may exist now: look it up by its identity
 * (`client.resources(kind, { projectId }).findByName(identity.value)`) before creating it again.
 */
export class AmbiguousCreateError extends AmbiguousRequestError {
  override name = 'AmbiguousCreateError';
  readonly kind: string;
  readonly scope: 'tenant' | 'project';
  readonly projectId: string | undefined;
  readonly identity: { field: string; value: string };

  constructor(init: RequestInfo & { cause: NetworkError | ApiError; create: CreateIdentity }) {
    const c = init.create;
    const where = c.scope === 'project' ? ` in project ${c.projectId}` : '';
    super({ ...init, what: `Creating ${c.kind} ${c.identity.field}=${JSON.stringify(c.identity.value)}${where}` });
    this.kind = c.kind;
    this.scope = c.scope;
    this.projectId = c.projectId;
    this.identity = c.identity;
  }
}

/** The code the spec uses for a status, for answers that do not carry the envelope. */
export const codeForStatus = (status: number): ErrorCode => apiCodeForStatus(status);
